// The workbench's benchmark and run-store gaps of issue 9: the live benchmark strip and its worker (streamed
// results, CPU references labelled as such, cancel, a recorded bench run), predicted tokens/s from the stored
// kernel benchmarks of the current device (Recipe dock, runs of that device, Pareto view), deleting runs from the
// Runs dock and the store, live history refresh, and SVG export of the plots.
#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QFile>
#include <QFileInfo>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMutex>
#include <QMutexLocker>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QThread>
#include <QXmlStreamReader>
#include <atomic>
#include <cmath>
#include <ctime>
#include <qcustomplot.h>

#include "OneBlockModel.h"
#include "SharedData.h"
#include "WidgetTestSupport.h"
#include "app/gui/BenchmarkWorker.h"
#include "compress/Recipe.h"
#include "compress/RecipeEstimate.h"
#include "model/ModelSummary.h"
#include "store/ExperimentStore.h"
#include "store/ModelIdentity.h"
#include "widgets/BenchmarkStrip.h"
#include "widgets/ParetoView.h"
#include "widgets/PlotSupport.h"
#include "widgets/RecipePanel.h"
#include "widgets/RunCompareView.h"
#include "widgets/RunHistory.h"
#include "widgets/RunsPanel.h"

namespace pareto {
namespace {

using nlohmann::json;
using test::str;

const json kTwoFour = {{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}}};
const char* kH200 = "NVIDIA H200 (132 SMs)";   // as `bench kernels` names the device in its rows

RunRecord syntheticRun(double ppl, double tokensPerSecond) {
  RunRecord r;
  r.recipeJson = kTwoFour.dump();
  r.finishedAt = QDateTime::currentDateTime();
  r.metrics = {{metric::kPerplexity, ppl},
               {metric::kDecodeNll, 2.0},
               {metric::kLinearBitsPerWeight, 9.0},
               {metric::kPredictedTokensPerSecond, tokensPerSecond},
               {metric::kDensePerplexity, 10.0},
               {metric::kDenseDecodeNll, 1.0},
               {metric::kDenseLinearBitsPerWeight, 16.0},
               {metric::kDensePredictedTokensPerSecond, 100.0}};
  return r;
}

// A file that parses as XML and whose root element is <svg>.
void expectSvg(const QString& path) {
  QFile file(path);
  ASSERT_TRUE(file.open(QIODevice::ReadOnly)) << str(path);
  const QByteArray bytes = file.readAll();
  ASSERT_GT(bytes.size(), 500) << str(path);
  QXmlStreamReader xml(bytes);
  ASSERT_TRUE(xml.readNextStartElement()) << str(xml.errorString());
  EXPECT_EQ(xml.name().toString(), "svg");
  EXPECT_EQ(xml.namespaceUri().toString(), "http://www.w3.org/2000/svg");
  int elements = 0;
  while (!xml.atEnd()) {
    xml.readNext();
    if (xml.isStartElement()) ++elements;
  }
  EXPECT_FALSE(xml.hasError()) << str(xml.errorString()) << " at line " << xml.lineNumber();
  EXPECT_GT(elements, 10);   // the axes, ticks, labels and points are drawn, not an empty canvas
}

// ---- SVG export ----------------------------------------------------------------------------------------------

TEST(PlotExport, WritesAnSvgThatParsesAsXmlWithAnSvgRoot) {
  RunHistory history;
  ParetoView view(&history);
  history.add(syntheticRun(12.0, 200));
  history.add(syntheticRun(11.0, 100));   // unrecorded runs: drawn all the same
  QTemporaryDir dir;
  QString error;
  // Never shown (no on-screen size yet): exported at a default size.
  ASSERT_TRUE(exportPlot(view.plot(), dir.filePath("pareto.svg"), &error)) << str(error);
  expectSvg(dir.filePath("pareto.svg"));
  view.resize(900, 500);
  view.show();
  QApplication::processEvents();
  ASSERT_TRUE(exportPlot(view.plot(), dir.filePath("shown.SVG"), &error)) << str(error);   // suffix in any case
  expectSvg(dir.filePath("shown.SVG"));
  EXPECT_TRUE(plotExportFilter().contains("*.svg"));
  // Other suffixes are refused with the supported ones named; an unwritable place is reported with its path.
  EXPECT_FALSE(exportPlot(view.plot(), dir.filePath("pareto.bmp"), &error));
  EXPECT_TRUE(error.contains("pareto.bmp") && error.contains(".svg")) << str(error);
  EXPECT_FALSE(exportPlot(view.plot(), dir.filePath("no/such/folder/p.svg"), &error));
  EXPECT_TRUE(error.contains("p.svg")) << str(error);
}

// ---- the benchmark strip on its own --------------------------------------------------------------------------

TEST(BenchmarkStrip, ShowsBarsTheCopyLineAndTokensPerSecondAsResultsArrive) {
  BenchmarkStrip strip;
  strip.resize(900, 500);
  BenchmarkSession session;
  session.device = "CPU";
  session.shape = "ref-tiny: 1 of 4 layers";
  session.copyGbPerSecond = 20;
  session.cpuReference = true;
  session.note = "No CUDA device on this machine";
  session.formats = 3;
  strip.start(session);
  EXPECT_TRUE(strip.isRunning());
  EXPECT_TRUE(strip.status().contains(BenchmarkStrip::kCpuReferenceLabel)) << str(strip.status());
  EXPECT_TRUE(strip.status().contains("No CUDA")) << str(strip.status());
  auto* title = qobject_cast<QCPTextElement*>(strip.plot()->plotLayout()->element(0, 0));
  ASSERT_NE(title, nullptr);
  EXPECT_TRUE(title->text().contains(BenchmarkStrip::kCpuReferenceLabel)) << str(title->text());

  BenchmarkPoint dense;
  dense.name = "dense";
  dense.msPerStep = 2.0;
  dense.gbPerSecond = 10.0;
  dense.fractionOfCopy = 0.5;
  dense.tokensPerSecond = 125.0;
  strip.addPoint(dense);
  auto* bars = qobject_cast<QCPBars*>(strip.plot()->plottable(0));
  ASSERT_NE(bars, nullptr);
  EXPECT_EQ(bars->data()->size(), 1);   // shown as soon as it arrives
  BenchmarkPoint sparse = dense;
  sparse.name = "bitmask-2:4";
  sparse.msPerStep = 1.0;
  sparse.gbPerSecond = 11.0;
  sparse.tokensPerSecond = 250.0;
  sparse.speedupOverDense = 2.0;
  strip.addPoint(sparse);
  BenchmarkPoint missing;
  missing.name = "int4-g128";
  missing.available = false;
  missing.note = "192 columns are not a multiple of 128";
  strip.addPoint(missing);
  bars = qobject_cast<QCPBars*>(strip.plot()->plottable(0));
  EXPECT_EQ(bars->data()->size(), 2);   // the unavailable format has a tick, no bar
  auto* tokens = strip.plot()->graph(0);
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->valueAxis(), strip.plot()->yAxis2);   // tokens/s on the second axis
  EXPECT_EQ(tokens->data()->size(), 2);
  EXPECT_DOUBLE_EQ((tokens->data()->constBegin() + 1)->value, 250.0);
  bool copyLine = false;
  for (int i = 0; i < strip.plot()->itemCount(); ++i)
    if (auto* line = qobject_cast<QCPItemStraightLine*>(strip.plot()->item(i)))
      copyLine = line->point1->value() == 20 && line->point2->value() == 20;   // horizontal at the copy GB/s
  EXPECT_TRUE(copyLine);
  EXPECT_GE(strip.plot()->yAxis->range().upper, 20);
  const QString summary = strip.findChild<QLabel*>("benchmarkSummary")->text();
  EXPECT_TRUE(summary.contains("bitmask-2:4: 11.0 GB/s")) << str(summary);
  EXPECT_TRUE(summary.contains("×2.00 dense")) << str(summary);
  EXPECT_TRUE(summary.contains("unavailable (192 columns")) << str(summary);

