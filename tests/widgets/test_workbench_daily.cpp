// The workbench as a daily tool (issue 25): runs know their model and keep the store's id (the Pareto view shows
// the open model's runs against its dense point; the Runs dock lists every stored run with a Model column and
// filters; opening another model closes the previous model's run; the Drift view says why a run has no drift);
// predictions come from a stored, dated bandwidth; one bar for the whole run; docks that fit at any window size.
#include <gtest/gtest.h>

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QApplication>
#include <QComboBox>
#include <QDockWidget>
#include <QLineEdit>
#include <QMap>
#include <QMenu>
#include <QMenuBar>
#include <QScrollArea>
#include <QTest>
#include <QDateTime>
#include <QFile>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QToolBar>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <algorithm>
#include <cmath>
#include <map>

#include "SharedData.h"
#include "WidgetTestSupport.h"
#include "analysis/ActivationDrift.h"
#include "jobs/DeviceBandwidth.h"
#include "jobs/StoredAnalyses.h"
#include "store/ExperimentStore.h"
#include "store/ModelIdentity.h"
#include "store/ResultJson.h"
#include "widgets/DriftView.h"
#include "widgets/EvaluationPanel.h"
#include "widgets/GenerationPanel.h"
#include "widgets/ParetoView.h"
#include "widgets/RecipePanel.h"
#include "widgets/RunHistory.h"
#include "widgets/RunsPanel.h"
#include <qcustomplot.h>

namespace pareto {
namespace {

using nlohmann::json;
using test::str;

const json kTwoFour = {{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}}};

class WorkbenchDaily : public test::SettingsTest {
 protected:
  void SetUp() override {
    test::SettingsTest::SetUp();
    if (!test::sharedAvailable()) GTEST_SKIP() << "shared data not found at " << test::sharedDir();
  }
  static QString modelDir(const char* name) { return QString::fromStdString(test::sharedPath(std::string("models/") + name)); }

  // The start of a compress run of `model` (2:4 magnitude on the CPU) as pareto-cli records one.
  static RunStart compressStart(const char* model, const std::string& output = "") {
    RunStart start;
    start.kind = "compress";
    start.model = identifyModel(str(modelDir(model)));
    start.recipe = kTwoFour;
    start.device = "cpu";
    start.output = output;
    return start;
  }

  // A finished compress run of `model` as pareto-cli records one.
  static int64_t storeCompressRun(ExperimentStore& store, const char* model, double ppl, double densePpl) {
    const int64_t id = store.beginRun(compressStart(model, std::string("/runs/") + model + "-" + std::to_string(int(ppl))));
    RunResults results;
    results.metrics = {{metric::kPerplexity, ppl},
                       {metric::kDensePerplexity, densePpl},
                       {metric::kLinearBitsPerWeight, 9.0},
                       {metric::kDenseLinearBitsPerWeight, 16.0},
                       {metric::kPredictedTokensPerSecond, 100.0},
                       {metric::kDensePredictedTokensPerSecond, 80.0}};
    store.finishRun(id, results);
    return id;
  }

  static void waitForHistory(test::TestWindow& t) {
    QSignalSpy loaded(&t.window, &MainWindow::historyLoaded);
    ASSERT_TRUE(test::waitForSignals(loaded));
  }

