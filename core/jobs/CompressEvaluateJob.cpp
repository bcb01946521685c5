#include "jobs/CompressEvaluateJob.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "calib/CalibrationSet.h"
#include "eval/Continuations.h"
#include "jobs/RunRecords.h"
#include "jobs/StoredAnalyses.h"
#include "model/ModelSummary.h"
#include "store/MetricNames.h"
#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/Json.h"

namespace pareto {
namespace {

using clock = std::chrono::steady_clock;

double secondsSince(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

std::vector<std::string> firstPrompts(const std::string& file, int64_t count) {
  std::vector<std::string> prompts = readPrompts(file);
  if (count > 0 && int64_t(prompts.size()) > count) prompts.resize(size_t(count));
  return prompts;
}

}  // namespace

nlohmann::json rerunnableRecipe(const std::string& recipePath) {
  try {
    Recipe recipe = Recipe::fromFile(recipePath);
    nlohmann::json doc = recipe.document;
    if (recipe.calibration && doc.contains("calibration") && doc["calibration"].is_object()) {
      const char* key = recipe.calibration->source == "text" ? "text" : "prompts";
      if (doc["calibration"].contains(key)) doc["calibration"][key] = absolutePath(recipe.calibration->file);
    }
    return doc;
  } catch (const std::exception&) {
    return {{"recipe_file", absolutePath(recipePath)}};
  }
}

CompressEvaluateJob::CompressEvaluateJob(CompressEvaluateOptions options, EvaluationCache* cache)
    : options_(std::move(options)), cache_(cache) {
  if (cache_ == nullptr) {
    own_ = std::make_unique<EvaluationCache>();
    cache_ = own_.get();
  }
}

CompressEvaluateJob::~CompressEvaluateJob() = default;

RunStart CompressEvaluateJob::runStart() const {
  const CompressOptions& c = options_.compress;
  return makeRunStart("compress", c.modelDir, options_.device,
                      options_.recipeDocument ? *options_.recipeDocument : rerunnableRecipe(c.recipePath), c.outDir);
}

void CompressEvaluateJob::run(const ProgressCallback& progress, const CancelToken& cancel) {
  report_ = {};
  options_.compress.runtime = makeRuntimeOptions(options_.device, options_.dtype);
  const CompressOptions& c = options_.compress;
  const Recipe recipe = options_.recipeDocument ? Recipe::fromJson(*options_.recipeDocument, "", options_.recipeSource)
                                                : Recipe::fromFile(c.recipePath);
  report_.compress = runCompress(recipe, c, progress, &cancel);
  const auto evaluationStart = clock::now();
  const bool afterwards = options_.bandwidth || !options_.evaluation.heldOutText.empty() ||
                          !options_.evaluation.prompts.empty();
  try {
    if (options_.bandwidth)   // the same estimate the Recipe dock showed (its bytes are the bytes written)
      report_.estimate = estimateRecipe(recipe, summarizeModel(c.modelDir), *options_.bandwidth);
    evaluate(progress, cancel);
  } catch (...) {
    // The folder alone, without its evaluation, would look like a complete run.
    cache_->models.dropCompressed();
    try {
      removeTree(report_.compress.outDir.empty() ? c.outDir : report_.compress.outDir);
    } catch (const std::exception&) {
      // the failure being reported matters more
    }
    throw;
  }
  cache_->models.dropCompressed();   // the evaluation's copy; the folder is the result
  report_.seconds = report_.compress.totalSeconds + (afterwards ? secondsSince(evaluationStart) : 0.0);
}

void CompressEvaluateJob::evaluate(const ProgressCallback& progress, const CancelToken& cancel) {
  const EvaluationOptions& eval = options_.evaluation;
  const bool text = !eval.heldOutText.empty(), prompts = !eval.prompts.empty();
  if (!text && !prompts) return;
  const RuntimeOptions& runtime = options_.compress.runtime;
  if (progress) progress({"load", 0, "dense and compressed models"});
  LoadedModel& dense =
      cache_->models.dense(options_.compress.modelDir, runtime, partOfStage(progress, 0, 0.5), &cancel);
  const std::string modelKey = cache_->models.denseKey();
  LoadedModel& compressed =
      cache_->models.compressed(options_.compress.outDir, runtime, partOfStage(progress, 0.5, 1), &cancel);

  if (text) {
    const std::vector<TokenId> ids = dense.tokenizer->encode(readTextFile(eval.heldOutText), false);
    PerplexityOptions o;
    o.window = eval.perplexityWindow;
    o.maxWindows = eval.perplexityMaxWindows;
    // The dense model is loaded already (the run compressed it): its logits on the same windows give the KL
    // divergence, and its perplexity with them.
    o.dense = dense.model.get();
    const PerplexityResult r = computePerplexity(*compressed.model, ids, o, progress, &cancel);
    report_.perplexity = r.ppl;
    report_.klToDense = r.klToDense;
    report_.densePerplexity = r.densePpl;
  }
  if (!prompts) return;
  const std::vector<std::vector<TokenId>> ids =
      comparablePromptIds(dense, compressed, firstPrompts(eval.prompts, eval.maxPrompts));
  DecodeFidelityOptions f;
  f.maxNewTokens = eval.maxNewTokens;
  f.eosTokenIds = dense.eosTokenIds;
  ActivationDriftOptions d;
  d.steps = eval.driftSteps;
  d.eosTokenIds = dense.eosTokenIds;
  // Fidelity and drift start from the same greedy continuations when they run as many steps: generated once.
  std::optional<Continuations> shared;
  if (eval.driftSteps > 0 && eval.driftSteps == eval.maxNewTokens) {
    const size_t batch = checkComparisonInputs("decode fidelity", *dense.model, *compressed.model, ids,
                                               f.maxNewTokens, "max new tokens", f.batch);
    shared = generateContinuations(*dense.model, *compressed.model, ids, f.maxNewTokens, f.eosTokenIds, batch,
                                   progress, &cancel);
    f.continuations = d.continuations = &*shared;
  }
  report_.fidelity = decodeFidelity(*dense.model, *compressed.model, ids, f, progress, &cancel);
  if (eval.driftSteps > 0)
    report_.drift = std::make_shared<const ActivationDriftResult>(
        activationDrift(*dense.model, *compressed.model, ids, d, progress, &cancel));
  if (eval.hessianStudy && text) {
    const std::string key = modelKey + "|" + absolutePath(eval.heldOutText) + "|" + absolutePath(eval.prompts) + "|" +
                            std::to_string(eval.studyTokens) + "|" + std::to_string(eval.perplexityWindow) + "|" +
                            std::to_string(eval.maxNewTokens);
    auto cached = cache_->studies.find(key);
    if (cached == cache_->studies.end()) {
      HessianStudyOptions h{eval.heldOutText, eval.prompts, eval.studyTokens};
      h.window = eval.perplexityWindow;
      h.maxNewTokens = eval.maxNewTokens;
      auto study = std::make_shared<const HessianStudyResult>(runHessianStudy(dense, h, progress, &cancel));
      cached = cache_->studies.emplace(key, std::move(study)).first;
    }
    report_.study = cached->second;
  }
}

nlohmann::json CompressEvaluateJob::result() const {
  const CompressReport& c = report_.compress;
  nlohmann::json modules = nlohmann::json::array();
  for (const auto& m : c.modules)
    modules.push_back({{"name", m.name}, {"method", m.method}, {"pattern", m.pattern}, {"format", m.format},
                       {"sparsity", m.sparsity}, {"bits_per_weight", m.bitsPerWeight}, {"seconds", m.seconds}});
  nlohmann::json r = {{"out", c.outDir},
                      {"modules", modules},
                      {metric::kLinearBitsPerWeight, c.linearBitsPerWeight},
                      {metric::kModelBitsPerWeight, c.modelBitsPerWeight},
                      {metric::kBytes, c.bytes},
                      {"lm_head_bytes", c.headBytes},
                      {"calibration_tokens", c.calibrationTokens},
                      {"timings",
                       {{"calibration_s", c.calibrationSeconds},
                        {"pass_s", c.passSeconds},
                        {"pass_stages_s", c.passStageSeconds},
                        {"write_s", c.writeSeconds},
                        {"total_s", report_.seconds}}},
                      {"memory",
                       {{"peak_host_bytes", c.peakHostBytes},
                        {"host_base_bytes", c.hostBaseBytes},
                        {"peak_gpu_bytes", c.peakGpuBytes},
                        {"activations", c.activations},
                        {"plan", c.memoryPlan}}}};
  if (report_.estimate) {
    r[metric::kDenseLinearBitsPerWeight] = report_.estimate->denseLinearBitsPerWeight;
    if (report_.estimate->tokensPerSecond > 0) {
      r[metric::kPredictedTokensPerSecond] = report_.estimate->tokensPerSecond;
      r[metric::kDensePredictedTokensPerSecond] = report_.estimate->denseTokensPerSecond;
    }
  }
  if (report_.perplexity) r[metric::kPerplexity] = *report_.perplexity;
  if (report_.densePerplexity) r[metric::kDensePerplexity] = *report_.densePerplexity;
  if (const auto& kl = report_.klToDense) {
    r[metric::kKlMean] = kl->mean;
    r[metric::kKlP99] = kl->p99;
  }
  if (const auto& f = report_.fidelity) {
    r[metric::kDecodeNll] = f->decodeNll;
    r[metric::kDenseDecodeNll] = f->denseNll;
    r[metric::kTop1Agreement] = f->top1Agreement;
    r[metric::kDecodeKlMean] = f->klMean;
    r[metric::kDecodeKlP99] = f->klP99;
    r[metric::kSharedPrefix] = f->sharedPrefixMean;
  }
  if (report_.drift) {
    double plateau = 0;
    int64_t settling = -1;
    for (const DriftCurveSummary& s : report_.drift->free.summary) {
      if (!std::isnan(s.plateau)) plateau = std::max(plateau, s.plateau);
      settling = std::max(settling, s.stepsTo90);
    }
    r[metric::kDriftPlateauMax] = plateau;
    if (settling >= 0) r[metric::kDriftStepsTo90Max] = double(settling);
    r["drift"] = storedDriftJson(*report_.drift);
  }
  if (report_.study) {
    r[metric::kDiscrepancyFraction] = report_.study->summary.fractionDecodeSmaller;
    r[metric::kDiscrepancyMedianRatio] = report_.study->summary.medianRatio;
    r["discrepancy"] = storedDiscrepancyJson(*report_.study);
  }
  return r;
}

}  // namespace pareto