  strip.finish("Recorded 2 kernel formats on cpu as run 3.");
  EXPECT_FALSE(strip.isRunning());
  EXPECT_TRUE(strip.status().contains("Recorded 2")) << str(strip.status());
  for (const QLabel* label : strip.findChildren<QLabel*>())
    EXPECT_FALSE(label->toolTip().isEmpty()) << str(label->objectName());
  QTemporaryDir dir;
  QString error;
  ASSERT_TRUE(strip.writeCsv(dir.filePath("bench.csv"), &error)) << str(error);
  ASSERT_TRUE(exportPlot(strip.plot(), dir.filePath("bench.svg"), &error)) << str(error);
  expectSvg(dir.filePath("bench.svg"));
}

// ---- the Recipe dock's prediction basis -----------------------------------------------------------------------

using test::oneBlockModel;

KernelMeasurement measured(const std::string& kernel, double gbPerSecond, double recordedAt) {
  KernelMeasurement m;
  m.kernel = kernel;
  m.device = kH200;
  m.shape = "llama-3.1-8b step";
  m.bytesPerSecond = gbPerSecond * 1e9;
  m.recordedAt = recordedAt;
  return m;
}

QString localDate(double secondsSinceEpoch) {
  return QDateTime::fromSecsSinceEpoch(qint64(secondsSinceEpoch)).date().toString("yyyy-MM-dd");
}

