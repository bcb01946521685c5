// Synthetic models in the workbench and the Benchmark action's decode loop: opening a published configuration
// fills the Model dock and disables what needs real weights (with the reason); Benchmark on a synthetic model
// runs the kernels and then the decode loop on the CPU references, streams both kinds of points into the strip
// and records one bench run with the rows `bench kernels` and `bench decode` write; cancel records nothing.
#include <gtest/gtest.h>

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QLabel>
#include <QLocale>
#include <QMenu>
#include <QMutex>
#include <QMutexLocker>
#include <QPushButton>
#include <QSignalSpy>
#include <QThread>
#include <atomic>
#include <qcustomplot.h>

#include "SharedData.h"
#include "WidgetTestSupport.h"
#include "app/gui/BenchmarkWorker.h"
#include "checkpoint/ModelPresets.h"
#include "store/ExperimentStore.h"
#include "widgets/BenchmarkStrip.h"
#include "widgets/GenerationPanel.h"
#include "widgets/ModelSummaryView.h"
#include "widgets/RecipePanel.h"

namespace pareto {
namespace {

using nlohmann::json;
using test::str;
using test::textOf;

const json kTwoFour = {{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}}};

class SyntheticModel : public test::SettingsTest {
 protected:
  static void waitForDevices(test::TestWindow& t) {
    QSignalSpy ready(&t.window, &MainWindow::devicesReady);
    ASSERT_TRUE(test::waitForSignals(ready, 1, 60000));
  }
  static void setRecipe(MainWindow& w, const json& doc) {
    QString error;
    ASSERT_TRUE(w.recipePanel()->setRecipe(doc, QString(), "test", &error)) << str(error);
  }
  static std::vector<RunSummary> benchRuns(const std::string& db) {
    ExperimentStore store(db);
    RunFilter bench;
    bench.kind = "bench";
    return store.listRuns(bench);
  }
};

// ---- opening ----------------------------------------------------------------------------------------------------

TEST_F(SyntheticModel, OpeningAPresetFillsTheModelDockAndDisablesCompressWithAReason) {
  test::TestWindow t;
  waitForDevices(t);
  // Listed in the Model dock and in File ▸ Open Synthetic Model, every known preset.
  auto* combo = t.window.findChild<QComboBox*>("syntheticModels");
  auto* menu = t.window.findChild<QMenu*>("syntheticMenu");
  ASSERT_TRUE(combo && menu);
  ASSERT_EQ(combo->count(), int(knownModelPresets().size()));
  ASSERT_EQ(menu->actions().size(), int(knownModelPresets().size()));
  for (QAction* a : menu->actions()) EXPECT_FALSE(a->toolTip().isEmpty()) << str(a->text());

  // Through the dock: choose tiny-llama and press Open.
  combo->setCurrentIndex(combo->findData("tiny-llama"));
  t.window.findChild<QPushButton*>("openSyntheticModel")->click();
  ASSERT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
  EXPECT_EQ(str(t.window.currentSyntheticModel()), "tiny-llama");
  EXPECT_TRUE(t.window.currentModelDir().isEmpty());
  const ModelSummaryView* view = t.window.modelView();
  EXPECT_TRUE(view->isSynthetic());
  EXPECT_EQ(str(textOf(view, "architecture")), "LlamaForCausalLM (llama)");
  EXPECT_TRUE(textOf(view, "parameters").contains(QLocale().toString(qlonglong(1443072)))) << str(textOf(view, "parameters"));
  EXPECT_TRUE(textOf(view, "size").contains("at fp16")) << str(textOf(view, "size"));
  EXPECT_TRUE(textOf(view, "dtype").startsWith("BF16")) << str(textOf(view, "dtype"));   // published torch_dtype
  EXPECT_EQ(str(textOf(view, "device")), "CPU");
  EXPECT_EQ(str(textOf(view, "layers")), "2");
  EXPECT_TRUE(textOf(view, "path").contains("tiny-llama")) << str(textOf(view, "path"));
  EXPECT_EQ(view->tensorTable()->rowCount(), 21);   // embedding, 2 × 9 per layer, norm, lm_head
  for (const char* key : {"path", "architecture", "parameters", "size", "dtype", "files"}) {
    const auto* field = view->findChild<QWidget*>(key);
    ASSERT_NE(field, nullptr) << key;
    EXPECT_TRUE(field->toolTip().contains("synthetic", Qt::CaseInsensitive) ||
                field->toolTip().contains("published", Qt::CaseInsensitive))
        << key << ": " << str(field->toolTip());
  }
  for (const QLabel* label : view->findChildren<QLabel*>())
    EXPECT_FALSE(label->toolTip().isEmpty()) << str(label->objectName()) << " " << str(label->text());

  // Compress and evaluate need real weights: disabled, and the reason is on the action and the button.
  setRecipe(t.window, kTwoFour);
  EXPECT_TRUE(t.window.recipePanel()->problems().isEmpty()) << str(t.window.recipePanel()->problems().join("\n"));
  EXPECT_TRUE(t.window.recipePanel()->estimate());   // the Recipe dock estimates from the configuration
  EXPECT_FALSE(t.window.runAction()->isEnabled());
  EXPECT_TRUE(t.window.runAction()->toolTip().contains("synthetic model")) << str(t.window.runAction()->toolTip());
  auto* runButton = t.window.findChild<QPushButton*>("runButton");
  ASSERT_NE(runButton, nullptr);
  EXPECT_FALSE(runButton->isEnabled());
  EXPECT_TRUE(runButton->toolTip().contains("random")) << str(runButton->toolTip());
  EXPECT_FALSE(t.window.startRun());
  ASSERT_EQ(t.errors.size(), 1);
  EXPECT_TRUE(t.errors[0].contains("synthetic model")) << str(t.errors[0]);
  t.errors.clear();
  auto* generate = t.window.generationPanel()->findChild<QPushButton*>("generateButton");
  ASSERT_NE(generate, nullptr);
  EXPECT_FALSE(generate->isEnabled());
  EXPECT_TRUE(generate->toolTip().contains("synthetic model")) << str(generate->toolTip());
  // Benchmark works on it.
  EXPECT_TRUE(t.window.benchmarkAction()->isEnabled()) << str(t.window.benchmarkAction()->toolTip());

  // Through the File menu: another preset, with its published size.
  QAction* llama8b = nullptr;
  for (QAction* a : menu->actions())
    if (a->text() == "llama-3.1-8b") llama8b = a;
  ASSERT_NE(llama8b, nullptr);
  llama8b->trigger();
  EXPECT_EQ(str(t.window.currentSyntheticModel()), "llama-3.1-8b");
  EXPECT_TRUE(textOf(view, "parameters").contains(QLocale().toString(qlonglong(8030261248))))
      << str(textOf(view, "parameters"));
  EXPECT_EQ(str(textOf(view, "kvHeads")).rfind("8 (grouped-query", 0), 0u) << str(textOf(view, "kvHeads"));
  EXPECT_FALSE(t.window.openSyntheticModel("no-such-model"));
  ASSERT_EQ(t.errors.size(), 1);
  EXPECT_TRUE(t.errors[0].contains("tiny-llama")) << str(t.errors[0]);   // the known names are listed
  EXPECT_EQ(str(t.window.currentSyntheticModel()), "llama-3.1-8b");        // the model shown before stays
  t.errors.clear();

  // A model folder afterwards: the folder captions come back and the run is possible again.
  if (!test::sharedAvailable()) return;
  ASSERT_TRUE(t.window.openModel(QString::fromStdString(test::sharedPath("models/ref-tiny"))));
  EXPECT_TRUE(t.window.currentSyntheticModel().isEmpty());
  EXPECT_FALSE(view->isSynthetic());
  EXPECT_FALSE(textOf(view, "size").contains("at fp16"));
  EXPECT_FALSE(view->findChild<QWidget*>("parameters")->toolTip().contains("published"));
  EXPECT_TRUE(t.window.runAction()->isEnabled()) << str(t.window.runAction()->toolTip());
}

// ---- benchmarking -----------------------------------------------------------------------------------------------

TEST_F(SyntheticModel, BenchmarkStreamsKernelAndDecodePointsOnTheCpuAndRecordsADecodeDenseRow) {
  test::TestWindow t;
  waitForDevices(t);
  ASSERT_TRUE(t.window.openSyntheticModel("tiny-llama")) << str(t.errors.join("\n"));
  setRecipe(t.window, kTwoFour);
  std::atomic<int> onGuiThread{0};
  QThread* gui = QApplication::instance()->thread();
  QObject::connect(t.window.benchmarkWorker(), &BenchmarkWorker::pointMeasured, t.window.benchmarkWorker(),
                   [&](const BenchmarkPoint&) {
                     if (QThread::currentThread() == gui) ++onGuiThread;
                   },
                   Qt::DirectConnection);
  QSignalSpy points(t.window.benchmarkWorker(), &BenchmarkWorker::pointMeasured);
  QSignalSpy ended(&t.window, &MainWindow::benchmarkEnded);
  std::atomic<int> shownBeforeEnd{0};
  QObject::connect(&t.window, &MainWindow::benchmarkEnded, &t.window,
                   [&] { shownBeforeEnd = int(t.window.benchmarkStrip()->points().size()); });
  t.window.benchmarkAction()->trigger();
  ASSERT_TRUE(t.window.isBenchmarking()) << str(t.errors.join("\n"));
  ASSERT_TRUE(test::waitForSignals(ended, 1, 120000));
  ASSERT_TRUE(ended.first().at(0).toBool()) << str(ended.first().at(1).toString()) << str(t.errors.join("\n"));
  EXPECT_EQ(onGuiThread.load(), 0);

  // Kernels first (dense, bitmask-2:4 at tiny-llama's shapes), then the decode loop in the same formats.
  const BenchmarkStrip* strip = t.window.benchmarkStrip();
  ASSERT_EQ(strip->points().size(), 4);
  EXPECT_EQ(points.count(), 4);
  EXPECT_EQ(shownBeforeEnd.load(), 4);   // streamed: each was in the strip before the session ended
  const QStringList names{"dense", "bitmask-2:4", "dense", "bitmask-2:4"};
  for (int i = 0; i < 4; ++i) {
    const BenchmarkPoint& p = strip->points()[i];
    EXPECT_EQ(p.kind, i < 2 ? BenchmarkPoint::Kind::Kernel : BenchmarkPoint::Kind::Decode) << i;
    EXPECT_EQ(p.name, names[i]) << i;
    ASSERT_TRUE(p.available) << str(p.name) << ": " << str(p.note);
    EXPECT_GT(p.tokensPerSecond, 0) << i;
    EXPECT_GT(p.gbPerSecond, 0) << i;
    EXPECT_GT(p.msPerStep, 0) << i;
  }
  for (int i = 2; i < 4; ++i) {   // tiny CPU settings
    EXPECT_EQ(strip->points()[i].context, 8);
    EXPECT_EQ(strip->points()[i].newTokens, 4);
    EXPECT_NEAR(strip->points()[i].tokensPerSecond, 1000.0 / strip->points()[i].msPerStep,
                1e-9 * strip->points()[i].tokensPerSecond);
  }
  EXPECT_NEAR(strip->points()[3].speedupOverDense, strip->points()[3].tokensPerSecond / strip->points()[2].tokensPerSecond,
              1e-9);
  EXPECT_TRUE(strip->session().cpuReference);
  EXPECT_TRUE(strip->session().shape.contains("tiny-llama: 1 of 2 layers")) << str(strip->session().shape);
  EXPECT_TRUE(strip->session().decodeShape.contains("tiny-llama (1 of 2 layers)")) << str(strip->session().decodeShape);
  EXPECT_TRUE(strip->session().decodeShape.contains("context 8")) << str(strip->session().decodeShape);
  EXPECT_TRUE(strip->status().contains(BenchmarkStrip::kCpuReferenceLabel)) << str(strip->status());
  EXPECT_TRUE(strip->status().contains("Decode loop:")) << str(strip->status());
  // On the plot: decode GB/s bars beside the kernel bars, measured tokens/s on the right axis.
  auto* decodeBars = qobject_cast<QCPBars*>(strip->plot()->plottable(1));
  ASSERT_NE(decodeBars, nullptr);
  EXPECT_EQ(decodeBars->data()->size(), 2);
  ASSERT_GE(strip->plot()->graphCount(), 2);
  EXPECT_EQ(strip->plot()->graph(1)->valueAxis(), strip->plot()->yAxis2);
  EXPECT_EQ(strip->plot()->graph(1)->data()->size(), 2);
  const QString summary = strip->findChild<QLabel*>("benchmarkSummary")->text();
  EXPECT_TRUE(summary.contains("decode dense:")) << str(summary);
  EXPECT_TRUE(summary.contains("tok/s measured")) << str(summary);

  // One bench run: the kernel rows as `bench kernels` writes them, the decode rows as `bench decode` does.
  const std::vector<RunSummary> runs = benchRuns(dbPath());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, RunStatus::Finished);
  EXPECT_TRUE(runs[0].modelPath.empty()) << runs[0].modelPath;   // no folder behind a synthetic model
  EXPECT_TRUE(ended.first().at(1).toString().contains(QStringLiteral("run %1").arg(runs[0].id)))
      << str(ended.first().at(1).toString());
  const RunDetails details = ExperimentStore(dbPath()).run(runs[0].id);
  ASSERT_EQ(details.benchmarks.size(), 4u);
  EXPECT_EQ(details.benchmarks[0].kernel, "dense");
  EXPECT_EQ(details.benchmarks[0].shape, "tiny-llama step");
  EXPECT_EQ(details.benchmarks[2].kernel, "decode dense");
  EXPECT_EQ(details.benchmarks[2].shape, "tiny-llama (1 layers) context 8");
  EXPECT_EQ(details.benchmarks[2].batch, 1);
  EXPECT_NEAR(details.benchmarks[2].timeUs, strip->points()[2].msPerStep * 1e3, 1e-6);
  EXPECT_NEAR(details.benchmarks[2].gbps, strip->points()[2].gbPerSecond, 1e-9);
  EXPECT_EQ(details.benchmarks[3].kernel, "decode bitmask-2:4");
  EXPECT_EQ(details.recipe["benchmark"], "kernels+decode");
  EXPECT_EQ(details.recipe["synthetic"], "tiny-llama");
  EXPECT_EQ(details.recipe["decode"]["context"], 8);
  EXPECT_EQ(details.recipe["decode"]["new_tokens"], 4);
  EXPECT_EQ(details.recipe["decode"]["runs"], 1);
  EXPECT_EQ(details.recipe["decode"]["layers"], 1);
  EXPECT_EQ(details.recipe["decode"]["formats"], json::array({"dense", "bitmask-2:4"}));
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
  EXPECT_TRUE(t.window.benchmarkAction()->isEnabled());
}