  static int visibleRows(test::TestWindow& t) { return t.window.runsPanel()->table()->model()->rowCount(); }
};

// Point 1: after a ref-tiny run and a ref-small run, each model's Pareto view holds its own run and its own dense
// point; the Runs dock names the model of each run and filters by it.
TEST_F(WorkbenchDaily, FrontsAndBaselinesAreThoseOfTheOpenModel) {
  int64_t tiny = 0, small = 0;
  {
    ExperimentStore store(dbPath());
    tiny = storeCompressRun(store, "ref-tiny", 12.0, 10.0);
    small = storeCompressRun(store, "ref-small", 30.0, 25.0);
  }
  test::TestWindow t;
  waitForHistory(t);
  ASSERT_EQ(t.window.history()->rowCount(), 2);
  ParetoView* pareto = t.window.paretoView();
  pareto->setAxes("ppl", "linear_bpw");

  ASSERT_TRUE(t.window.openModel(modelDir("ref-tiny")));
  const QString tinyHash = QString::fromStdString(identifyModel(str(modelDir("ref-tiny"))).contentHash);
  EXPECT_EQ(t.window.currentModelKey(), tinyHash);
  EXPECT_EQ(pareto->model(), tinyHash);
  EXPECT_GE(pareto->pointOf(int(tiny)).x(), 0);
  EXPECT_LT(pareto->pointOf(int(small)).x(), 0);
  EXPECT_EQ(pareto->frontRunIds(), std::vector<int>{int(tiny)});
  EXPECT_DOUBLE_EQ(pareto->denseValue().y(), 10.0);   // ref-tiny's dense perplexity, not ref-small's
  EXPECT_EQ(pareto->modelCombo()->currentText(), "ref-tiny");

  ASSERT_TRUE(t.window.openModel(modelDir("ref-small")));
  EXPECT_LT(pareto->pointOf(int(tiny)).x(), 0);
  EXPECT_GE(pareto->pointOf(int(small)).x(), 0);
  EXPECT_EQ(pareto->frontRunIds(), std::vector<int>{int(small)});
  EXPECT_DOUBLE_EQ(pareto->denseValue().y(), 25.0);

  // The combo picks the other model's runs without opening it.
  pareto->modelCombo()->setCurrentIndex(pareto->modelCombo()->findData(tinyHash));
  EXPECT_EQ(pareto->frontRunIds(), std::vector<int>{int(tiny)});

  // The Runs dock: a Model column, and a model filter.
  const QAbstractItemModel* rows = t.window.runsPanel()->table()->model();
  QStringList models;
  for (int r = 0; r < rows->rowCount(); ++r) models << rows->index(r, RunHistory::ModelColumn).data().toString();
  models.sort();
  EXPECT_EQ(models, (QStringList{"ref-small", "ref-tiny"}));
  QComboBox* filter = t.window.runsPanel()->modelFilter();
  ASSERT_GE(filter->findData(tinyHash), 0);
  filter->setCurrentIndex(filter->findData(tinyHash));
  ASSERT_EQ(visibleRows(t), 1);
  EXPECT_EQ(rows->index(0, 0).data(RunHistory::RunIdRole).toInt(), int(tiny));
  filter->setCurrentIndex(0);   // all models
  EXPECT_EQ(visibleRows(t), 2);
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
}

// Point 2: the Runs dock lists what `pareto-cli runs` lists, under the same ids: failed, cancelled and benchmark
// runs too, filterable by kind and status; the CSV's run column is the store's id.
TEST_F(WorkbenchDaily, TheRunsDockListsEveryStoredRunUnderItsStoreId) {
  int64_t finished = 0, failed = 0, cancelled = 0, bench = 0;
  {
    ExperimentStore store(dbPath());
    finished = storeCompressRun(store, "ref-tiny", 12.0, 10.0);
    const RunStart start = compressStart("ref-tiny");
    failed = store.beginRun(start);
    store.endRun(failed, RunStatus::Failed, "model.layers.0.mlp.up_proj: out of memory");
    cancelled = store.beginRun(start);
    store.endRun(cancelled, RunStatus::Cancelled, "cancelled by the user");
    RunStart benchStart;
    benchStart.kind = "bench";
    benchStart.device = "cpu";
    bench = recordBenchmarks(store, benchStart, {{"cpu", "dense", "ref-tiny step", 1, 10.0, 5.0}});
  }
  test::TestWindow t;
  waitForHistory(t);
  ASSERT_EQ(t.window.history()->rowCount(), 4);
  for (const int64_t id : {finished, failed, cancelled, bench}) {
    const RunRecord* run = t.window.history()->find(int(id));
    ASSERT_NE(run, nullptr) << id;
    EXPECT_TRUE(run->name.startsWith(QStringLiteral("#%1 ").arg(id))) << str(run->name);
  }
  EXPECT_EQ(str(t.window.history()->find(int(failed))->status), "failed");
  EXPECT_TRUE(t.window.history()->find(int(failed))->error.contains("out of memory"));
  EXPECT_EQ(str(t.window.history()->find(int(cancelled))->status), "cancelled");
  EXPECT_EQ(str(t.window.history()->find(int(bench))->kind), "bench");

  RunsPanel* panel = t.window.runsPanel();
  EXPECT_EQ(visibleRows(t), 4);
  panel->setFilters(QString(), "bench", QString());
  ASSERT_EQ(visibleRows(t), 1);
  EXPECT_EQ(panel->table()->model()->index(0, 0).data(RunHistory::RunIdRole).toInt(), int(bench));
  panel->setFilters(QString(), "compress", "failed");
  ASSERT_EQ(visibleRows(t), 1);
  EXPECT_EQ(panel->table()->model()->index(0, RunHistory::StatusColumn).data().toString(), "failed");
  EXPECT_TRUE(panel->table()->model()->index(0, RunHistory::StatusColumn).data(Qt::ToolTipRole).toString()
                  .contains("out of memory"));
  panel->setFilters(QString(), QString(), QString());
  EXPECT_EQ(visibleRows(t), 4);
  // The benchmark of no model has its own entry in the model filter, apart from "All models".
  QComboBox* modelFilter = panel->modelFilter();
  const int noModel = modelFilter->findData(RunsPanel::kNoModelKey);
  ASSERT_GT(noModel, 0);
  modelFilter->setCurrentIndex(noModel);
  ASSERT_EQ(visibleRows(t), 1);
  EXPECT_EQ(panel->table()->model()->index(0, 0).data(RunHistory::RunIdRole).toInt(), int(bench));
  modelFilter->setCurrentIndex(0);
  EXPECT_EQ(visibleRows(t), 4);

  // Only the finished compress run is a point; opening another run only selects it.
  ASSERT_TRUE(t.window.openModel(modelDir("ref-tiny")));
  EXPECT_GE(t.window.paretoView()->pointOf(int(finished)).x(), 0);
  for (const int64_t id : {failed, cancelled, bench}) EXPECT_LT(t.window.paretoView()->pointOf(int(id)).x(), 0);
  t.window.openRun(int(bench));
  EXPECT_EQ(t.window.currentRunId(), 0);
  t.window.openRun(int(finished));
  EXPECT_EQ(t.window.currentRunId(), int(finished));

  QTemporaryDir dir;
  QString error;
  ASSERT_TRUE(panel->writeCsv(dir.filePath("runs.csv"), &error)) << str(error);
  QFile csv(dir.filePath("runs.csv"));
  ASSERT_TRUE(csv.open(QIODevice::ReadOnly));
  const QStringList lines = QString::fromUtf8(csv.readAll()).split("\r\n", Qt::SkipEmptyParts);
  ASSERT_EQ(lines.size(), 5);
  QStringList ids;
  for (int i = 1; i < lines.size(); ++i) ids << lines[i].section(',', 0, 0);
  ids.sort();
  QStringList expected;
  for (const int64_t id : {finished, failed, cancelled, bench}) expected << QString::number(id);
  expected.sort();
  EXPECT_EQ(ids, expected);
}

// Point 5: a run of ref-tiny leaves the views when ref-small is opened; a run without held-out prompts says so in
// the Drift view (not that drift steps were 0); a run without drift steps says that.
TEST_F(WorkbenchDaily, ViewsShowOnlyARunOfTheOpenModelAndSayWhyDriftIsMissing) {
  test::TestWindow t;
  waitForHistory(t);
  ASSERT_TRUE(t.window.openModel(modelDir("ref-tiny")));
  QString error;
  ASSERT_TRUE(t.window.recipePanel()->setRecipe(kTwoFour, QString(), "test", &error)) << str(error);
  EvaluationSettings quick = test::quickEvaluation(QString::fromStdString(test::scratchDir("widgets-runs-per-model")));
  quick.perplexityMaxWindows = 2;
  quick.prompts.clear();   // no held-out prompts: no fidelity, no drift
  t.window.evaluationPanel()->setSettings(quick);
  QSignalSpy ended(&t.window, &MainWindow::runEnded);
  ASSERT_TRUE(t.window.startRun()) << str(t.errors.join("\n"));
  ASSERT_TRUE(test::waitForSignals(ended));
  ASSERT_TRUE(ended.first().at(0).toBool()) << str(ended.first().at(1).toString());
  const int id = t.window.currentRunId();
  ASSERT_GT(id, 0);   // the store's id
  EXPECT_FALSE(t.window.driftView()->hasData());
  EXPECT_TRUE(t.window.driftView()->heatmapTitle().contains("No held-out prompts"))
      << str(t.window.driftView()->heatmapTitle());
  EXPECT_FALSE(t.window.driftView()->heatmapTitle().contains("drift steps"))
      << str(t.window.driftView()->heatmapTitle());
  EXPECT_EQ(t.window.generationPanel()->compressedRun(), t.window.history()->find(id)->name);

  // Another model: the ref-tiny run is no longer the current one, in any view.
  ASSERT_TRUE(t.window.openModel(modelDir("ref-small")));
  EXPECT_EQ(t.window.currentRunId(), 0);
  EXPECT_TRUE(t.window.generationPanel()->compressedRun().isEmpty());
  EXPECT_FALSE(t.window.driftView()->hasData());
  EXPECT_FALSE(t.window.driftView()->heatmapTitle().contains("No held-out prompts"));
  EXPECT_LT(t.window.paretoView()->pointOf(id).x(), 0);
  // Back to ref-tiny: its run is there to open again.
  ASSERT_TRUE(t.window.openModel(modelDir("ref-tiny")));
  EXPECT_GE(t.window.paretoView()->pointOf(id).x(), 0);
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
}

// Point 3: predicted tokens/s on the CPU come from one stored copy bandwidth, dated, not a fresh measurement at
// each start; Run ▸ Measure Copy Bandwidth measures it again.
TEST_F(WorkbenchDaily, PredictionsUseTheStoredBandwidthUntilItIsMeasuredAgain) {
  double first = 0;
  QDateTime measuredAt;
  {
    test::TestWindow t;
    QSignalSpy ready(&t.window, &MainWindow::devicesReady);
    ASSERT_TRUE(test::waitForSignals(ready));
    ASSERT_FALSE(t.window.devices().isEmpty());
    first = t.window.devices().front().copyBytesPerSecond;
    measuredAt = t.window.devices().front().measuredAt;
    ASSERT_GT(first, 0);
    ASSERT_TRUE(measuredAt.isValid());
    ASSERT_TRUE(t.window.openModel(modelDir("ref-tiny")));
    QString error;
    ASSERT_TRUE(t.window.recipePanel()->setRecipe(kTwoFour, QString(), "test", &error)) << str(error);
    const QString predicted = test::textOf(t.window.recipePanel(), "estimate.tokensPerSecond");
    EXPECT_TRUE(predicted.contains("measured " + measuredAt.toString("yyyy-MM-dd HH:mm"))) << str(predicted);
    // Kept in the experiment store, where pareto-cli's predictions read it too.
    const std::optional<StoredCopyBandwidth> stored =
        storedCopyBandwidth(ExperimentStore::openForReading(dbPath()), "cpu");
    ASSERT_TRUE(stored.has_value());
    EXPECT_EQ(stored->bytesPerSecond, first);
    EXPECT_EQ(qint64(stored->measuredAt), measuredAt.toSecsSinceEpoch());
  }
  test::TestWindow again;
  QSignalSpy ready(&again.window, &MainWindow::devicesReady);
  ASSERT_TRUE(test::waitForSignals(ready));
  EXPECT_EQ(again.window.devices().front().copyBytesPerSecond, first);   // the same number, not a new measurement
  EXPECT_EQ(again.window.devices().front().measuredAt, measuredAt);
  again.window.remeasureBandwidth();
  ASSERT_TRUE(test::waitForSignals(ready, 2));
  EXPECT_GE(again.window.devices().front().measuredAt, measuredAt);
  EXPECT_GT(again.window.devices().front().copyBytesPerSecond, 0);
  EXPECT_TRUE(again.errors.isEmpty()) << str(again.errors.join("\n"));
}

// Point 3, measured speed: Runs dock ▸ Benchmark measures the run's folder; its measured tok/s then stands for the
// run's speed in the Runs dock and the Pareto view (a filled point), where an unmeasured run's point is hollow.
TEST_F(WorkbenchDaily, AMeasuredSpeedReplacesThePrediction) {
  test::TestWindow t;
  waitForHistory(t);
  ASSERT_TRUE(t.window.openModel(modelDir("ref-tiny")));
  QString error;
  ASSERT_TRUE(t.window.recipePanel()->setRecipe(kTwoFour, QString(), "test", &error)) << str(error);
  EvaluationSettings quick = test::quickEvaluation(QString::fromStdString(test::scratchDir("widgets-runs-measured")));
  quick.perplexityMaxWindows = 2;
  quick.prompts.clear();   // perplexity only: the quality axis
  t.window.evaluationPanel()->setSettings(quick);
  QSignalSpy ended(&t.window, &MainWindow::runEnded);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(t.window.startRun()) << str(t.errors.join("\n"));
    ASSERT_TRUE(test::waitForSignals(ended, i + 1));
    ASSERT_TRUE(ended.at(i).at(0).toBool()) << str(ended.at(i).at(1).toString());
  }
  const int measuredId = t.window.history()->runs().front().id, predictedId = t.window.history()->runs().back().id;
  ParetoView* pareto = t.window.paretoView();
  pareto->setAxes("ppl", "decode_tok_s");
  EXPECT_TRUE(pareto->isPredicted(measuredId));
  EXPECT_TRUE(std::isnan(t.window.history()->find(measuredId)->metric(kMeasuredTokensPerSecond)));

