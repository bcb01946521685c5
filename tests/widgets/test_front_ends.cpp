// One recipe through both front ends gives the same metrics: pareto-cli (compress, then perplexity and fidelity
// on what it wrote) and the workbench's EngineWorker (one run: compress, then its evaluation, with decode
// fidelity and activation drift sharing their continuations). Both are thin adapters over core's jobs in the
// same default dtype, so the numbers agree to the last bit or nearly.
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

// Equal, or within `relative` of each other.
void expectClose(const char* name, double cli, double gui, double relative) {
  EXPECT_TRUE(std::isfinite(cli) && std::isfinite(gui)) << name;
  EXPECT_LE(std::abs(cli - gui), relative * std::abs(cli)) << name << ": CLI " << cli << ", workbench " << gui;
}

TEST(FrontEnds, OneRecipeGivesTheSameMetricsFromTheCliAndTheWorkbench) {
  PARETO_REQUIRE_SHARED();
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString model = QString::fromStdString(test::sharedPath("models/ref-tiny"));
  const QString recipe = QStringLiteral(PARETO_SOURCE_DIR "/resources/recipes/sparsegpt-2of4-int4.json");
  const QString text = QString::fromStdString(test::sharedPath("data/heldout-prose.txt"));
  const QString prompts = QString::fromStdString(test::sharedPath("data/prompts-prose.txt"));
  EvaluationSettings evaluation;   // the workbench's defaults, and the CLI asked for the same
  evaluation.heldOutText = text;
  evaluation.prompts = prompts;

  // The CLI: compress, then perplexity and fidelity of the folder it wrote.
  const QString cliOut = dir.filePath("cli");
  const nlohmann::json compressed =
      cliJson({"compress", "--model", model, "--recipe", recipe, "--out", cliOut, "--device", "cpu"});
  const nlohmann::json ppl = cliJson({"perplexity", "--model", cliOut, "--text", text, "--window",
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

  // Written bytes and bits per weight to the bit; evaluations to float rounding of the same computation.
  EXPECT_EQ(record.metric(metric::kBytes), compressed[metric::kBytes].get<double>());
  EXPECT_EQ(record.metric(metric::kLinearBitsPerWeight), compressed[metric::kLinearBitsPerWeight].get<double>());
  EXPECT_EQ(record.metric(metric::kModelBitsPerWeight), compressed[metric::kModelBitsPerWeight].get<double>());
  expectClose("ppl", ppl[metric::kPerplexity].get<double>(), record.metric(metric::kPerplexity), 1e-6);
  expectClose("decode_nll", fidelity[metric::kDecodeNll].get<double>(), record.metric(metric::kDecodeNll), 1e-6);
  expectClose("dense_nll", fidelity[metric::kDenseDecodeNll].get<double>(), record.metric(metric::kDenseDecodeNll),
              1e-6);
  expectClose("top1_agreement", fidelity[metric::kTop1Agreement].get<double>(),
              record.metric(metric::kTop1Agreement), 1e-6);
  expectClose("shared_prefix", fidelity[metric::kSharedPrefix].get<double>(), record.metric(metric::kSharedPrefix),
              1e-6);
}

}  // namespace
}  // namespace pareto