TEST(RecipePanel, SaysWhetherTokensPerSecondComeFromKernelBenchmarksOrBytesOverBandwidth) {
  RecipePanel panel;
  panel.setModel(oneBlockModel());
  QString error;
  ASSERT_TRUE(panel.setRecipe(kTwoFour, QString(), "test", &error)) << str(error);
  auto* label = panel.findChild<QLabel*>("estimate.tokensPerSecond");
  ASSERT_NE(label, nullptr);

  panel.setBandwidth({1e11, "measured CPU copy bandwidth 100.0 GB/s", {}});
  ASSERT_TRUE(panel.estimate());
  EXPECT_FALSE(panel.estimate()->fromKernelBenchmarks);
  EXPECT_TRUE(label->text().contains("estimate: bytes / bandwidth")) << str(label->text());
  EXPECT_TRUE(label->text().contains("measured CPU copy bandwidth")) << str(label->text());
  EXPECT_TRUE(label->toolTip().contains("Now: estimate: bytes / bandwidth")) << str(label->toolTip());

  const double when = 1.7e9;
  DecodeBandwidth kernels{1e11, "measured copy bandwidth",
                          {measured("dense", 4000, when), measured("bitmask-2:4", 3000, when)}};
  panel.setBandwidth(kernels);
  ASSERT_TRUE(panel.estimate()->fromKernelBenchmarks);
  const QString expected = QStringLiteral("from bench kernels on %1, %2").arg(kH200, localDate(when));
  EXPECT_TRUE(label->text().contains(expected)) << str(label->text());
  EXPECT_FALSE(label->text().contains("estimate: bytes / bandwidth")) << str(label->text());
  EXPECT_TRUE(label->toolTip().contains("Now: from the kernel benchmarks")) << str(label->toolTip());
  const RecipeEstimate core = estimateRecipe(Recipe::fromJson(kTwoFour, "", "test"), oneBlockModel(), kernels);
  EXPECT_DOUBLE_EQ(panel.estimate()->tokensPerSecond, core.tokensPerSecond);   // the panel shows core's number
  EXPECT_TRUE(label->text().contains(QLocale().toString(core.tokensPerSecond, 'f', 0) + " tok/s"))
      << str(label->text());

  // Measurements that lack the recipe's kernel: bytes over bandwidth again, and the dock says what is missing.
  panel.setBandwidth({1e11, "measured copy bandwidth", {measured("dense", 4000, when)}});
  EXPECT_FALSE(panel.estimate()->fromKernelBenchmarks);
  EXPECT_TRUE(label->text().contains("estimate: bytes / bandwidth")) << str(label->text());
  EXPECT_TRUE(label->text().contains("lack bitmask-2:4")) << str(label->text());
}

// ---- Runs dock: delete ----------------------------------------------------------------------------------------

TEST(RunsPanel, DeletesTheSelectedRunsOnlyAfterConfirmation) {
  RunHistory history;
  RunsPanel panel(&history);
  ParetoView pareto(&history);
  int id = 0;
  for (double ppl : {14.0, 12.0, 13.0}) {
    RunRecord r = syntheticRun(ppl, 100 + ppl);
    r.id = ++id;   // as the store numbers them
    history.add(r);
  }
  auto* deleteButton = panel.findChild<QPushButton*>("deleteRuns");
  ASSERT_NE(deleteButton, nullptr);
  EXPECT_FALSE(deleteButton->isEnabled());   // nothing selected
  EXPECT_FALSE(deleteButton->toolTip().isEmpty());
  QSignalSpy requested(&panel, &RunsPanel::deleteRequested);
  QStringList questions;
  bool answer = false;
  panel.setConfirmer([&](const QString&, const QString& question) {
    questions << question;
    return answer;
  });
  panel.selectRun(2);
  panel.table()->selectionModel()->select(panel.table()->model()->index(2, 0),   // run 1 (newest first: 3, 2, 1)
                                          QItemSelectionModel::Select | QItemSelectionModel::Rows);
  ASSERT_TRUE(deleteButton->isEnabled());
  deleteButton->click();
  ASSERT_EQ(questions.size(), 1);
  EXPECT_TRUE(questions[0].contains("Delete 2 run")) << str(questions[0]);
  EXPECT_TRUE(questions[0].contains(history.find(2)->name)) << str(questions[0]);
  EXPECT_TRUE(questions[0].contains("stay on disk")) << str(questions[0]);
  EXPECT_EQ(requested.count(), 0);   // "No": nothing happens
  answer = true;
  deleteButton->click();
  ASSERT_EQ(requested.count(), 1);
  EXPECT_EQ(requested.first().first().value<QList<int>>(), (QList<int>{2, 1}));

  // Removing them from the history updates the table, the buttons and the Pareto view at once.
  QSignalSpy removed(&history, &RunHistory::runsRemoved);
  EXPECT_EQ(history.remove({2, 1, 99}), 2);
  ASSERT_EQ(removed.count(), 1);
  EXPECT_EQ(history.rowCount(), 1);
  EXPECT_EQ(panel.table()->model()->rowCount(), 1);
  EXPECT_EQ(history.runs().front().id, 3);
  EXPECT_LT(pareto.pointOf(1).x(), 0);
  EXPECT_GE(pareto.pointOf(3).x(), 0);
  EXPECT_EQ(pareto.frontRunIds(), std::vector<int>{3});
  EXPECT_FALSE(deleteButton->isEnabled());
}

