// One recipe through both front ends gives the same metrics: pareto-cli (compress, then perplexity and fidelity
// on what it wrote) and the workbench's EngineWorker (one run: compress, then its evaluation, with decode
// fidelity and activation drift sharing their continuations). Both are thin adapters over core's jobs in the
// same default dtype, so the numbers agree to the last bit. The same holds for exports: the workbench's Export
// menu and `pareto-cli export` run one job and write the same bytes.
// LibTorch first: its headers use `slots` as an identifier, which Qt's headers define as a macro.
#include "jobs/CompressEvaluateJob.h"

#include <gtest/gtest.h>

#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <cmath>
#include <nlohmann/json.hpp>

#include "FolderContents.h"
#include "SharedData.h"
#include "WidgetTestSupport.h"
#include "app/gui/EngineWorker.h"
#include "store/MetricNames.h"

namespace pareto {
namespace {

using test::str;

// pareto-cli's JSON result for these arguments (unrecorded); fails the test on a non-zero exit.
nlohmann::json cliJson(const QStringList& args) {
  QProcess p;
  p.start(QStringLiteral(PARETO_CLI_PATH), QStringList(args) << "--json" << "--no-record");
  EXPECT_TRUE(p.waitForFinished(600000));
  EXPECT_EQ(p.exitCode(), 0) << str(QString::fromUtf8(p.readAllStandardError()));
  return nlohmann::json::parse(p.readAllStandardOutput().toStdString(), nullptr, /*allow_exceptions=*/false);
}

TEST(FrontEnds, OneRecipeGivesTheSameMetricsFromTheCliAndTheWorkbench) {
  PARETO_REQUIRE_SHARED();
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString model = QString::fromStdString(test::sharedPath("models/ref-tiny"));
  const QString recipe = QStringLiteral(PARETO_SOURCE_DIR "/resources/recipes/sparsegpt-2of4-text.json");
  const QString text = QString::fromStdString(test::sharedPath("data/heldout-prose.txt"));
  const QString prompts = QString::fromStdString(test::sharedPath("data/prompts-prose.txt"));
  EvaluationSettings evaluation;   // the workbench's defaults, and the CLI asked for the same
  evaluation.heldOutText = text;
  evaluation.prompts = prompts;

  // The CLI: compress, then perplexity and fidelity of the folder it wrote.
  const QString cliOut = dir.filePath("cli");
  const nlohmann::json compressed =
      cliJson({"compress", "--model", model, "--recipe", recipe, "--out", cliOut, "--device", "cpu"});
  const nlohmann::json ppl = cliJson({"perplexity", "--model", cliOut, "--dense", model, "--text", text, "--window",
                                      QString::number(evaluation.perplexityWindow), "--max-windows",
                                      QString::number(evaluation.perplexityMaxWindows)});
  const nlohmann::json fidelity =
      cliJson({"fidelity", "--dense", model, "--model", cliOut, "--prompts", prompts, "--max-prompts",
               QString::number(evaluation.maxPrompts), "--max-new-tokens", QString::number(evaluation.maxNewTokens)});
  ASSERT_TRUE(compressed.is_object() && ppl.is_object() && fidelity.is_object());

  // The workbench: one run of the EngineWorker (on this thread: its signals arrive directly), with the recipe
  // as the Recipe dock hands it over (calibration paths absolute).
  EngineWorker worker;
  QSignalSpy finished(&worker, &EngineWorker::runFinished);
  QSignalSpy failed(&worker, &EngineWorker::runFailed);
  RunRequest request;
  request.modelDir = model;
  request.recipeJson = rerunnableRecipe(str(recipe)).dump();
  request.outDir = dir.filePath("gui");
  request.device = "cpu";
  request.evaluation = evaluation;
  worker.run(request);
  ASSERT_EQ(failed.count(), 0) << str(failed.first().at(0).toString());
  ASSERT_EQ(finished.count(), 1);
  const RunRecord record = finished.first().at(0).value<RunRecord>();
  EXPECT_GT(record.metric(metric::kDriftPlateauMax), 0.0);   // drift ran too, on the shared continuations

  // The same computation in the same dtype on the same device: the same numbers to the last bit.
  auto same = [&](const char* key, const nlohmann::json& cli) {
    ASSERT_TRUE(cli.contains(key)) << key;
    EXPECT_TRUE(std::isfinite(record.metric(key))) << key;
    EXPECT_EQ(record.metric(key), cli[key].get<double>()) << key;
  };
  same(metric::kBytes, compressed);
  same(metric::kLinearBitsPerWeight, compressed);
  same(metric::kModelBitsPerWeight, compressed);
  same(metric::kPerplexity, ppl);
  same(metric::kDensePerplexity, ppl);
  same(metric::kKlMean, ppl);
  same(metric::kKlP99, ppl);
  same(metric::kDecodeKlMean, fidelity);
  same(metric::kDecodeKlP99, fidelity);
  same(metric::kDecodeNll, fidelity);
  same(metric::kDenseDecodeNll, fidelity);
  same(metric::kTop1Agreement, fidelity);
  same(metric::kSharedPrefix, fidelity);
}

// ref-tiny pruned 2:4 by magnitude (no calibration: quick), written by pareto-cli into `dir`/model.
QString compressedTiny(const QTemporaryDir& dir) {
  const QString recipe = dir.filePath("magnitude.json");
  QFile f(recipe);
  EXPECT_TRUE(f.open(QIODevice::WriteOnly));
  f.write(R"({"prune": {"method": "magnitude", "pattern": "2:4"}})");
  f.close();
  const QString out = dir.filePath("model");
  cliJson({"compress", "--model", QString::fromStdString(test::sharedPath("models/ref-tiny")), "--recipe", recipe,
           "--out", out, "--device", "cpu"});
  return out;
}

// Files of an exported folder; pareto-export.json without the id of the run that wrote it (unique per run).
std::map<std::string, std::string> exportedFiles(const QString& dir) {
  std::map<std::string, std::string> files = test::snapshot(str(dir));
  auto record = files.find("pareto-export.json");
  if (record != files.end()) {
    nlohmann::json j = nlohmann::json::parse(record->second);
    EXPECT_TRUE(j.contains("pareto_run")) << record->second;
    j.erase("pareto_run");
    record->second = j.dump();
  }
  return files;
}

struct WorkbenchExport {
  int finished = 0, cancelled = 0, failed = 0;
  QString message;
};

// One export through the workbench's worker (on this thread: its signals arrive directly). `onProgress` runs at
// each progress update.
WorkbenchExport exportFromWorkbench(const ExportRequest& request, const std::function<void()>& onProgress = {}) {
  EngineWorker worker;
  WorkbenchExport r;
  QObject::connect(&worker, &EngineWorker::exportProgress, [&](double, const QString&) {
    if (onProgress) onProgress();
  });
  QObject::connect(&worker, &EngineWorker::exportFinished, [&](const QString& m) {
    ++r.finished;
    r.message = m;
  });
  QObject::connect(&worker, &EngineWorker::exportCancelled, [&](const QString& m) {
    ++r.cancelled;
    r.message = m;
  });
  QObject::connect(&worker, &EngineWorker::exportFailed, [&](const QString& m) {
    ++r.failed;
    r.message = m;
  });
  worker.exportModel(request);
  return r;
}

TEST(FrontEnds, TheWorkbenchExportsTheBytesTheCliWrites) {
  PARETO_REQUIRE_SHARED();
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString folder = compressedTiny(dir);
  struct Case {
    QString kind, type;
    QStringList cliOptions;
    bool file;
  };
  for (const Case& c : {Case{"gguf", "q8_0", {"--type", "q8_0"}, true}, Case{"compressed-tensors", "", {}, false},
                        Case{"hf", "", {}, false}}) {
    SCOPED_TRACE(str(c.kind));
    const QString cliOut = dir.filePath("cli-" + c.kind + (c.file ? ".gguf" : ""));
    const QString guiOut = dir.filePath("gui-" + c.kind + (c.file ? ".gguf" : ""));
    const nlohmann::json cli = cliJson(QStringList{"export", c.kind, "--model", folder, "--out", cliOut} + c.cliOptions);
    ExportRequest request;
    request.kind = c.kind;
    request.modelDir = folder;
    request.out = guiOut;
    request.type = c.type;
    const WorkbenchExport gui = exportFromWorkbench(request);
    ASSERT_EQ(gui.finished, 1) << str(gui.message);
    // The report the workbench shows is the text pareto-cli prints, for its own output path.
    EXPECT_TRUE(gui.message.startsWith("wrote " + guiOut)) << str(gui.message);
    ASSERT_TRUE(cli.is_object());
    if (c.file) {
      EXPECT_EQ(test::fileText(str(guiOut)), test::fileText(str(cliOut)));
      EXPECT_GT(test::fileText(str(guiOut)).size(), 100000u);
    } else {
      const auto cliFiles = exportedFiles(cliOut), guiFiles = exportedFiles(guiOut);
      EXPECT_GE(cliFiles.size(), 3u);
      EXPECT_TRUE(cliFiles == guiFiles);
    }
  }

  // A 2:4 (bitmask) folder has no GGUF type as stored: both front ends refuse it with one message, naming the
  // module and the --type that would convert it.
  QProcess p;
  p.start(QStringLiteral(PARETO_CLI_PATH),
          {"export", "gguf", "--model", folder, "--out", dir.filePath("auto.gguf"), "--no-record"});
  ASSERT_TRUE(p.waitForFinished(600000));
  EXPECT_EQ(p.exitCode(), 2);
  // Its last line on stderr (the lines before are progress).
  const QString cliError = QString::fromUtf8(p.readAllStandardError()).trimmed().split('\n').last();
  ExportRequest request;
  request.kind = "gguf";
  request.modelDir = folder;
  request.out = dir.filePath("auto.gguf");
  const WorkbenchExport refused = exportFromWorkbench(request);
  EXPECT_EQ(refused.failed, 1);
  EXPECT_TRUE(refused.message.contains("--type")) << str(refused.message);
  EXPECT_EQ(str(cliError), str("pareto-cli: error: " + refused.message));
  EXPECT_FALSE(QFileInfo::exists(dir.filePath("auto.gguf")));
}

TEST(FrontEnds, ACancelledExportLeavesTheDestinationAsItWas) {
  PARETO_REQUIRE_SHARED();
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString folder = compressedTiny(dir);
  const std::vector<std::string> before = test::entries(str(dir.path()));
  for (const QString& kind : {QString("gguf"), QString("compressed-tensors"), QString("hf")}) {
    SCOPED_TRACE(str(kind));
    ExportRequest request;
    request.kind = kind;
    request.modelDir = folder;
    request.out = dir.filePath("out-" + kind);
    request.type = kind == "gguf" ? "q8_0" : "";
    request.cancel = std::make_shared<CancelToken>();
    int updates = 0;
    const WorkbenchExport cancelled = exportFromWorkbench(request, [&] {
      if (++updates == 3) request.cancel->cancel();   // a few tensors in
    });
    EXPECT_EQ(cancelled.cancelled, 1) << str(cancelled.message);
    EXPECT_GE(updates, 3);
    // Nothing under the destination's name, and no staging file or lock beside it.
    EXPECT_EQ(test::entries(str(dir.path())), before);
  }

  // Over an earlier export (--overwrite): a cancel keeps the earlier one, byte for byte.
  ExportRequest first;
  first.kind = "hf";
  first.modelDir = folder;
  first.out = dir.filePath("earlier");
  ASSERT_EQ(exportFromWorkbench(first).finished, 1);
  const auto earlier = test::snapshot(str(first.out));
  ExportRequest again = first;
  again.overwrite = true;
  again.type = "float32";
  again.cancel = std::make_shared<CancelToken>();
  int updates = 0;
  EXPECT_EQ(exportFromWorkbench(again, [&] { if (++updates == 3) again.cancel->cancel(); }).cancelled, 1);
  EXPECT_TRUE(test::snapshot(str(first.out)) == earlier);
}

}  // namespace
}  // namespace pareto