// Cancel between decode results: pressed when the first decode point arrives, the second decode format never
// runs, the session ends as cancelled and the store gets nothing.
TEST_F(SyntheticModel, CancelDuringTheDecodeLoopRecordsNothing) {
  test::TestWindow t;
  waitForDevices(t);
  ASSERT_TRUE(t.window.openSyntheticModel("tiny-llama"));
  setRecipe(t.window, kTwoFour);
  QSignalSpy ended(&t.window, &MainWindow::benchmarkEnded);
  QMutex mutex;
  QStringList afterCancel;
  std::atomic<bool> cancelled{false};
  QObject::connect(t.window.benchmarkWorker(), &BenchmarkWorker::pointMeasured, t.window.benchmarkWorker(),
                   [&](const BenchmarkPoint& p) {
                     if (p.kind != BenchmarkPoint::Kind::Decode || cancelled.exchange(true)) return;
                     QMetaObject::invokeMethod(
                         &t.window,
                         [&t] { t.window.benchmarkStrip()->findChild<QPushButton*>("benchmarkCancel")->click(); },
                         Qt::BlockingQueuedConnection);
                   },
                   Qt::DirectConnection);
  QObject::connect(t.window.benchmarkWorker(), &BenchmarkWorker::progress, t.window.benchmarkWorker(),
                   [&](double, const QString& message) {
                     QMutexLocker lock(&mutex);
                     if (cancelled) afterCancel << message;
                   },
                   Qt::DirectConnection);
  ASSERT_TRUE(t.window.startBenchmark()) << str(t.errors.join("\n"));
  ASSERT_TRUE(test::waitForSignals(ended, 1, 120000));
  EXPECT_FALSE(ended.first().at(0).toBool()) << str(ended.first().at(1).toString());
  EXPECT_TRUE(ended.first().at(1).toString().contains("cancelled")) << str(ended.first().at(1).toString());
  EXPECT_TRUE(ended.first().at(1).toString().contains("nothing recorded")) << str(ended.first().at(1).toString());
  EXPECT_TRUE(cancelled.load());
  {
    QMutexLocker lock(&mutex);
    for (const QString& m : afterCancel) EXPECT_FALSE(m.contains("bitmask")) << str(afterCancel.join(" | "));
  }
  const BenchmarkStrip* strip = t.window.benchmarkStrip();
  ASSERT_EQ(strip->points().size(), 3);   // two kernels and the dense decode loop
  EXPECT_EQ(strip->points().back().kind, BenchmarkPoint::Kind::Decode);
  EXPECT_FALSE(strip->isRunning());
  EXPECT_TRUE(strip->status().contains("cancelled")) << str(strip->status());
  EXPECT_FALSE(t.window.isBenchmarking());
  EXPECT_TRUE(t.errors.isEmpty()) << str(t.errors.join("\n"));
  EXPECT_TRUE(benchRuns(dbPath()).empty());
}