// ---- the window --------------------------------------------------------------------------------------------------

class BenchmarkWindow : public test::SettingsTest {
 protected:
  void SetUp() override {
    test::SettingsTest::SetUp();
    if (!test::sharedAvailable()) GTEST_SKIP() << "shared data not found at " << test::sharedDir();
  }
  static QString tinyDir() { return QString::fromStdString(test::sharedPath("models/ref-tiny")); }
  bool openTiny(test::TestWindow& t) { return t.window.openModel(tinyDir()); }
  static void setRecipe(MainWindow& w, const json& doc) {
    QString error;
    ASSERT_TRUE(w.recipePanel()->setRecipe(doc, QString(), "test", &error)) << str(error);
  }
  static void waitForDevices(test::TestWindow& t) {
    QSignalSpy ready(&t.window, &MainWindow::devicesReady);
    ASSERT_TRUE(test::waitForSignals(ready, 1, 60000));
  }
  // A finished compress run of ref-tiny in the store, as the workbench records one.
  int64_t storeCompressRun(ExperimentStore& store, const std::string& device, double ppl) {
    RunStart start;
    start.kind = "compress";
    start.model = identifyModel(str(tinyDir()));
    start.recipe = kTwoFour;
    start.device = device;
    start.output = "/runs/tiny-" + std::to_string(int(ppl));
    const int64_t id = store.beginRun(start);
    RunResults results;
    results.metrics = {{metric::kPerplexity, ppl},      {metric::kDensePerplexity, 10.0},
                       {metric::kLinearBitsPerWeight, 9.0}, {metric::kPredictedTokensPerSecond, 1.0 + ppl},
                       {metric::kDensePredictedTokensPerSecond, 1.0}};
    store.finishRun(id, results);
    return id;
  }
};

