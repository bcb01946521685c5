// The Search tab: what it draws for a known search (front, chosen point, measured runs, the module × candidate
// heatmap with the allocation), a clicked point's recipe, and the workbench running a search on ref-tiny through
// its worker and loading a front point into the Recipe dock.
#include <gtest/gtest.h>

#include <QApplication>
#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QComboBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <fstream>
#include <qcustomplot.h>

#include "SharedData.h"
#include "WidgetTestSupport.h"
#include "app/gui/MainWindow.h"
#include "compress/ModulePlan.h"
#include "compress/Recipe.h"
#include "search/Search.h"
#include "widgets/RecipePanel.h"
#include "widgets/RunHistory.h"
#include "widgets/SearchView.h"

namespace pareto {
namespace {

using nlohmann::json;
using test::str;

const json kCalibration = {{"source", "text"}, {"text", "/data/calib.txt"}, {"tokens", 512}};

// Two modules, three candidates (int4 cannot apply to the second), losses set by hand.
std::shared_ptr<SearchReport> handReport() {
  auto r = std::make_shared<SearchReport>();
  r->base = searchBaseFromJson(
      {{"calibration", kCalibration},
       {"candidates", {{{"name", "dense"}},
                       {{"name", "int8"}, {"quantize", {{"method", "rtn"}, {"bits", 8}, {"granularity", "channel"}}}},
                       {{"name", "int4"}, {"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 20}}}}}}},
      "", "base.json");
  SensitivityTable& t = r->table;
  t.candidates = {"dense", "int8", "int4"};
  for (const char* name : {"model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"}) {
    SensitivityModule m;
    m.name = name;
    m.rows = m.cols = 100;
    m.cells = {{true, "", "dense", "dense", "", 20000, 0.0},
               {true, "", "int8-channel", "int8-channel", "", 10200, 1.0},
               {true, "", "int4-g20", "", "", 6000, 5.0}};
    t.modules.push_back(m);
  }
  t.modules[1].cells[2] = {false, "model.layers.0.mlp.down_proj: refused", "", "", "", 0, 0};
  t.linearWeights = 20000;
  t.measured = true;
  t.calibrationTokens = 512;
  DecodeBandwidth bw;
  bw.bytesPerSecond = 1e9;
  r->budget = {BudgetKind::BitsPerWeight, 6.5};
  r->front = searchFront(t, BudgetKind::BitsPerWeight, bw);
  const SearchPoint& chosen = chooseForBudget(r->front, r->budget);
  r->chosen = size_t(&chosen - r->front.points.data());
  return r;
}

TEST(SearchView, DrawsTheFrontTheHeatmapAndLoadsAClickedPoint) {
  RunHistory history;
  SearchView view(&history);
  view.resize(1000, 600);
  view.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
  view.setModelDir("/models/m");
  RunRecord measured;
  measured.modelDir = "/models/m";
  measured.metrics = {{"linear_bits_per_weight", 6.2}, {"kl_mean", 0.01}};
  history.add(measured);
  RunRecord other = measured;
  other.modelDir = "/models/other";   // another model: not drawn
  history.add(other);

  const std::shared_ptr<SearchReport> report = handReport();
  view.setSearch(report);
  ASSERT_TRUE(view.hasData());
  // Which estimate the front shows: the output error of an unrefined table, predicted KL of a refined one.
  EXPECT_TRUE(view.refineRequested());   // on by default
  EXPECT_TRUE(view.frontPlot()->yAxis->label().contains("tr(")) << str(view.frontPlot()->yAxis->label());
  {
    auto refined = std::make_shared<SearchReport>(*report);
    refined->table.refinement = {true, "int8", 2, 256, 2};
    view.setSearch(refined);
    EXPECT_TRUE(view.frontPlot()->yAxis->label().contains("predicted KL")) << str(view.frontPlot()->yAxis->label());
    view.setSearch(report);
  }
  // Front: (int8, int8) 16200 bytes, (int4, int8) 16200 − 4200 = 12000... every point but all-dense is drawn.
  const size_t points = report->front.points.size();
  EXPECT_EQ(view.frontPlot()->graph(0)->dataCount(), int(points) - 1);
  EXPECT_EQ(view.frontPlot()->graph(1)->dataCount(), 1);   // the chosen point
  EXPECT_EQ(view.frontPlot()->graph(2)->dataCount(), 1);   // the measured run of this model
  EXPECT_TRUE(view.title().contains(QString::number(points))) << str(view.title());

  auto* map = qobject_cast<QCPColorMap*>(view.heatmap()->plottable(0));
  ASSERT_NE(map, nullptr);
  EXPECT_NEAR(map->data()->cell(2, 0), std::log10(5.0), 1e-12);
  EXPECT_TRUE(std::isnan(map->data()->cell(2, 1)));   // int4 cannot apply to down_proj: blank
  EXPECT_NEAR(map->data()->cell(1, 1), 0.0, 1e-12);   // log10(1)
  EXPECT_EQ(view.heatmap()->graph(0)->dataCount(), 2);   // one allocation marker per module

  // Clicking a front point loads its recipe: one override per module, exactly the point's choice.
  QSignalSpy chosen(&view, &SearchView::recipeChosen);
  QApplication::processEvents();
  view.frontPlot()->replot();
  const size_t pick = report->chosen;
  ASSERT_GT(report->front.points[pick].loss, 0);
  const QPointF pixel(view.frontPlot()->xAxis->coordToPixel(report->front.points[pick].bitsPerWeight),
                      view.frontPlot()->yAxis->coordToPixel(report->front.points[pick].loss));
  QTest::mouseClick(view.frontPlot(), Qt::LeftButton, Qt::NoModifier, pixel.toPoint());
  ASSERT_EQ(chosen.count(), 1);
  const json recipe = chosen.first().first().value<json>();
  const Recipe parsed = Recipe::fromJson(recipe, "", "clicked");
  ASSERT_EQ(parsed.overrides.size(), 2u);
  for (size_t m = 0; m < 2; ++m) {
    const std::string& name = report->table.modules[m].name;
    const ModulePlan plan = planModule(parsed, name, 100, 100);
    EXPECT_EQ(plan.format.name(), report->table.modules[m].cells[size_t(report->front.points[pick].choice[m])].format);
  }

  QTemporaryDir dir;
  QString error;
  ASSERT_TRUE(view.writeCsv(dir.filePath("search.csv"), &error)) << str(error);

  QSignalSpy requested(&view, &SearchView::searchRequested);
  view.baseRecipeEdit()->setText("/bases/b.json");
  view.budgetKind()->setCurrentIndex(2);
  view.budgetValue()->setValue(250);
  view.searchButton()->click();
  ASSERT_EQ(requested.count(), 1);
  EXPECT_EQ(requested.first().at(0).toString(), "/bases/b.json");
  EXPECT_EQ(requested.first().at(1).toInt(), 2);
  EXPECT_DOUBLE_EQ(requested.first().at(2).toDouble(), 250);
}

class WorkbenchSearch : public test::SettingsTest {};

TEST_F(WorkbenchSearch, RunsOnTheWorkerAndLoadsAFrontPointIntoTheRecipeDock) {
  if (!test::sharedAvailable()) GTEST_SKIP() << "shared data not found at " << test::sharedDir();
  test::TestWindow t;
  EXPECT_FALSE(t.window.startSearch("/nonexistent.json", 0, 5));   // no model yet
  EXPECT_TRUE(t.errors.join("\n").contains("Open a model first")) << str(t.errors.join("\n"));
  t.errors.clear();
  ASSERT_TRUE(t.window.openModel(QString::fromStdString(test::sharedPath("models/ref-tiny"))));
  const std::string base = test::scratchDir("widgets-search") + "/base.json";
  std::ofstream(base) << json{{"calibration", {{"source", "text"}, {"text", test::sharedPath("data/wikitext2-test.txt")},
                                               {"tokens", 1024}, {"window", 128}}},
                              {"candidates", {{{"name", "dense"}},
                                              {{"name", "int8"}, {"quantize", {{"method", "rtn"}, {"bits", 8}, {"granularity", "channel"}}}},
                                              {{"name", "gptq4"}, {"quantize", {{"method", "gptq"}, {"bits", 4}, {"group_size", 64}}}}}}}
                             .dump();
  QSignalSpy ended(&t.window, &MainWindow::searchEnded);
  t.window.searchView()->refineBox()->setChecked(false);   // the request carries the box: the plain estimate
  ASSERT_TRUE(t.window.startSearch(QString::fromStdString(base), 0, 6.0)) << str(t.errors.join("\n"));
  EXPECT_TRUE(t.window.isSearching());
  ASSERT_TRUE(test::waitForSignals(ended));
  ASSERT_TRUE(ended.first().first().toBool()) << str(ended.first().at(1).toString());
  EXPECT_FALSE(t.window.isSearching());
  SearchView* view = t.window.searchView();
  ASSERT_TRUE(view->hasData());
  view->choosePoint(0);   // the cheapest point: gptq4 on every module
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
  const json loaded = t.window.recipePanel()->recipeJson();
  ASSERT_TRUE(loaded.contains("overrides")) << loaded.dump();
  EXPECT_EQ(loaded.at("overrides").size(), 28u);   // ref-tiny: 4 layers × 7 linears
  EXPECT_TRUE(view->frontPlot()->yAxis->label().contains("tr(")) << str(view->frontPlot()->yAxis->label());
}

}  // namespace
}  // namespace pareto