  t.window.runsPanel()->selectRun(measuredId);
  auto* benchmark = t.window.runsPanel()->findChild<QPushButton*>("benchmarkRun");
  ASSERT_NE(benchmark, nullptr);
  ASSERT_TRUE(benchmark->isEnabled());
  QSignalSpy benchmarked(&t.window, &MainWindow::benchmarkEnded);
  benchmark->click();
  ASSERT_TRUE(test::waitForSignals(benchmarked));
  ASSERT_TRUE(benchmarked.first().at(0).toBool()) << str(benchmarked.first().at(1).toString()) << str(t.errors.join("\n"));
  // The store is read again after the benchmark: the measurement arrives with that read.
  QSignalSpy synced(&t.window, &MainWindow::historyLoaded);
  for (int i = 0; i < 5 && std::isnan(t.window.history()->find(measuredId)->metric(kMeasuredTokensPerSecond)); ++i)
    synced.wait(30000);
  const double measured = t.window.history()->find(measuredId)->metric(kMeasuredTokensPerSecond);
  EXPECT_GT(measured, 0);
  EXPECT_DOUBLE_EQ(t.window.history()->find(measuredId)->metric(kDecodeTokensPerSecond), measured);
  EXPECT_FALSE(pareto->isPredicted(measuredId));
  EXPECT_TRUE(pareto->isPredicted(predictedId));
  const QPointF p = pareto->pointOf(measuredId);
  ASSERT_GE(p.x(), 0);
  EXPECT_NEAR(pareto->plot()->xAxis->pixelToCoord(p.x()), measured, 1e-6 * measured + 1e-9);
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
}