// Gap 2: Benchmark runs core's kernel benchmark on the benchmark worker's thread, for the recipe's kernel format
// and dense at ref-tiny's linear shapes, then the folder's decode loop (as stored: dense), streams each result
// into the strip as it is measured, labels the CPU references, and records one bench run with the rows `bench
// kernels` and `bench decode` write.
TEST_F(BenchmarkWindow, BenchmarkStreamsResultsFromItsThreadAndRecordsABenchRun) {
  test::TestWindow t;
  waitForDevices(t);
  EXPECT_FALSE(t.window.benchmarkAction()->isEnabled());   // no model yet
  EXPECT_FALSE(t.window.startBenchmark());
  ASSERT_EQ(t.errors.size(), 1);
  EXPECT_TRUE(t.errors[0].contains("Open a model first")) << str(t.errors[0]);
  t.errors.clear();
  ASSERT_TRUE(openTiny(t));
  setRecipe(t.window, kTwoFour);
  EXPECT_TRUE(t.window.benchmarkAction()->isEnabled()) << str(t.window.benchmarkAction()->toolTip());

  std::atomic<int> onGuiThread{0}, measuredBeforeEnd{0};
  QThread* gui = QApplication::instance()->thread();
  QObject::connect(t.window.benchmarkWorker(), &BenchmarkWorker::pointMeasured, t.window.benchmarkWorker(),
                   [&](const BenchmarkPoint&) {
                     if (QThread::currentThread() == gui) ++onGuiThread;
                   },
                   Qt::DirectConnection);
  QSignalSpy points(t.window.benchmarkWorker(), &BenchmarkWorker::pointMeasured);
  QSignalSpy ended(&t.window, &MainWindow::benchmarkEnded);
  QObject::connect(&t.window, &MainWindow::benchmarkEnded, &t.window,
                   [&] { measuredBeforeEnd = int(t.window.benchmarkStrip()->points().size()); });
  t.window.benchmarkAction()->trigger();
  EXPECT_TRUE(t.window.isBenchmarking());
  EXPECT_FALSE(t.window.benchmarkAction()->isEnabled());
  EXPECT_FALSE(t.window.startRun());   // one thing at a time: a run would disturb the timings
  ASSERT_EQ(t.errors.size(), 1);
  EXPECT_TRUE(t.errors[0].contains("benchmark is running")) << str(t.errors[0]);
  t.errors.clear();
  EXPECT_EQ(t.window.tabNames().indexOf("Benchmark"), 5);
  ASSERT_TRUE(test::waitForSignals(ended, 1, 120000));
  ASSERT_TRUE(ended.first().at(0).toBool()) << str(ended.first().at(1).toString()) << str(t.errors.join("\n"));
  EXPECT_EQ(onGuiThread.load(), 0);
  EXPECT_EQ(points.count(), 3);
  EXPECT_EQ(measuredBeforeEnd.load(), 3);   // each reached the strip before the session ended

  const BenchmarkStrip* strip = t.window.benchmarkStrip();
  EXPECT_FALSE(strip->isRunning());
  ASSERT_EQ(strip->points().size(), 3);
  EXPECT_EQ(str(strip->points()[0].name), "dense");
  EXPECT_EQ(str(strip->points()[1].name), "bitmask-2:4");
  // The decode loop of the folder as it is stored (a dense checkpoint), after the kernels, with tiny CPU settings.
  const BenchmarkPoint& decoded = strip->points()[2];
  EXPECT_EQ(decoded.kind, BenchmarkPoint::Kind::Decode);
  EXPECT_EQ(str(decoded.name), "dense");
  ASSERT_TRUE(decoded.available) << str(decoded.note);
  EXPECT_GT(decoded.tokensPerSecond, 0);
  EXPECT_EQ(decoded.context, 8);
  EXPECT_EQ(decoded.newTokens, 4);
  EXPECT_TRUE(strip->session().decodeShape.contains("ref-tiny as stored")) << str(strip->session().decodeShape);
  for (const BenchmarkPoint& p : strip->points()) {
    if (p.kind != BenchmarkPoint::Kind::Kernel) continue;
    EXPECT_TRUE(p.available) << str(p.name) << " " << str(p.note);
    EXPECT_GT(p.gbPerSecond, 0) << str(p.name);
    EXPECT_GT(p.msPerStep, 0) << str(p.name);
    // One layer was timed: the model's 4 layers take four times as long.
    EXPECT_NEAR(p.tokensPerSecond, 1000.0 / (4 * p.msPerStep), 1e-9 * p.tokensPerSecond) << str(p.name);
  }
  EXPECT_TRUE(strip->session().cpuReference);   // this machine has no CUDA
  EXPECT_GT(strip->session().copyGbPerSecond, 0);
  EXPECT_TRUE(strip->session().shape.contains("1 of 4 layers")) << str(strip->session().shape);
  EXPECT_TRUE(strip->status().contains(BenchmarkStrip::kCpuReferenceLabel)) << str(strip->status());
  EXPECT_TRUE(strip->status().contains("CUDA")) << str(strip->status());   // it says why
  EXPECT_TRUE(t.window.benchmarkAction()->isEnabled());

  ExperimentStore store(dbPath());
  RunFilter bench;
  bench.kind = "bench";
  const std::vector<RunSummary> runs = store.listRuns(bench);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, RunStatus::Finished);
  EXPECT_TRUE(QString::fromStdString(runs[0].modelPath).endsWith("ref-tiny")) << runs[0].modelPath;
  EXPECT_EQ(runs[0].device.rfind("cpu", 0), 0u) << runs[0].device;
  EXPECT_TRUE(ended.first().at(1).toString().contains(QStringLiteral("run %1").arg(runs[0].id)));
  // The run the status bar names is in the Runs dock under that id (read from the store after the benchmark).
  if (t.window.history()->find(int(runs[0].id)) == nullptr) {
    QSignalSpy synced(&t.window, &MainWindow::historyLoaded);
    ASSERT_TRUE(test::waitForSignals(synced));
  }
  ASSERT_NE(t.window.history()->find(int(runs[0].id)), nullptr);
  EXPECT_EQ(str(t.window.history()->find(int(runs[0].id))->kind), "bench");
  EXPECT_LT(t.window.paretoView()->pointOf(int(runs[0].id)).x(), 0);   // not a compress run: not on the front
  const RunDetails details = store.run(runs[0].id);
  ASSERT_EQ(details.benchmarks.size(), 3u);
  EXPECT_EQ(details.benchmarks[0].kernel, "dense");
  EXPECT_EQ(details.benchmarks[1].kernel, "bitmask-2:4");
  EXPECT_EQ(details.benchmarks[1].shape, "ref-tiny step");
  EXPECT_EQ(details.benchmarks[2].kernel, "decode dense");   // as `pareto-cli bench decode --model` names it
  // The folder as the window was given it (../shared/... or an absolute path): its name and the context.
  EXPECT_TRUE(QString::fromStdString(details.benchmarks[2].shape).endsWith("ref-tiny context 8"))
      << details.benchmarks[2].shape;
  EXPECT_NEAR(details.benchmarks[2].timeUs, decoded.msPerStep * 1e3, 1e-6);
  EXPECT_NEAR(details.benchmarks[1].timeUs, strip->points()[1].msPerStep * 1e3, 1e-6);
  EXPECT_NEAR(details.benchmarks[1].gbps, strip->points()[1].gbPerSecond, 1e-9);
  EXPECT_EQ(details.recipe["layers"], 1);
  EXPECT_EQ(details.recipe["model_layers"], 4);
  // CPU references never predict tokens/s: the Recipe dock still estimates from bytes over bandwidth.
  EXPECT_FALSE(t.window.recipePanel()->estimate()->fromKernelBenchmarks);
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
}

