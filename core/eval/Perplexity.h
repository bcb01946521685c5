// Perplexity by the GPTQ/SparseGPT protocol (DESIGN.md "Definitions"): the token stream is cut into
// non-overlapping windows of W tokens (a trailing partial window is dropped), each window is scored on its own
// without BOS over its W-1 next-token predictions, and ppl = exp(mean NLL). Given the dense model it came from, the
// same pass also measures the KL divergence to it over the same predictions (eval/KlDivergence.h), window batch by
// window batch: both models see the same windows, and no more than one batch's logits live at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "calib/ActivationStore.h"
#include "eval/KlDivergence.h"
#include "model/LlamaModel.h"
#include "tokenizer/Tokenizer.h"
#include "util/Progress.h"

namespace pareto {

struct PerplexityOptions {
  int64_t window = 512;
  int64_t maxWindows = 0;   // 0: every full window
  int64_t batch = 0;        // windows per forward pass; 0 picks one for the device
  // The dense reference (same vocabulary, on the same device): KL(P_dense ‖ P_model) at every scored position,
  // and the dense model's own perplexity on the same windows. Null: neither.
  const LlamaModel* dense = nullptr;
  // A streamed model (LlamaModel's streamed constructor) is scored block by block: every window passes block i
  // before block i + 1 is read, its hidden states kept where `activations` says (calib/ActivationStore.h). The
  // numbers are the ones the whole model gives.
  ActivationPlacement activations = ActivationPlacement::Device;
  std::string scratchDir;
};

struct PerplexityResult {
  double ppl = 0;
  double meanNll = 0;
  int64_t windows = 0;
  int64_t tokens = 0;        // tokens in the whole text
  int64_t scoredTokens = 0;  // windows × (window − 1)
  int64_t window = 0;
  // With PerplexityOptions::dense:
  std::optional<KlDivergenceSummary> klToDense;   // over the scoredTokens positions
  std::optional<double> densePpl, denseMeanNll;
};

struct LoadedModel;

// The ids of a text file (no special tokens) as both models read them. Throws InputError naming both folders
// unless their vocabularies have one size and their tokenizers encode the text to the same ids.
std::vector<TokenId> comparableTextIds(const LoadedModel& dense, const LoadedModel& model, const std::string& textFile);

// Throws InputError when the text has fewer tokens than one window or the window exceeds the model's
// positions, or the dense model's vocabulary differs; Cancelled when the token fires (checked between batches).
PerplexityResult computePerplexity(const LlamaModel& model, const std::vector<TokenId>& tokens,
                                   const PerplexityOptions& opts, const ProgressCallback& progress = {},
                                   const CancelToken* cancel = nullptr);

}  // namespace pareto
