// Decode fidelity (DESIGN.md "Definitions"): how closely a compressed model follows its dense reference while
// decoding. The dense model continues held-out prompts greedily; the compressed model is scored teacher-forced
// on those tokens (mean NLL, top-1 agreement, KL divergence to the dense model's distribution) and also continues
// the prompts itself (shared prefix).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/LlamaModel.h"
#include "tokenizer/Tokenizer.h"
#include "util/Progress.h"

namespace pareto {

struct LoadedModel;
struct Continuations;

struct DecodeFidelityOptions {
  int64_t maxNewTokens = 128;          // T: tokens the dense model generates per prompt (fewer if it emits EOS)
  int64_t batch = 0;                   // prompts per generation / scoring batch; 0 picks one for the device
  std::vector<TokenId> eosTokenIds;    // generation stops after one of these; the EOS itself is scored
  // Continuations already generated with these settings (eval/Continuations.h), shared with activation drift;
  // null: generated here.
  const Continuations* continuations = nullptr;
};

struct PromptFidelity {
  int64_t promptTokens = 0;
  int64_t denseTokens = 0;        // the dense continuation, as generated (a final EOS included)
  int64_t compressedTokens = 0;   // the compressed model's own continuation
  double nllSum = 0;              // compressed model on the dense continuation, teacher-forced
  double denseNllSum = 0;         // dense model on its own continuation
  double klSum = 0;               // KL(P_dense ‖ P_compressed) summed over the continuation's positions
  int64_t agreements = 0;         // positions where the compressed model's argmax is the dense token
  int64_t sharedPrefix = 0;       // leading tokens of its own continuation equal to the dense one's
};

struct FidelityResult {
  double decodeNll = 0;           // compressed: mean NLL over every dense continuation token of every prompt
  double denseNll = 0;            // the same for the dense model (its floor on its own tokens)
  double top1Agreement = 0;       // fraction of those positions where the argmaxes agree
  // KL(P_dense ‖ P_compressed) over the full vocabulary at those positions (eval/KlDivergence.h): the mean and
  // the 99th percentile.
  double klMean = 0, klP99 = 0;
  double sharedPrefixMean = 0;    // over prompts
  double sharedPrefixMedian = 0;
  int64_t sharedPrefixMin = 0, sharedPrefixMax = 0;
  double fullMatchFraction = 0;   // prompts whose whole dense continuation the compressed model reproduced
  int64_t prompts = 0;
  int64_t continuationTokens = 0;  // dense continuation tokens scored (sum of denseTokens)
  std::vector<PromptFidelity> perPrompt;   // in prompt order
  double seconds = 0;
};

// Throws InputError unless the two models can be compared position by position and layer by layer (same
// vocabulary, hidden size and depth).
void requireComparable(const LlamaModel& dense, const LlamaModel& compressed);

// The checks every dense-vs-compressed comparison makes before it runs (requireComparable, at least one prompt,
// none empty, `steps` ≥ 1, named `stepsName` in the message; `what` names the analysis), and the prompts a batch
// it should use: `requestedBatch` when positive, else 64 on CUDA and 8 on the CPU.
size_t checkComparisonInputs(const std::string& what, const LlamaModel& dense, const LlamaModel& compressed,
                             const std::vector<std::vector<TokenId>>& prompts, int64_t steps,
                             const std::string& stepsName, int64_t requestedBatch);

// The prompts as token ids (BOS first, LoadedModel::promptIds) for comparing two models. Throws InputError naming
// the compressed model's folder unless the models are comparable (requireComparable) and both tokenizers give
// the same ids (else the models would not be reading the same text).
std::vector<std::vector<TokenId>> comparablePromptIds(const LoadedModel& dense, const LoadedModel& compressed,
                                                      const std::vector<std::string>& prompts);

// prompts: token ids with BOS already included (LoadedModel::promptIds), each non-empty. Deterministic:
// generation is greedy, and the result does not depend on the device's batch choice beyond float rounding.
FidelityResult decodeFidelity(const LlamaModel& dense, const LlamaModel& compressed,
                              const std::vector<std::vector<TokenId>>& prompts, const DecodeFidelityOptions& opts,
                              const ProgressCallback& progress = {}, const CancelToken* cancel = nullptr);

}  // namespace pareto