TEST_F(BenchmarkWindow, CancelStopsTheBenchmarkAndRecordsNothing) {
  test::TestWindow t;
  waitForDevices(t);
  ASSERT_TRUE(openTiny(t));
  setRecipe(t.window, kTwoFour);
  QSignalSpy ended(&t.window, &MainWindow::benchmarkEnded);
  // Cancel through the strip's Cancel button from inside the benchmark's first progress report (on the worker
  // thread; the click itself happens on the GUI thread, as a user's would, while the first format is measured).
  QMutex mutex;
  QStringList reports;
  QObject::connect(t.window.benchmarkWorker(), &BenchmarkWorker::progress, t.window.benchmarkWorker(),
                   [&](double, const QString& message) {
                     QMutexLocker lock(&mutex);
                     reports << message;
                     if (reports.size() > 1) return;
                     QMetaObject::invokeMethod(
                         &t.window,
                         [&t] { t.window.benchmarkStrip()->findChild<QPushButton*>("benchmarkCancel")->click(); },
                         Qt::BlockingQueuedConnection);
                   },
                   Qt::DirectConnection);
  ASSERT_TRUE(t.window.startBenchmark()) << str(t.errors.join("\n"));
  ASSERT_TRUE(test::waitForSignals(ended, 1, 120000));
  EXPECT_FALSE(ended.first().at(0).toBool());
  EXPECT_TRUE(ended.first().at(1).toString().contains("cancelled")) << str(ended.first().at(1).toString());
  EXPECT_TRUE(ended.first().at(1).toString().contains("nothing recorded")) << str(ended.first().at(1).toString());
  {
    QMutexLocker lock(&mutex);
    ASSERT_FALSE(reports.isEmpty());
    for (const QString& r : reports)   // stopped within the first format: the second never started
      EXPECT_FALSE(r.contains("bitmask")) << str(reports.join(" | "));
  }
  EXPECT_TRUE(t.window.benchmarkStrip()->points().isEmpty());
  EXPECT_FALSE(t.window.benchmarkStrip()->isRunning());
  EXPECT_TRUE(t.window.benchmarkStrip()->status().contains("cancelled")) << str(t.window.benchmarkStrip()->status());
  EXPECT_FALSE(t.window.isBenchmarking());
  EXPECT_TRUE(t.window.benchmarkAction()->isEnabled());
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));   // a cancel is not an error
  ExperimentStore store(dbPath());
  RunFilter bench;
  bench.kind = "bench";
  EXPECT_TRUE(store.listRuns(bench).empty());
}

