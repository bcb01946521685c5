// One recipe through both front ends gives the same metrics: pareto-cli (compress, then perplexity and fidelity
// on what it wrote) and the workbench's EngineWorker (one run: compress, then its evaluation, with decode
// fidelity and activation drift sharing their continuations). Both are thin adapters over core's jobs in the
// same default dtype, so the numbers agree to the last bit.
// LibTorch first: its headers use `slots` as an identifier, which Qt's headers define as a macro.
#include "jobs/CompressEvaluateJob.h"

#include <gtest/gtest.h>

#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <cmath>
#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace pareto
