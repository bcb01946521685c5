// Compress, then evaluate what was written: `pareto-cli compress` (no evaluation) and the workbench's Run
// (perplexity, decode fidelity, activation drift and the Hessian-discrepancy study, as chosen). One run of kind
// "compress" in the store, whose metrics are the keys of result() (store/MetricNames.h).
//
// The output folder is written under a temporary name and renamed at the end (compress/CompressJob.h); a cancel
// or a failure during the evaluation removes it again, so a run that did not finish leaves no folder that would
// look like a complete one.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "analysis/ActivationDrift.h"
#include "analysis/HessianStudy.h"
#include "compress/CompressJob.h"
#include "compress/RecipeEstimate.h"
#include "eval/DecodeFidelity.h"
#include "eval/Perplexity.h"
#include "jobs/Job.h"
#include "jobs/ModelCache.h"

namespace pareto {

struct EvaluationOptions {
  std::string heldOutText;            // perplexity text ("": no perplexity)
  int64_t perplexityWindow = 128;
  int64_t perplexityMaxWindows = 8;   // 0: every full window
  std::string prompts;                // held-out prompts ("": no fidelity, drift or study)
  int64_t maxPrompts = 8;             // the first N prompts (0: all)
  int64_t maxNewTokens = 32;          // dense continuation length of decode fidelity
  int64_t driftSteps = 32;            // 0: no activation drift
  bool hessianStudy = false;          // needs the text and the prompts
  int64_t studyTokens = 1024;         // calibration tokens of each Hessian of the study
};

struct CompressEvaluateOptions {
  // compress.recipePath is read unless recipeDocument is given; compress.runtime is made from device and dtype
  // when the job runs (so that a device the machine lacks fails a recorded run).
  CompressOptions compress;
  std::string device = "cpu";                   // "cpu", "cuda", "cuda:N"
  std::string dtype = kDefaultComputeDtype;     // the compute dtype, the same default in both front ends
  // The recipe as JSON (the workbench's dock; calibration paths absolute, so no folder resolves them), and what
  // its errors call it.
  std::optional<nlohmann::json> recipeDocument;
  std::string recipeSource = "the recipe";
  EvaluationOptions evaluation;
  // Predicted decode tokens/s of the result and of the dense model from this bandwidth (the estimate the
  // Recipe dock shows, compress/RecipeEstimate.h); none predicted when not given.
  std::optional<DecodeBandwidth> bandwidth;
};

// What stays valid between runs on one model, device and data: the loaded models and the Hessian study. (The
// dense perplexity is not kept: every run computes the dense model's logits on the perplexity windows anyway, for
// the KL divergence to it, and its perplexity comes with them.) A front end that runs several jobs keeps one; nullptr in the job: nothing is kept.
struct EvaluationCache {
  ModelCache models;
  std::map<std::string, std::shared_ptr<const HessianStudyResult>> studies;        // by model, files, tokens
};

struct CompressEvaluateReport {
  CompressReport compress;
  std::optional<double> perplexity, densePerplexity;
  std::optional<KlDivergenceSummary> klToDense;         // over the perplexity windows
  std::optional<FidelityResult> fidelity;
  std::shared_ptr<const ActivationDriftResult> drift;   // null when not measured
  std::shared_ptr<const HessianStudyResult> study;      // null when not measured
  std::optional<RecipeEstimate> estimate;               // with CompressEvaluateOptions::bandwidth
  double seconds = 0;                                   // the whole job: compression and evaluation
};

class CompressEvaluateJob : public RecordedJob {
 public:
  explicit CompressEvaluateJob(CompressEvaluateOptions options, EvaluationCache* cache = nullptr);
  ~CompressEvaluateJob() override;

  RunStart runStart() const override;
  void run(const ProgressCallback& progress, const CancelToken& cancel) override;
  // `pareto-cli compress --json`'s object (out, modules, linear_bits_per_weight, model_bits_per_weight, bytes,
  // calibration_tokens, timings with total_s the whole job's seconds) and the metrics of each evaluation run.
  nlohmann::json result() const override;
  const CompressEvaluateReport& report() const { return report_; }

 private:
  void evaluate(const ProgressCallback& progress, const CancelToken& cancel);

  CompressEvaluateOptions options_;
  EvaluationCache* cache_;
  std::unique_ptr<EvaluationCache> own_;
  CompressEvaluateReport report_;
};

// A recipe file as re-runnable JSON, as compress runs record it: its document with calibration paths made
// absolute (they resolve against the recipe's folder, which a recipe printed by `runs show --recipe` no longer
// lives in). Never throws: an unreadable recipe is {"recipe_file": PATH} and compress itself reports the problem.
nlohmann::json rerunnableRecipe(const std::string& recipePath);

}  // namespace pareto