// Gap 1: with kernel benchmarks of the current device in the store, predicted tokens/s come from them (Recipe
// dock, and the stored runs of that device in the Runs dock and the Pareto view); other devices estimate bytes
// over their copy bandwidth. The GPU is simulated: its rows are written as `pareto-cli bench kernels` writes them
// and the device list is the worker's signal with an H200 in it.
TEST_F(BenchmarkWindow, PredictedTokensPerSecondComeFromTheStoredKernelBenchmarksOfTheDevice) {
  double recordedAt = 0;
  {
    ExperimentStore store(dbPath());
    RunStart start;
    start.kind = "bench";
    start.device = kH200;
    recordBenchmarks(store, start,
                     {{kH200, "dense", "llama-3.1-8b step", 1, 4000.0, 3900.0},
                      {kH200, "bitmask-2:4", "llama-3.1-8b step", 1, 3000.0, 3100.0},
                      {kH200, "bitmask-2:4", "llama-3.1-8b step", 8, 3500.0, 3200.0}});   // batch 8: not used
    RunFilter bench;
    bench.kind = "bench";
    recordedAt = store.listRuns(bench).front().endedAt;
    storeCompressRun(store, "NVIDIA H200", 12.0);   // a run on that GPU: re-predicted
    storeCompressRun(store, "cpu", 13.0);           // a CPU run: keeps its own prediction
  }
  test::TestWindow t;
  waitForDevices(t);
  QSignalSpy loaded(&t.window, &MainWindow::historyLoaded);
  if (t.window.history()->rowCount() < 3) ASSERT_TRUE(test::waitForSignals(loaded));
  ASSERT_EQ(t.window.history()->rowCount(), 3);   // the bench run is listed too
  ASSERT_TRUE(openTiny(t));
  setRecipe(t.window, kTwoFour);
  auto* label = t.window.recipePanel()->findChild<QLabel*>("estimate.tokensPerSecond");
  EXPECT_TRUE(label->text().contains("estimate: bytes / bandwidth")) << str(label->text());   // the CPU

  QSignalSpy measurements(&t.window, &MainWindow::measurementsLoaded);
  QSignalSpy predictions(&t.window, &MainWindow::predictionsUpdated);
  QVector<ComputeDevice> devices;
  devices << ComputeDevice{"cpu", "CPU", 2e10} << ComputeDevice{"cuda:0", "NVIDIA H200 (cuda:0)", 4.0e12};
  emit t.window.worker()->devicesProbed(devices);
  t.window.selectDevice("cuda:0");
  ASSERT_EQ(str(t.window.currentDevice()), "cuda:0");
  ASSERT_TRUE(test::waitForSignals(measurements, 1, 30000));
  while (measurements.last().at(0).toInt() == 0 && measurements.wait(30000)) {
  }
  ASSERT_EQ(measurements.last().at(0).toInt(), 2);   // dense and bitmask-2:4 at batch 1
  ASSERT_EQ(t.window.kernelMeasurements().size(), 2u);

  // The Recipe dock: core's estimate with the measured kernels, and the label says so with the date.
  const auto& estimate = t.window.recipePanel()->estimate();
  ASSERT_TRUE(estimate);
  ASSERT_TRUE(estimate->fromKernelBenchmarks) << estimate->bandwidthSource;
  const ModelSummary tiny = summarizeModel(str(tinyDir()));
  const RecipeEstimate expected =
      estimateRecipe(Recipe::fromJson(kTwoFour, "", "test"), tiny, t.window.currentBandwidth());
  EXPECT_DOUBLE_EQ(estimate->tokensPerSecond, expected.tokensPerSecond);
  double linear = 0, seconds = 0;
  for (const ModuleEstimate& m : expected.modules) {
    linear += double(m.bytes);
    seconds += double(m.bytes) / 3.1e12;
  }
  seconds += (double(expected.bytesPerToken) - linear) / 3.9e12;
  EXPECT_NEAR(estimate->tokensPerSecond, 1.0 / seconds, 1e-9 / seconds);
  const QString source = QStringLiteral("from bench kernels on %1, %2").arg(kH200, localDate(recordedAt));
  EXPECT_TRUE(label->text().contains(source)) << str(label->text());
  EXPECT_TRUE(label->toolTip().contains("Now: from the kernel benchmarks")) << str(label->toolTip());

  // The stored H200 run is re-predicted from the same measurements (Runs dock and Pareto view), the CPU run not.
  ASSERT_TRUE(test::waitForSignals(predictions, 1, 30000));
  EXPECT_EQ(predictions.last().at(0).toInt(), 1);
  const RunRecord* gpuRun = nullptr;
  const RunRecord* cpuRun = nullptr;
  for (const RunRecord& r : t.window.history()->runs())
    if (r.kind == "compress") (r.device == "cpu" ? cpuRun : gpuRun) = &r;
  ASSERT_TRUE(gpuRun && cpuRun);
  EXPECT_DOUBLE_EQ(gpuRun->metric(metric::kPredictedTokensPerSecond), expected.tokensPerSecond);
  EXPECT_DOUBLE_EQ(gpuRun->metric(metric::kDensePredictedTokensPerSecond), expected.denseTokensPerSecond);
  EXPECT_DOUBLE_EQ(cpuRun->metric(metric::kPredictedTokensPerSecond), 14.0);
  int gpuRow = 0;
  for (int r = 0; r < t.window.history()->rowCount(); ++r)
    if (t.window.history()->index(r, 0).data(RunHistory::RunIdRole).toInt() == gpuRun->id) gpuRow = r;
  const QString tip =
      t.window.history()->index(gpuRow, RunHistory::TokensPerSecondColumn).data(Qt::ToolTipRole).toString();
  EXPECT_TRUE(tip.contains("bench kernels on NVIDIA H200")) << str(tip);
  t.window.paretoView()->setAxes("ppl", "predicted_tok_s");
  const QPointF p = t.window.paretoView()->pointOf(gpuRun->id);
  ASSERT_GE(p.x(), 0);
  EXPECT_NEAR(t.window.paretoView()->plot()->xAxis->pixelToCoord(p.x()), expected.tokensPerSecond,
              1e-3 * expected.tokensPerSecond);

  // Back on the CPU: bytes over its copy bandwidth again.
  t.window.selectDevice("cpu");
  EXPECT_TRUE(t.window.kernelMeasurements().empty());
  EXPECT_FALSE(t.window.recipePanel()->estimate()->fromKernelBenchmarks);
  EXPECT_TRUE(label->text().contains("estimate: bytes / bandwidth")) << str(label->text());
}