// Point 7: one bar for the whole run (stages weighted by their expected time), never moving back and full at the
// end, with the stage, the percentage and the time left beside it; Esc and the toolbar's Cancel stop the run.
TEST_F(WorkbenchDaily, OneBarForTheWholeRunAndEscCancels) {
  test::TestWindow t;
  ASSERT_TRUE(t.window.openModel(modelDir("ref-tiny")));
  QString error;
  ASSERT_TRUE(t.window.recipePanel()->setRecipe(kTwoFour, QString(), "test", &error)) << str(error);
  EvaluationSettings quick = test::quickEvaluation(QString::fromStdString(test::scratchDir("widgets-runs-progress")));
  quick.perplexityMaxWindows = 2;
  quick.maxPrompts = 2;
  quick.maxNewTokens = 8;
  quick.driftSteps = 8;
  t.window.evaluationPanel()->setSettings(quick);

  QList<double> fractions;
  QStringList labels;
  auto* label = t.window.findChild<QLabel*>("progressLabel");
  auto* bar = t.window.findChild<QProgressBar*>("progressBar");
  ASSERT_TRUE(label && bar);
  QObject::connect(t.window.worker(), &EngineWorker::runProgress, &t.window, [&](double f) {
    fractions << f;
    labels << label->text();
    EXPECT_EQ(bar->value(), int(f * 1000));
  });
  QSignalSpy ended(&t.window, &MainWindow::runEnded);
  ASSERT_TRUE(t.window.startRun()) << str(t.errors.join("\n"));
  ASSERT_TRUE(test::waitForSignals(ended));
  ASSERT_TRUE(ended.first().at(0).toBool()) << str(ended.first().at(1).toString());
  ASSERT_GT(fractions.size(), 5);
  for (int i = 1; i < fractions.size(); ++i) EXPECT_GE(fractions[i], fractions[i - 1]) << i;
  EXPECT_DOUBLE_EQ(fractions.last(), 1.0);
  EXPECT_LT(fractions.first(), 0.5);
  bool staged = false, timed = false;
  for (const QString& l : labels) {
    staged = staged || (l.contains("%") && (l.contains("prune") || l.contains("perplexity")));
    timed = timed || l.contains(" left");
  }
  EXPECT_TRUE(staged) << str(labels.join(" | "));
  EXPECT_TRUE(timed) << str(labels.join(" | "));

  // Esc cancels, from the Run menu and the toolbar alike.
  QAction* cancel = t.window.cancelAction();
  EXPECT_EQ(cancel->shortcut(), QKeySequence(Qt::Key_Escape));
  auto* tools = t.window.findChild<QToolBar*>("runToolBar");
  ASSERT_NE(tools, nullptr);
  EXPECT_TRUE(tools->actions().contains(cancel));
  EXPECT_FALSE(cancel->isEnabled());   // nothing to cancel
  QObject::connect(t.window.worker(), &EngineWorker::runProgress, &t.window, [&](double) {
    if (cancel->isEnabled()) cancel->trigger();
  });
  ASSERT_TRUE(t.window.startRun());
  EXPECT_TRUE(cancel->isEnabled());
  ASSERT_TRUE(test::waitForSignals(ended, 2));
  EXPECT_FALSE(ended.at(1).at(0).toBool());
  EXPECT_TRUE(ended.at(1).at(1).toString().contains("cancelled")) << str(ended.at(1).at(1).toString());
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
}