// ---- the strip on its own ---------------------------------------------------------------------------------------

TEST(BenchmarkStripDecode, ShowsDecodePointsAsMeasuredTokensPerSecondAgainstTheCopyLine) {
  BenchmarkStrip strip;
  strip.resize(900, 500);
  BenchmarkSession session;
  session.device = "NVIDIA H200 (cuda:0)";
  session.shape = "llama-3.1-8b: 32 of 32 layers";
  session.copyGbPerSecond = 4000;
  session.formats = 2;
  session.decodeShape = "llama-3.1-8b · context 512 · 256 new tokens · 5 run(s) · CUDA graph";
  strip.start(session);
  EXPECT_TRUE(strip.status().contains("Decode loop: llama-3.1-8b")) << str(strip.status());
  BenchmarkPoint kernel;
  kernel.name = "dense";
  kernel.msPerStep = 5.0;
  kernel.gbPerSecond = 3000;
  kernel.tokensPerSecond = 200;
  strip.addPoint(kernel);
  BenchmarkPoint decode;
  decode.kind = BenchmarkPoint::Kind::Decode;
  decode.name = "dense";
  decode.msPerStep = 6.25;
  decode.tokensPerSecond = 160;
  decode.gbPerSecond = 2600;
  decode.fractionOfCopy = 0.65;
  decode.context = 512;
  decode.newTokens = 256;
  strip.addPoint(decode);
  auto* kernelBars = qobject_cast<QCPBars*>(strip.plot()->plottable(0));
  auto* decodeBars = qobject_cast<QCPBars*>(strip.plot()->plottable(1));
  ASSERT_TRUE(kernelBars && decodeBars);
  EXPECT_EQ(kernelBars->data()->size(), 1);
  ASSERT_EQ(decodeBars->data()->size(), 1);
  EXPECT_DOUBLE_EQ(decodeBars->data()->constBegin()->value, 2600);
  EXPECT_EQ(strip.plot()->graph(0)->data()->size(), 1);   // kernel: tokens/s of the linears
  ASSERT_EQ(strip.plot()->graph(1)->data()->size(), 1);   // decode: measured tokens/s
  EXPECT_DOUBLE_EQ(strip.plot()->graph(1)->data()->constBegin()->value, 160);
  EXPECT_GE(strip.plot()->yAxis->range().upper, 4000);   // the copy line is in view
  const QString summary = strip.findChild<QLabel*>("benchmarkSummary")->text();
  EXPECT_TRUE(summary.contains("decode dense: 160 tok/s measured · 6.250 ms/token (context 512, 256 new tokens) · "
                               "2,600 GB/s (65% of copy)"))
      << str(summary);
  for (const QLabel* label : strip.findChildren<QLabel*>())
    EXPECT_FALSE(label->toolTip().isEmpty()) << str(label->objectName());
}

}  // namespace
}  // namespace pareto
