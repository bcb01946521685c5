// The plot tabs and the run history: what they draw for known results, the Pareto front, clicking a point,
// comparing runs, exports, and the Hugging Face cache discovery of the Model dock.
#include <gtest/gtest.h>

#include <QAbstractItemModel>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeWidget>
#include <cmath>
#include <nlohmann/json.hpp>
#include <qcustomplot.h>

#include "WidgetTestSupport.h"
#include "analysis/ActivationDrift.h"
#include "analysis/HessianStudy.h"
#include "app/gui/HuggingFaceCache.h"
#include "widgets/DiscrepancyView.h"
#include "widgets/DriftView.h"
#include "widgets/EvaluationPanel.h"
#include "widgets/GenerationPanel.h"
#include "widgets/ParetoFront.h"
#include "widgets/ParetoView.h"
#include "widgets/PlotSupport.h"
#include "widgets/RunCompareView.h"
#include "widgets/RunHistory.h"
#include "widgets/RunsPanel.h"

namespace pareto {
namespace {

using test::str;

RunRecord run(double ppl, double nll, double bits, double tokensPerSecond) {
  RunRecord r;
  r.recipeJson = R"({"prune": {"method": "magnitude", "pattern": "2:4"}})";
  r.finishedAt = QDateTime::currentDateTime();
  r.metrics = {{metric::kPerplexity, ppl},
               {metric::kDecodeNll, nll},
               {metric::kLinearBitsPerWeight, bits},
               {metric::kPredictedTokensPerSecond, tokensPerSecond},
               {metric::kDensePerplexity, 10.0},
               {metric::kDenseDecodeNll, 1.0},
               {metric::kDenseLinearBitsPerWeight, 16.0},
               {metric::kDensePredictedTokensPerSecond, 100.0}};
  return r;
}

// The run as the store lists it: under its store id.
RunRecord stored(int id, RunRecord r) {
  r.id = id;
  return r;
}

std::shared_ptr<ActivationDriftResult> syntheticDrift(int rows, int steps) {
  auto d = std::make_shared<ActivationDriftResult>();
  d->layers = rows;
  d->steps = steps;
  d->prompts = 4;
  for (DriftCurves* c : {&d->free, &d->forced}) {
    const double scale = c == &d->free ? 1.0 : 0.5;
    c->drift.assign(size_t(rows), std::vector<double>(size_t(steps)));
    c->counts.assign(size_t(steps), 4);
    for (int l = 0; l < rows; ++l) {
      for (int t = 0; t < steps; ++t) c->drift[size_t(l)][size_t(t)] = scale * (l + 1) * (1 - std::exp(-t / double(l + 1)));
      c->summary.push_back(summarizeDriftCurve(c->drift[size_t(l)]));
    }
  }
  return d;
}

TEST(ParetoFront, KeepsTheNonDominatedPoints) {
  // cost = bits per weight (lower better), quality = perplexity (lower better)
  const std::vector<TradeoffPoint> points = {{4, 12}, {3, 15}, {4, 14}, {8, 11}, {3, 20}, {NAN, 1}, {16, 10}, {9, 11}};
  EXPECT_EQ(paretoFront(points, false), (std::vector<size_t>{1, 0, 3, 6}));
  // cost = tokens/s (higher better): the fastest with the best quality wins.
  const std::vector<TradeoffPoint> speed = {{100, 10}, {300, 12}, {200, 11}, {250, 13}, {300, 14}};
  EXPECT_EQ(paretoFront(speed, true), (std::vector<size_t>{0, 2, 1}));
  EXPECT_TRUE(paretoFront({}, true).empty());
}

TEST(RunHistory, ListsRunsWithSortableMetricsAndTooltips) {
  RunHistory history;
  QSignalSpy added(&history, &RunHistory::runAdded);
  const int a = history.add(stored(1, run(12.5, 2.1, 9.0, 300)));
  const int b = history.add(stored(2, run(11.0, 2.0, 16.0, 100)));
  EXPECT_EQ(added.count(), 2);
  EXPECT_EQ(history.rowCount(), 2);
  EXPECT_NE(a, b);
  EXPECT_EQ(str(history.find(a)->name), "#1 magnitude 2:4");
  EXPECT_EQ(str(history.index(0, RunHistory::PerplexityColumn).data().toString()), "12.500");
  EXPECT_EQ(history.index(1, RunHistory::BitsColumn).data(RunHistory::SortRole).toDouble(), 16.0);
  for (int c = 0; c < RunHistory::ColumnCount; ++c) {
    EXPECT_FALSE(history.headerData(c, Qt::Horizontal, Qt::DisplayRole).toString().isEmpty()) << c;
    EXPECT_FALSE(history.headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString().isEmpty()) << c;
  }
  EXPECT_EQ(history.find(99), nullptr);

  // Issue 25, point 2: the store's id is the run's id; read again (its status moved on), a run is replaced, not
  // added; a run the store could not record gets a negative id and says so.
  RunRecord again = stored(1, run(12.5, 2.1, 9.0, 300));
  again.status = "finished";
  again.metrics[metric::kPerplexity] = 12.25;
  EXPECT_EQ(history.add(again), 1);
  EXPECT_EQ(history.rowCount(), 2);
  EXPECT_DOUBLE_EQ(history.find(1)->metric(metric::kPerplexity), 12.25);
  const int unrecorded = history.add(run(13.0, 2.0, 9.0, 100));
  EXPECT_LT(unrecorded, 0);
  EXPECT_TRUE(history.find(unrecorded)->name.startsWith("unrecorded 1")) << str(history.find(unrecorded)->name);
  RunRecord bench;
  bench.id = 7;
  bench.kind = "bench";
  bench.modelDir = "/models/ref-tiny";
  history.add(bench);
  EXPECT_EQ(str(history.find(7)->name), "#7 bench · ref-tiny");
  EXPECT_FALSE(history.find(7)->isFinishedCompress());
}

TEST(RunsPanel, SelectsComparesAndExports) {
  RunHistory history;
  RunsPanel panel(&history);
  int id = 0;
  for (double ppl : {14.0, 12.0, 13.0}) history.add(stored(++id, run(ppl, 2, 9, 200)));
  QSignalSpy compare(&panel, &RunsPanel::compareRequested);
  QSignalSpy recipe(&panel, &RunsPanel::recipeRequested);
  auto* compareButton = panel.findChild<QPushButton*>("compareRuns");
  auto* recipeButton = panel.findChild<QPushButton*>("useRunRecipe");
  EXPECT_FALSE(compareButton->isEnabled());
  // Sorted by perplexity ascending, the rows are runs 2, 3, 1.
  panel.table()->sortByColumn(RunHistory::PerplexityColumn, Qt::AscendingOrder);
  EXPECT_EQ(panel.table()->model()->index(0, 0).data(RunHistory::RunIdRole).toInt(), 2);
  panel.table()->selectRow(0);
  EXPECT_TRUE(recipeButton->isEnabled());
  recipeButton->click();
  ASSERT_EQ(recipe.count(), 1);
  EXPECT_EQ(recipe.first().first().toInt(), 2);
  panel.table()->selectionModel()->select(panel.table()->model()->index(2, 0),
                                          QItemSelectionModel::Select | QItemSelectionModel::Rows);
  EXPECT_TRUE(compareButton->isEnabled());
  EXPECT_FALSE(recipeButton->isEnabled());
  compareButton->click();
  ASSERT_EQ(compare.count(), 1);
  EXPECT_EQ(compare.first().first().value<QList<int>>(), (QList<int>{2, 1}));

  QTemporaryDir dir;
  QString error;
  ASSERT_TRUE(panel.writeCsv(dir.filePath("runs.csv"), &error)) << str(error);
  QFile csv(dir.filePath("runs.csv"));
  ASSERT_TRUE(csv.open(QIODevice::ReadOnly));
  const QStringList lines = QString::fromUtf8(csv.readAll()).split("\r\n", Qt::SkipEmptyParts);
  ASSERT_EQ(lines.size(), 4);
  EXPECT_TRUE(lines[0].startsWith("run,name,kind,status,model,model_hash,output,recipe,ppl")) << str(lines[0]);
  EXPECT_TRUE(lines[1].startsWith("1,#1 magnitude 2:4,compress,finished,")) << str(lines[1]);   // the store's id
  // The recipe JSON has commas and quotes: quoted, quotes doubled.
  EXPECT_TRUE(lines[1].contains(R"("{""prune"": {""method"": ""magnitude"")")) << str(lines[1]);
}

// Issue 25, point 11: a run's folder opens from the Runs dock, its recipe saves as the JSON it ran with, and
// exported plots are named after the run they show.
TEST(RunsPanel, OpensARunsFolderSavesItsRecipeAndNamesExportsAfterIt) {
  RunHistory history;
  RunsPanel panel(&history);
  QTemporaryDir dir;
  RunRecord r = stored(12, run(12.0, 2.0, 9.0, 200));
  r.outDir = dir.path();
  history.add(r);
  QStringList opened;
  panel.setFolderOpener([&](const QString& folder) {
    opened << folder;
    return true;
  });
  panel.selectRun(12);
  auto* folder = panel.findChild<QPushButton*>("openRunFolder");
  ASSERT_NE(folder, nullptr);
  ASSERT_TRUE(folder->isEnabled());
  folder->click();
  EXPECT_EQ(opened, QStringList{dir.path()});
  EXPECT_TRUE(panel.findChild<QPushButton*>("saveRunRecipe")->isEnabled());
  QString error;
  ASSERT_TRUE(panel.saveRecipe(12, dir.filePath("recipe.json"), &error)) << str(error);
  QFile saved(dir.filePath("recipe.json"));
  ASSERT_TRUE(saved.open(QIODevice::ReadOnly));
  const auto doc = nlohmann::json::parse(saved.readAll().toStdString());
  EXPECT_EQ(doc["prune"]["pattern"], "2:4");
  EXPECT_FALSE(panel.saveRecipe(99, dir.filePath("none.json"), &error));

  DriftView drift;
  drift.setDrift(history.find(12)->name, syntheticDrift(3, 8));   // "#12 magnitude 2:4"
  EXPECT_EQ(str(defaultExportName(&drift, "Heatmap", ".png")), "run-12-heatmap.png");
  EXPECT_EQ(str(defaultExportName(&drift, "table", ".csv")), "run-12-table.csv");
}

TEST(RunCompareView, ShowsRunsSideBySideWithTheBestInBold) {
  RunHistory history;
  history.add(stored(1, run(14.0, 2.5, 9.0, 200)));
  history.add(stored(2, run(12.0, 2.7, 4.1, 350)));
  RunCompareView view;
  view.setRuns({history.find(1), history.find(2)});
  QTableWidget* t = view.table();
  ASSERT_EQ(t->columnCount(), 2);
  int pplRow = -1, nllRow = -1, tpsRow = -1;
  for (int r = 0; r < t->rowCount(); ++r) {
    EXPECT_FALSE(t->verticalHeaderItem(r)->toolTip().isEmpty()) << r;
    const std::string caption = str(t->verticalHeaderItem(r)->text());
    if (caption == "Perplexity") pplRow = r;
    if (caption == "Decode NLL") nllRow = r;
    if (caption == "Predicted tok/s") tpsRow = r;
  }
  ASSERT_GE(pplRow, 0);
  EXPECT_EQ(str(t->item(pplRow, 1)->text()), "12.000 (+2.000 vs dense)");   // issue 25, point 9: Δ to dense
  EXPECT_TRUE(t->item(pplRow, 1)->font().bold());    // lower perplexity is better
  EXPECT_FALSE(t->item(pplRow, 0)->font().bold());
  EXPECT_TRUE(t->item(nllRow, 0)->font().bold());
  EXPECT_TRUE(t->item(tpsRow, 1)->font().bold());    // higher tokens/s is better
  EXPECT_TRUE(t->item(t->rowCount() - 1, 0)->text().contains("magnitude"));   // the recipe row
  // What differs is shaded; the recipe (the same here) and the dense values are not.
  const QStringList differing = view.differingRows();
  EXPECT_TRUE(differing.contains("Perplexity"));
  EXPECT_FALSE(differing.contains("Recipe"));
  EXPECT_FALSE(differing.contains("Dense perplexity"));
  EXPECT_NE(t->item(pplRow, 0)->background(), t->item(t->rowCount() - 1, 0)->background());
  // Empty, it says how to fill it.
  view.setRuns({});
  EXPECT_FALSE(view.findChild<QLabel*>("compareHint")->isHidden());
}

TEST(ParetoView, DrawsTheFrontAndOpensAClickedRun) {
  RunHistory history;
  ParetoView view(&history);
  view.resize(800, 600);
  view.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));   // mouse events go through the (offscreen) window
  history.add(stored(1, run(12.0, 2.0, 9.0, 200)));    // on the front
  history.add(stored(2, run(11.0, 1.9, 16.0, 100)));   // on the front (best quality)
  history.add(stored(3, run(13.0, 2.5, 9.0, 150)));    // dominated by 1
  history.add(stored(4, run(15.0, 3.0, 3.0, 500)));    // on the front (fastest)
  view.setAxes("ppl", "predicted_tok_s");
  EXPECT_EQ(view.frontRunIds(), (std::vector<int>{2, 1, 4}));
  view.setAxes("decode_nll", "linear_bpw");
  EXPECT_EQ(view.frontRunIds(), (std::vector<int>{4, 1, 2}));

  QSignalSpy activated(&view, &ParetoView::runActivated);
  QApplication::processEvents();   // the resize reaches the plot
  view.plot()->replot();
  const QPointF p = view.pointOf(3);
  ASSERT_GE(p.x(), 0);
  QTest::mouseClick(view.plot(), Qt::LeftButton, Qt::NoModifier, p.toPoint());
  ASSERT_EQ(activated.count(), 1);
  EXPECT_EQ(activated.first().first().toInt(), 3);

  QTemporaryDir dir;
  QString error;
  for (const char* name : {"pareto.png", "pareto.pdf"}) {
    ASSERT_TRUE(exportPlot(view.plot(), dir.filePath(name), &error)) << str(error);
    EXPECT_GT(QFileInfo(dir.filePath(name)).size(), 1000) << name;
  }
  EXPECT_FALSE(QImage(dir.filePath("pareto.png")).isNull());
  EXPECT_FALSE(exportPlot(view.plot(), dir.filePath("pareto.tiff"), &error));
  EXPECT_TRUE(error.contains("pareto.tiff") && error.contains(".svg")) << str(error);
  ASSERT_TRUE(view.writeCsv(dir.filePath("front.csv"), &error)) << str(error);
}

TEST(DriftView, ShowsTheHeatmapCurvesAndPlateauMarkers) {
  DriftView view;
  EXPECT_FALSE(view.hasData());
  const auto drift = syntheticDrift(4, 20);
  view.setDrift("#7 test", drift);
  ASSERT_TRUE(view.hasData());
  QCPColorMapData* data = view.colorMap()->data();
  EXPECT_EQ(data->keySize(), 20);
  EXPECT_EQ(data->valueSize(), 4);
  EXPECT_DOUBLE_EQ(data->cell(10, 2), drift->free.drift[2][10]);
  EXPECT_NE(view.colorMap()->colorScale(), nullptr);
  // One curve per layer row plus the markers, each marker at that layer's settling step.
  ASSERT_EQ(view.curves()->graphCount(), 5);
  QCPGraph* markers = view.curves()->graph(4);
  ASSERT_EQ(markers->data()->size(), 4);
  std::vector<double> steps;
  for (auto it = markers->data()->constBegin(); it != markers->data()->constEnd(); ++it) steps.push_back(it->key);
  std::vector<double> expected;
  for (const auto& s : drift->free.summary) expected.push_back(double(s.stepsTo90));
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(steps, expected);
  const QString title = qobject_cast<QCPTextElement*>(view.curves()->plotLayout()->element(0, 0))->text();
  EXPECT_TRUE(title.contains(QString::number(*std::max_element(expected.begin(), expected.end())))) << str(title);

  // The teacher-forced variant shows its own numbers.
  auto* variant = view.findChild<QComboBox*>("driftVariant");
  variant->setCurrentIndex(variant->findData("forced"));
  EXPECT_DOUBLE_EQ(view.colorMap()->data()->cell(10, 2), drift->forced.drift[2][10]);

  QTemporaryDir dir;
  QString error;
  ASSERT_TRUE(view.writeCsv(dir.filePath("drift.csv"), &error)) << str(error);
  QFile csv(dir.filePath("drift.csv"));
  ASSERT_TRUE(csv.open(QIODevice::ReadOnly));
  EXPECT_EQ(QString::fromUtf8(csv.readAll()).count("\r\n"), 1 + 2 * 4 * 20);
  EXPECT_TRUE(exportPlot(view.heatmap(), dir.filePath("heatmap.png"), &error)) << str(error);
}

// Issue 25, point 5: teacher-forced, layer 0's input is the same in both models (D = 0 at every step): it is
// named as having no drift, not reported as the layer that settles at step 0; the empty view says why it is empty.
TEST(DriftView, NamesLayersWithoutDriftAndSaysWhyItIsEmpty) {
  DriftView view;
  EXPECT_TRUE(view.heatmapTitle().contains("open a run")) << str(view.heatmapTitle());
  view.setDrift("#3 test", nullptr, "No held-out prompts were chosen for this run.");
  EXPECT_EQ(str(view.heatmapTitle()), "No held-out prompts were chosen for this run.");

  auto drift = syntheticDrift(4, 12);
  // Teacher-forced: layer 0 is identically zero; the other layers are at their plateau from step 0.
  for (size_t l = 0; l < 4; ++l) {
    for (size_t t = 0; t < 12; ++t) drift->forced.drift[l][t] = l == 0 ? 0.0 : 0.1 * double(l);
    drift->forced.summary[l] = summarizeDriftCurve(drift->forced.drift[l]);
  }
  view.setDrift("#3 test", drift);
  auto* variant = view.findChild<QComboBox*>("driftVariant");
  variant->setCurrentIndex(variant->findData("forced"));
  const QString title = view.curvesTitle();
  EXPECT_FALSE(title.contains("at most 0")) << str(title);
  EXPECT_TRUE(title.contains("from step 0")) << str(title);
  EXPECT_TRUE(title.contains("no drift at layer 0")) << str(title);
  EXPECT_EQ(view.curves()->graph(view.curves()->graphCount() - 1)->data()->size(), 3);   // no marker for layer 0
  // Free decoding: the layers settle at different steps; the latest is named.
  variant->setCurrentIndex(variant->findData("free"));
  EXPECT_TRUE(view.curvesTitle().startsWith("Steps to 90% of plateau: at most")) << str(view.curvesTitle());

  // Every layer without drift (a recipe that changed nothing).
  for (size_t l = 0; l < 4; ++l) {
    drift->free.drift[l].assign(12, 0.0);
    drift->free.summary[l] = summarizeDriftCurve(drift->free.drift[l]);
  }
  view.setDrift("#4 test", drift);
  EXPECT_TRUE(view.curvesTitle().startsWith("No drift")) << str(view.curvesTitle());
}

// Point 9 of issue 25: several runs' drift in one plot, one curve per run in its own colour, the heatmap on a colour
// scale that spans every run; opening one run goes back to the single view.
TEST(DriftView, OverlaysSeveralRunsOnOneColourScale) {
  DriftView view;
  auto small = syntheticDrift(3, 8), large = syntheticDrift(5, 8);
  view.setOverlay({{"#1 small", small}});
  EXPECT_FALSE(view.overlaid()) << "one run is no overlay";
  view.setOverlay({{"#1 small", small}, {"#2 large", large}, {"#3 none", nullptr}});
  ASSERT_TRUE(view.overlaid());
  ASSERT_EQ(view.curves()->graphCount(), 2);
  EXPECT_EQ(str(view.curves()->graph(0)->name()), "#1 small");
  EXPECT_EQ(view.curves()->graph(0)->pen().color(), runColor(0));
  EXPECT_EQ(view.curves()->graph(1)->pen().color(), runColor(1));
  EXPECT_NE(runColor(0), runColor(1));
  // Each curve is the largest drift over layers at each step: the last layer's here.
  double largest = 0;
  for (const auto& layer : large->free.drift)
    for (double d : layer) largest = std::max(largest, d);
  const auto last = view.curves()->graph(1)->data()->at(7);
  EXPECT_DOUBLE_EQ(last->value, large->free.drift.back()[7]);
  // The heatmap shows the first run on the scale of all.
  EXPECT_DOUBLE_EQ(view.colorMap()->dataRange().upper, largest);
  EXPECT_TRUE(view.heatmapTitle().contains("#1 small")) << str(view.heatmapTitle());
  EXPECT_TRUE(view.heatmapTitle().contains("2 runs")) << str(view.heatmapTitle());
  view.setDrift("#1 small", small);
  EXPECT_FALSE(view.overlaid());
  EXPECT_EQ(view.curves()->graphCount(), 3 + 1);   // a curve per layer and the markers
}

TEST(DiscrepancyView, OverlaysSeveralRunsInTheirColours) {
  auto study = [](std::vector<std::pair<double, double>> deltas) {
    auto s = std::make_shared<HessianStudyResult>();
    std::vector<double> text, decode;
    for (size_t i = 0; i < deltas.size(); ++i) {
      ModuleDiscrepancy m;
      m.name = "model.layers." + std::to_string(i) + ".mlp.up_proj";
      m.text.delta = deltas[i].first;
      m.decode.delta = deltas[i].second;
      s->modules.push_back(m);
      text.push_back(m.text.delta);
      decode.push_back(m.decode.delta);
    }
    s->summary = summarizeDiscrepancies(text, decode);
    return s;
  };
  DiscrepancyView view;
  view.setOverlay({{"#5 text", study({{0.4, 0.2}, {0.3, 0.6}})}, {"#6 decode", study({{0.9, 0.3}, {0.5, 0.4}, {0.2, 0.4}})}});
  ASSERT_TRUE(view.overlaid());
  ASSERT_EQ(view.plot()->graphCount(), 2);
  EXPECT_EQ(view.plot()->graph(1)->scatterStyle().pen().color(), runColor(1));
  EXPECT_EQ(view.plot()->graph(1)->data()->size(), 3);
  EXPECT_DOUBLE_EQ(view.plot()->graph(1)->data()->at(0)->value, 3.0);   // the largest ratio first
  EXPECT_TRUE(view.title().contains("#6 decode: 66.7%")) << str(view.title());
  EXPECT_EQ(view.table()->topLevelItemCount(), 2);   // the first run's modules
}

// Point 9: Δ to dense beside each metric that has a dense value, and the user's tag and note, editable for a stored
// run (an unrecorded one has nowhere to keep them).
TEST(RunHistory, DeltaToDenseAndAnEditableTagAndNote) {
  RunHistory history;
  const int a = history.add(stored(7, run(12.5, 2.1, 4.5, 300)));
  const int u = history.add(run(11.0, 2.0, 16.0, 100));   // not recorded
  ASSERT_LT(u, 0);
  auto cell = [&](int id, int column, int role = Qt::DisplayRole) {
    for (int row = 0; row < history.rowCount(); ++row)
      if (history.index(row, 0).data(RunHistory::RunIdRole).toInt() == id) return history.index(row, column).data(role);
    return QVariant();
  };
  EXPECT_EQ(str(cell(a, RunHistory::DeltaPerplexityColumn).toString()), "+2.500");
  EXPECT_DOUBLE_EQ(cell(a, RunHistory::DeltaPerplexityColumn, RunHistory::SortRole).toDouble(), 2.5);
  EXPECT_EQ(str(cell(a, RunHistory::DeltaBitsColumn).toString()), "−11.500");
  EXPECT_EQ(str(cell(a, RunHistory::DeltaTokensPerSecondColumn).toString()), "+200");
  EXPECT_EQ(str(cell(a, RunHistory::DeltaDecodeNllColumn).toString()), "+1.1000");
  EXPECT_TRUE(str(history.headerData(RunHistory::DeltaPerplexityColumn, Qt::Horizontal, Qt::DisplayRole).toString())
                  .rfind("Δ ", 0) == 0);

  QSignalSpy edited(&history, &RunHistory::labelEdited);
  int rowA = 0, rowU = 0;
  for (int row = 0; row < history.rowCount(); ++row)
    (history.index(row, 0).data(RunHistory::RunIdRole).toInt() == a ? rowA : rowU) = row;
  EXPECT_TRUE(history.flags(history.index(rowA, RunHistory::TagColumn)) & Qt::ItemIsEditable);
  EXPECT_FALSE(history.flags(history.index(rowU, RunHistory::TagColumn)) & Qt::ItemIsEditable);
  EXPECT_FALSE(history.flags(history.index(rowA, RunHistory::PerplexityColumn)) & Qt::ItemIsEditable);
  EXPECT_TRUE(history.setData(history.index(rowA, RunHistory::TagColumn), "  base\nline ", Qt::EditRole));
  EXPECT_TRUE(history.setData(history.index(rowA, RunHistory::NoteColumn), "first line\nsecond", Qt::EditRole));
  EXPECT_FALSE(history.setData(history.index(rowU, RunHistory::NoteColumn), "lost", Qt::EditRole));
  EXPECT_EQ(str(history.find(a)->tag), "base line");
  EXPECT_EQ(str(cell(a, RunHistory::NoteColumn).toString()), "first line");
  EXPECT_EQ(str(cell(a, RunHistory::NoteColumn, Qt::ToolTipRole).toString()), "first line\nsecond");
  ASSERT_EQ(edited.size(), 2);
  EXPECT_EQ(edited.last().at(0).toInt(), a);
  EXPECT_EQ(str(edited.last().at(1).toString()), "base line");
  EXPECT_EQ(str(edited.last().at(2).toString()), "first line\nsecond");
}

TEST(DiscrepancyView, SortsModulesAndTitlesTheSummary) {
  auto study = std::make_shared<HessianStudyResult>();
  const std::vector<std::tuple<const char*, double, double>> modules = {
      {"model.layers.0.self_attn.q_proj", 0.4, 0.2}, {"model.layers.0.mlp.down_proj", 0.3, 0.6},
      {"model.layers.1.self_attn.q_proj", 0.9, 0.3}, {"model.layers.1.mlp.down_proj", 0.5, 0.4}};
  std::vector<double> text, decode;
  for (const auto& [name, t, d] : modules) {
    ModuleDiscrepancy m;
    m.name = name;
    m.columns = 192;
    m.text.delta = t;
    m.decode.delta = d;
    study->modules.push_back(m);
    text.push_back(t);
    decode.push_back(d);
  }
  study->summary = summarizeDiscrepancies(text, decode);
  DiscrepancyView view;
  view.setStudy("#2 test", study);
  // 3 of 4 modules have the smaller δ with decode calibration; ratios 2, 0.5, 3, 1.25 → median 1.625.
  EXPECT_TRUE(view.title().contains("75.0%")) << str(view.title());
  EXPECT_TRUE(view.title().contains("1.63")) << str(view.title());
  QTreeWidget* table = view.table();
  ASSERT_EQ(table->topLevelItemCount(), 4);
  EXPECT_EQ(str(table->topLevelItem(0)->text(1)), "model.layers.1.self_attn.q_proj");   // ratio 3 first
  EXPECT_EQ(str(table->topLevelItem(3)->text(1)), "model.layers.0.mlp.down_proj");      // ratio 0.5 last
  ASSERT_EQ(view.plot()->graphCount(), 2);
  EXPECT_DOUBLE_EQ(view.plot()->graph(0)->data()->at(0)->value, 0.9);   // text δ of the first module
  EXPECT_DOUBLE_EQ(view.plot()->graph(1)->data()->at(0)->value, 0.3);
  for (int c = 0; c < table->columnCount(); ++c) EXPECT_FALSE(table->headerItem()->toolTip(c).isEmpty()) << c;
  QTemporaryDir dir;
  QString error;
  ASSERT_TRUE(view.writeCsv(dir.filePath("d.csv"), &error)) << str(error);
}

TEST(HuggingFaceCache, FindsSnapshotsWithWeights) {
  QTemporaryDir hub;
  auto touch = [](const QString& path) {
    QDir().mkpath(QFileInfo(path).absolutePath());
    QFile f(path);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("{}");
  };
  // A complete model whose refs/main names a snapshot, one with two snapshots and no ref, one without weights,
  // and a dataset (not a model).
  touch(hub.filePath("models--meta-llama--Llama-3.2-1B/snapshots/abc123/config.json"));
  touch(hub.filePath("models--meta-llama--Llama-3.2-1B/snapshots/abc123/model.safetensors"));
  touch(hub.filePath("models--meta-llama--Llama-3.2-1B/snapshots/old999/config.json"));
  touch(hub.filePath("models--meta-llama--Llama-3.2-1B/snapshots/old999/model.safetensors"));
  touch(hub.filePath("models--meta-llama--Llama-3.2-1B/refs/main"));
  QFile ref(hub.filePath("models--meta-llama--Llama-3.2-1B/refs/main"));
  ASSERT_TRUE(ref.open(QIODevice::WriteOnly));
  ref.write("abc123\n");
  ref.close();
  touch(hub.filePath("models--Qwen--Qwen3-8B/snapshots/r1/config.json"));
  touch(hub.filePath("models--Qwen--Qwen3-8B/snapshots/r1/model.safetensors.index.json"));
  touch(hub.filePath("models--gpt2--tokenizer-only/snapshots/r/config.json"));
  touch(hub.filePath("datasets--wikitext--wikitext/snapshots/r/config.json"));

  const QList<CachedModel> models = discoverCachedModels(hub.path());
  ASSERT_EQ(models.size(), 2);
  EXPECT_EQ(str(models[0].repo), "meta-llama/Llama-3.2-1B");
  EXPECT_EQ(str(models[0].revision), "abc123");
  EXPECT_TRUE(models[0].path.endsWith("snapshots/abc123"));
  EXPECT_EQ(str(models[1].repo), "Qwen/Qwen3-8B");
  EXPECT_TRUE(discoverCachedModels(hub.filePath("nowhere")).isEmpty());

  QProcessEnvironment env;
  env.insert("HOME", "/home/u");
  EXPECT_EQ(str(huggingFaceHubDir(env)), "/home/u/.cache/huggingface/hub");
  env.insert("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(str(huggingFaceHubDir(env)), "/xdg/huggingface/hub");
  env.insert("HF_HOME", "/hf");
  EXPECT_EQ(str(huggingFaceHubDir(env)), "/hf/hub");
  env.insert("HF_HUB_CACHE", "/cache");
  EXPECT_EQ(str(huggingFaceHubDir(env)), "/cache");
}

using EvaluationPanelTest = test::SettingsTest;

TEST_F(EvaluationPanelTest, SettingsPersistAndSayWhatWillBeMeasured) {
  const QString text = QStringLiteral(PARETO_SOURCE_DIR "/README.md");   // any existing file
  {
    EvaluationPanel panel;
    EvaluationSettings s = panel.settings();
    s.heldOutText = text;
    s.perplexityWindow = 64;
    s.maxPrompts = 3;
    s.driftSteps = 0;
    s.hessianStudy = true;
    s.runsFolder = "/tmp/pareto-runs";
    panel.setSettings(s);
    EXPECT_TRUE(test::textOf(&panel, "eval.notes").contains("perplexity")) << str(test::textOf(&panel, "eval.notes"));
    EXPECT_TRUE(test::textOf(&panel, "eval.notes").contains("choose held-out prompts"));
    panel.saveSettings();
  }
  EvaluationPanel reopened;
  reopened.loadSettings();
  const EvaluationSettings s = reopened.settings();
  EXPECT_EQ(s.heldOutText, text);
  EXPECT_EQ(s.perplexityWindow, 64);
  EXPECT_EQ(s.maxPrompts, 3);
  EXPECT_EQ(s.driftSteps, 0);
  EXPECT_TRUE(s.hessianStudy);
  EXPECT_EQ(str(s.runsFolder), "/tmp/pareto-runs");
  reopened.setRunnable(false, "Open a model first.");
  EXPECT_FALSE(reopened.runButton()->isEnabled());
  EXPECT_EQ(str(reopened.runButton()->toolTip()), "Open a model first.");
  for (const QLabel* label : reopened.findChildren<QLabel*>())
    EXPECT_FALSE(label->toolTip().isEmpty()) << str(label->text());
}

TEST(GenerationPanel, GeneratesOnlyWithAModelAndAPrompt) {
  GenerationPanel panel;
  auto* generate = panel.findChild<QPushButton*>("generateButton");
  QSignalSpy requested(&panel, &GenerationPanel::generateRequested);
  EXPECT_FALSE(generate->isEnabled());
  panel.setDenseAvailable(true);
  EXPECT_FALSE(generate->isEnabled());   // no prompt yet
  panel.findChild<QPlainTextEdit*>("generationPrompt")->setPlainText("Once upon a time");
  EXPECT_TRUE(generate->isEnabled());
  generate->click();
  ASSERT_EQ(requested.count(), 1);
  EXPECT_EQ(str(requested.first().at(0).toString()), "Once upon a time");
  panel.setBusy(true);
  EXPECT_FALSE(generate->isEnabled());
  EXPECT_TRUE(panel.findChild<QPushButton*>("stopGenerationButton")->isEnabled());
  panel.showContinuation(true, "there was");
  EXPECT_EQ(str(panel.compressedText()->toPlainText()), "there was");

  // Issue 25, point 10: the CLI's sampling settings, and where the two continuations first differ.
  EXPECT_TRUE(panel.sampling().greedy);
  EXPECT_FALSE(panel.findChild<QWidget*>("generationTemperature")->isEnabled());
  panel.findChild<QCheckBox*>("generationSample")->setChecked(true);
  EXPECT_TRUE(panel.findChild<QWidget*>("generationTemperature")->isEnabled());
  panel.findChild<QDoubleSpinBox*>("generationTemperature")->setValue(0.7);
  panel.findChild<QSpinBox*>("generationTopK")->setValue(40);
  panel.findChild<QDoubleSpinBox*>("generationTopP")->setValue(0.9);
  panel.findChild<QSpinBox*>("generationSeed")->setValue(7);
  const GenerationSampling s = panel.sampling();
  EXPECT_FALSE(s.greedy);
  EXPECT_DOUBLE_EQ(s.temperature, 0.7);
  EXPECT_EQ(s.topK, 40);
  EXPECT_DOUBLE_EQ(s.topP, 0.9);
  EXPECT_EQ(s.seed, 7u);
  panel.showContinuation(false, "there was a king");
  EXPECT_EQ(panel.divergence(), -1);   // "there was" is where the dense text starts: no difference yet
  panel.showContinuation(true, "there was a queen");
  EXPECT_EQ(panel.divergence(), 12);
  EXPECT_EQ(panel.compressedText()->extraSelections().size(), 1);
  EXPECT_EQ(panel.compressedText()->extraSelections().first().cursor.selectionStart(), 12);
  EXPECT_TRUE(panel.findChild<QLabel*>("generationDivergence")->text().contains("character 12"));
}

}  // namespace
}  // namespace pareto