// Point 6: at 1024×700 and 1920×1080, with a model open and on every tab, no control of the Model and Recipe docks
// is cut off (each at least its minimum size, inside its dock's visible width); growing the window from 1024×700
// keeps the docks usable; View ▸ Reset Layout brings the first start's layout back.
TEST_F(WorkbenchDaily, NoControlOfTheModelAndRecipeDocksIsClipped) {
  test::TestWindow t;
  t.window.resize(1024, 700);
  t.window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&t.window));
  ASSERT_TRUE(t.window.openModel(modelDir("ref-tiny")));
  auto checkDocks = [&](const char* when) {
    QApplication::processEvents();
    for (const char* name : {"modelScroll", "recipeScroll"}) {
      auto* scroll = t.window.findChild<QScrollArea*>(name);
      ASSERT_NE(scroll, nullptr) << name;
      const QWidget* viewport = scroll->viewport();
      ASSERT_GT(viewport->width(), 100) << when << " " << name;
      int checked = 0;
      for (QWidget* w : scroll->widget()->findChildren<QWidget*>()) {
        const bool control = qobject_cast<QAbstractButton*>(w) || qobject_cast<QComboBox*>(w) ||
                             qobject_cast<QLineEdit*>(w) || qobject_cast<QAbstractSpinBox*>(w);
        if (!control || !w->isVisibleTo(scroll) || qobject_cast<QLineEdit*>(w->parentWidget()) ||
            qobject_cast<QAbstractSpinBox*>(w->parentWidget()) || qobject_cast<QComboBox*>(w->parentWidget()))
          continue;   // a spin box's or a combo's own editor is checked as part of it
        ++checked;
        const QRect r(w->mapTo(viewport, QPoint(0, 0)), w->size());
        EXPECT_GE(r.left(), 0) << when << " " << name << " " << str(w->objectName());
        EXPECT_LE(r.right(), viewport->width()) << when << " " << name << " " << str(w->objectName()) << " at "
                                                << r.right() << " of " << viewport->width();
        // (a control capped on purpose, such as a "…" button, is not squeezed at its cap)
        EXPECT_GE(w->width(), std::min(w->minimumSizeHint().width(), w->maximumWidth()))
            << when << " " << name << " " << w->metaObject()->className() << " " << str(w->objectName()) << " parent "
            << str(w->parentWidget()->objectName()) << " squeezed";
      }
      EXPECT_GT(checked, 3) << name;
    }
  };
  EXPECT_LE(t.window.width(), 1024) << "model dock min " << t.window.findChild<QScrollArea*>("modelScroll")->minimumWidth()
                                     << ", recipe dock min " << t.window.findChild<QScrollArea*>("recipeScroll")->minimumWidth()
                                     << ", central min " << t.window.centralWidget()->minimumSizeHint().width()
                                     << ", window min " << t.window.minimumSizeHint().width();
  checkDocks("1024x700");
  const int modelDockWidth = t.window.findChild<QDockWidget*>("modelDock")->width();
  ASSERT_TRUE(t.window.selectTab("Drift"));
  checkDocks("1024x700, Drift tab");
  EXPECT_EQ(t.window.findChild<QDockWidget*>("modelDock")->width(), modelDockWidth);   // switching tabs keeps it

  t.window.resize(1920, 1080);
  checkDocks("1920x1080");
  EXPECT_GE(t.window.findChild<QDockWidget*>("modelDock")->width(), modelDockWidth);
  ASSERT_TRUE(t.window.selectTab("Inspect"));
  checkDocks("1920x1080, Inspect tab");

  // Reset Layout: a hidden dock comes back.
  t.window.findChild<QDockWidget*>("recipeDock")->hide();
  QAction* reset = t.window.findChild<QAction*>("resetLayoutAction");
  ASSERT_NE(reset, nullptr);
  reset->trigger();
  QApplication::processEvents();
  EXPECT_TRUE(t.window.findChild<QDockWidget*>("recipeDock")->isVisible());
  checkDocks("after Reset Layout");
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
}

