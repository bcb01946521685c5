// The analyses of `pareto-cli analyze`, as jobs: the Hessian-discrepancy study of a dense model (run kind
// "hessian") and the activation drift of a compressed model against its dense reference (run kind "drift").
// Their result() is the command's --json object, and their run records the settings the command records.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/ActivationDrift.h"
#include "analysis/HessianStudy.h"
#include "jobs/Job.h"
#include "model/LoadedModel.h"
#include "model/MemoryBudget.h"

namespace pareto {

// Two models compared on prompts (decode fidelity, activation drift), loaded on one runtime.
struct Comparison {
  LoadedModel dense, compressed;
  std::vector<std::vector<TokenId>> promptIds;   // BOS + prompt, the same ids for both tokenizers
};
// What a comparison generates, for checking it against a memory budget before any weight is read: both models
// generate whole (model/MemoryBudget.h requireGenerationFits), `batch` prompts at a time (0: 64 on CUDA, 8 on the
// CPU) for up to `maxNewTokens` each. The dense size is counted for both models (an upper bound for the
// compressed one).
struct GenerationLimits {
  MemoryBudget budget;
  int64_t batch = 0;
  int64_t maxNewTokens = 0;
  std::string what;   // "decode fidelity", "activation drift"
};

// Reads the prompts (the first maxPrompts; 0: all) and loads both models; InputError naming the file or folder
// (comparablePromptIds: models that cannot be compared, tokenizers that read a prompt differently). With `limits`
// under a budget, the folders are opened headers-only first and a budget generation cannot keep is refused.
Comparison loadComparison(const std::string& denseDir, const std::string& compressedDir, const std::string& prompts,
                          int64_t maxPrompts, const std::string& device, const std::string& dtype,
                          const GenerationLimits& limits = {}, const ProgressCallback& progress = {},
                          const CancelToken* cancel = nullptr);

struct AnalyzeOptions {
  enum class Analysis { Hessian, Drift };
  Analysis analysis = Analysis::Hessian;
  std::string modelDir;          // hessian: the dense model; drift: the compressed one
  std::string device = "cpu";
  std::string dtype = kDefaultComputeDtype;
  HessianStudyOptions hessian;   // Hessian
  std::string denseDir;          // drift: the dense reference
  std::string prompts;           // drift: prompts file
  int64_t maxPrompts = 32;       // drift: the first N prompts (0: all)
  ActivationDriftOptions drift;  // drift (eosTokenIds: the dense model's)
  // Generation cannot stream the model: a budget below what it needs is refused before the weights are read, and
  // on CUDA the GPU budget caps the caching allocator for the run.
  MemoryBudget budget;

  static AnalyzeOptions hessianStudy(std::string modelDir, std::string device, std::string dtype,
                                     HessianStudyOptions study);
  static AnalyzeOptions activationDrift(std::string denseDir, std::string compressedDir, std::string prompts,
                                        int64_t maxPrompts, std::string device, std::string dtype,
                                        ActivationDriftOptions drift);
};

struct AnalyzeReport {
  std::optional<HessianStudyResult> hessian;
  std::optional<ActivationDriftResult> drift;
  int64_t numLayers = 0;
  std::string modelDir;          // as loaded
  std::string device, dtype;     // their descriptions ("cpu", "float32")
};

class AnalyzeJob : public RecordedJob {
 public:
  explicit AnalyzeJob(AnalyzeOptions options);
  RunStart runStart() const override;
  void run(const ProgressCallback& progress, const CancelToken& cancel) override;
  nlohmann::json result() const override;
  const AnalyzeReport& report() const { return report_; }

 private:
  AnalyzeOptions options_;
  AnalyzeReport report_;
};

}  // namespace pareto