// Gap 3: Delete in the Runs dock (confirmed) removes the runs from the dock, the Pareto view and the store, with
// their metrics; the current run's views are cleared.
TEST_F(BenchmarkWindow, DeletingRunsRemovesThemFromTheDockTheParetoViewAndTheStore) {
  int64_t kept = 0, gone = 0;
  {
    ExperimentStore store(dbPath());
    kept = storeCompressRun(store, "cpu", 12.0);
    gone = storeCompressRun(store, "cpu", 13.0);
  }
  test::TestWindow t;
  QSignalSpy loaded(&t.window, &MainWindow::historyLoaded);
  ASSERT_TRUE(test::waitForSignals(loaded));
  ASSERT_EQ(t.window.history()->rowCount(), 2);
  int goneId = 0, keptId = 0;
  for (const RunRecord& r : t.window.history()->runs()) (r.id == gone ? goneId : keptId) = r.id;
  ASSERT_TRUE(goneId > 0 && keptId > 0);
  t.window.openRun(goneId);
  t.window.compareRuns({goneId, keptId});
  ASSERT_GE(t.window.paretoView()->pointOf(goneId).x(), 0);

  RunsPanel* panel = t.window.runsPanel();
  int asked = 0;
  panel->setConfirmer([&](const QString&, const QString&) {
    ++asked;
    return asked > 1;   // "No" the first time, "Yes" the second
  });
  panel->selectRun(goneId);
  EXPECT_FALSE(panel->deleteSelected());
  EXPECT_EQ(t.window.history()->rowCount(), 2);
  QSignalSpy deleted(&t.window, &MainWindow::runsDeleted);
  panel->findChild<QPushButton*>("deleteRuns")->click();
  EXPECT_EQ(asked, 2);
  // The window drops it at once; the store deletes it on the benchmark worker.
  EXPECT_EQ(t.window.history()->rowCount(), 1);
  EXPECT_EQ(panel->table()->model()->rowCount(), 1);
  EXPECT_LT(t.window.paretoView()->pointOf(goneId).x(), 0);
  EXPECT_EQ(t.window.currentRunId(), 0);
  EXPECT_EQ(t.window.compareView()->findChild<QTableWidget*>("compareTable")->columnCount(), 1);
  ASSERT_TRUE(test::waitForSignals(deleted));
  EXPECT_EQ(deleted.first().at(0).toInt(), 1);
  EXPECT_TRUE(deleted.first().at(1).toString().isEmpty()) << str(deleted.first().at(1).toString());
  ExperimentStore store(dbPath());
  EXPECT_FALSE(store.hasRun(gone));
  ASSERT_TRUE(store.hasRun(kept));
  EXPECT_EQ(store.listRuns().size(), 1u);
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));

  // A new window sees the store as it is now.
  test::TestWindow reopened;
  QSignalSpy reloaded(&reopened.window, &MainWindow::historyLoaded);
  ASSERT_TRUE(test::waitForSignals(reloaded));
  ASSERT_EQ(reopened.window.history()->rowCount(), 1);
  EXPECT_EQ(reopened.window.history()->runs().front().id, kept);
}

// Gap 3, live refresh: a run the worker reports finished shows in the Runs dock and the Pareto view at once,
// without a restart (the end-to-end runs of test_workbench.cpp go through the real worker).
TEST_F(BenchmarkWindow, AFinishedRunShowsInTheRunsDockAndTheParetoViewAtOnce) {
  test::TestWindow t;
  QSignalSpy loaded(&t.window, &MainWindow::historyLoaded);
  ASSERT_TRUE(test::waitForSignals(loaded));
  EXPECT_EQ(t.window.runsPanel()->table()->model()->rowCount(), 0);
  QSignalSpy ended(&t.window, &MainWindow::runEnded);
  RunRecord finished = syntheticRun(12.0, 150.0);
  finished.modelDir = tinyDir();
  emit t.window.worker()->runFinished(finished);
  ASSERT_EQ(ended.count(), 1);
  EXPECT_TRUE(ended.first().at(0).toBool());
  ASSERT_EQ(t.window.runsPanel()->table()->model()->rowCount(), 1);
  const int id = t.window.history()->runs().front().id;
  EXPECT_EQ(t.window.currentRunId(), id);
  t.window.paretoView()->setAxes("ppl", "predicted_tok_s");
  EXPECT_GE(t.window.paretoView()->pointOf(id).x(), 0);
  EXPECT_EQ(t.window.paretoView()->frontRunIds(), std::vector<int>{id});
  RunRecord second = syntheticRun(11.0, 200.0);   // better on both axes: the front moves to it
  second.modelDir = tinyDir();
  emit t.window.worker()->runFinished(second);
  EXPECT_EQ(t.window.runsPanel()->table()->model()->rowCount(), 2);
  EXPECT_EQ(t.window.paretoView()->frontRunIds(), std::vector<int>{t.window.history()->runs().back().id});
}

}  // namespace
}  // namespace pareto