// Point 6: the layout a session closes with is the one the next session opens with: each dock where it was, as
// large as it was (after the user moved a splitter and hid a dock), the window as large as it was.
TEST_F(WorkbenchDaily, ARestartOpensTheLayoutThatWasSaved) {
  std::map<std::string, QRect> saved;
  QSize savedWindow;
  {
    test::TestWindow t;
    t.window.resize(1300, 860);
    t.window.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&t.window));
    ASSERT_TRUE(t.window.openModel(modelDir("ref-tiny")));
    auto* modelDock = t.window.findChild<QDockWidget*>("modelDock");
    auto* runsDock = t.window.findChild<QDockWidget*>("runsDock");
    ASSERT_NE(modelDock, nullptr);
    ASSERT_NE(runsDock, nullptr);
    // Moved away from the first start's sizes, so that a restart that fell back on them would show.
    t.window.resizeDocks({modelDock}, {modelDock->width() + 60}, Qt::Horizontal);
    t.window.resizeDocks({runsDock}, {runsDock->height() + 50}, Qt::Vertical);
    t.window.findChild<QDockWidget*>("recipeDock")->hide();
    QApplication::processEvents();
    for (QDockWidget* dock : t.window.findChildren<QDockWidget*>())
      if (dock->isVisible()) saved[str(dock->objectName())] = dock->geometry();
    savedWindow = t.window.size();
    ASSERT_TRUE(t.window.close());   // saves the settings as quitting does
    EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
  }
  ASSERT_GE(saved.size(), 2u);
  ASSERT_EQ(saved.count("recipeDock"), 0u);

  test::TestWindow t;   // the same QSettings: a restart
  t.window.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&t.window));
  QApplication::processEvents();
  EXPECT_EQ(t.window.size(), savedWindow);
  EXPECT_FALSE(t.window.findChild<QDockWidget*>("recipeDock")->isVisible()) << "a dock hidden stays hidden";
  for (const auto& [name, geometry] : saved) {
    auto* dock = t.window.findChild<QDockWidget*>(QString::fromStdString(name));
    ASSERT_NE(dock, nullptr) << name;
    EXPECT_TRUE(dock->isVisible()) << name;
    EXPECT_EQ(dock->geometry(), geometry) << name << ": restored at " << dock->geometry().x() << ","
                                          << dock->geometry().y() << " " << dock->width() << "x" << dock->height()
                                          << ", saved at " << geometry.x() << "," << geometry.y() << " "
                                          << geometry.width() << "x" << geometry.height();
  }
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
}

// Point 9: a tag and a note typed in the Runs dock go to the store (where `pareto-cli runs` reads them), and a
// label the store has (set by `pareto-cli runs label`) shows in the dock.
TEST_F(WorkbenchDaily, TagsAndNotesLiveInTheStore) {
  int64_t labelled = 0, plain = 0;
  {
    ExperimentStore store(dbPath());
    labelled = storeCompressRun(store, "ref-tiny", 12.0, 10.0);
    plain = storeCompressRun(store, "ref-tiny", 13.0, 10.0);
    store.setRunLabel(labelled, "baseline", "from the CLI");
  }
  test::TestWindow t;
  waitForHistory(t);
  EXPECT_EQ(str(t.window.history()->find(int(labelled))->tag), "baseline");
  EXPECT_EQ(str(t.window.history()->find(int(labelled))->note), "from the CLI");
  QSignalSpy saved(&t.window, &MainWindow::labelSaved);
  t.window.history()->setLabel(int(plain), "paper", "window 128\nas the paper");
  ASSERT_TRUE(test::waitForSignals(saved));
  EXPECT_EQ(saved.first().at(0).toInt(), int(plain));
  EXPECT_TRUE(saved.first().at(1).toString().isEmpty()) << str(saved.first().at(1).toString());
  const RunSummary s = ExperimentStore::openForReading(dbPath()).run(plain).summary;
  EXPECT_EQ(s.tag, "paper");
  EXPECT_EQ(s.note, "window 128\nas the paper");
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
}

// Point 9: a run of an earlier session brings its drift curves and discrepancy points back from the store, so
// that Compare overlays it like the session's own; a run stored without them says so.
TEST_F(WorkbenchDaily, StoredRunsBringBackTheirDriftAndDiscrepancy) {
  ActivationDriftResult drift;
  drift.layers = 2;
  drift.steps = 3;
  drift.prompts = 4;
  drift.free.drift = {{0.0, 0.0, 0.0}, {0.1, 0.3, 0.4}};
  drift.free.counts = {4, 4, 3};
  drift.forced = drift.free;
  HessianStudyResult study;
  study.modules.push_back({"model.layers.0.mlp.down_proj", 64, {}, {}});
  study.modules.back().text.delta = 2.0;
  study.modules.back().decode.delta = 1.0;
  int64_t withCurves = 0, without = 0;
  {
    ExperimentStore store(dbPath());
    without = storeCompressRun(store, "ref-tiny", 13.0, 10.0);
    withCurves = store.beginRun(compressStart("ref-tiny", "/runs/ref-tiny-curves"));
    RunResults results;
    addResultsFromJson(results, {{metric::kPerplexity, 11.0},
                                 {"drift", storedDriftJson(drift)},
                                 {"discrepancy", storedDiscrepancyJson(study)}});
    store.finishRun(withCurves, results);
  }
  test::TestWindow t;
  waitForHistory(t);
  const RunRecord* stored = t.window.history()->find(int(withCurves));
  ASSERT_NE(stored, nullptr);
  ASSERT_TRUE(stored->drift);
  EXPECT_EQ(stored->drift->layers, 2);
  EXPECT_EQ(stored->drift->steps, 3);
  EXPECT_DOUBLE_EQ(stored->drift->free.drift[1][2], 0.4);
  ASSERT_TRUE(stored->discrepancy);
  EXPECT_EQ(stored->discrepancy->modules.size(), 1u);
  const RunRecord* plain = t.window.history()->find(int(without));
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->drift);
  EXPECT_TRUE(plain->driftAbsent.contains("stored no drift curves")) << str(plain->driftAbsent);
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
}

// Point 8: calibrating and evaluating on the same text file is allowed, with a warning in the Recipe dock.
TEST_F(WorkbenchDaily, WarnsWhenCalibrationAndEvaluationTextAreOneFile) {
  test::TestWindow t;
  ASSERT_TRUE(t.window.openModel(modelDir("ref-tiny")));
  const std::string text = test::sharedPath("data/heldout-prose.txt");
  QString error;
  ASSERT_TRUE(t.window.recipePanel()->setRecipe(
      {{"calibration", {{"source", "text"}, {"text", text}, {"tokens", 256}, {"window", 64}}},
       {"prune", {{"method", "sparsegpt"}, {"pattern", "2:4"}}}},
      QString(), "test", &error))
      << str(error);
  auto* warning = t.window.findChild<QLabel*>("calibrationOverlapWarning");
  ASSERT_NE(warning, nullptr);
  EvaluationSettings s = t.window.evaluationPanel()->settings();
  s.heldOutText = QString::fromStdString(text);
  t.window.evaluationPanel()->setSettings(s);
  EXPECT_FALSE(warning->isHidden());
  EXPECT_TRUE(warning->text().contains("heldout-prose.txt")) << str(warning->text());
  s.heldOutText = QString::fromStdString(test::sharedPath("data/wikitext2-test.txt"));
  t.window.evaluationPanel()->setSettings(s);
  EXPECT_TRUE(warning->isHidden());
}

// Point 11: each entry of a menu has its own Alt mnemonic (Open Synthetic Model and Save Recipe As both took S).
TEST_F(WorkbenchDaily, MenuEntriesHaveDistinctMnemonics) {
  test::TestWindow t;
  for (QAction* top : t.window.menuBar()->actions()) {
    QMenu* menu = top->menu();
    if (menu == nullptr) continue;
    QMap<QChar, QString> taken;
    for (QAction* a : menu->actions()) {
      const QString text = a->text();
      const int amp = text.indexOf('&');
      if (amp < 0 || amp + 1 >= text.size()) continue;
      const QChar key = text.at(amp + 1).toLower();
      EXPECT_FALSE(taken.contains(key)) << str(top->text()) << ": " << str(text) << " and " << str(taken.value(key));
      taken.insert(key, text);
    }
  }
}

}  // namespace
}  // namespace pareto
