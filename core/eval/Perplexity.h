// Perplexity by the GPTQ/SparseGPT protocol (DESIGN.md "Definitions"): the token stream is cut into
// non-overlapping windows of W tokens (a trailing partial window is dropped), each window is scored on its own
// without BOS over its W-1 next-token predictions, and ppl = exp(mean NLL).
#pragma once

#include <cstdint>
#include <vector>

#include "model/LlamaModel.h"
#include "tokenizer/Tokenizer.h"
#include "util/Progress.h"

namespace pareto {

struct PerplexityOptions {
  int64_t window = 512;
  int64_t maxWindows = 0;   // 0: every full window
  int64_t batch = 0;        // windows per forward pass; 0 picks one for the device
};

struct PerplexityResult {
  double ppl = 0;
  double meanNll = 0;
  int64_t windows = 0;
  int64_t tokens = 0;        // tokens in the whole text
  int64_t scoredTokens = 0;  // windows × (window − 1)
  int64_t window = 0;
};

// Throws InputError when the text has fewer tokens than one window or the window exceeds the model's
// positions; Cancelled when the token fires (checked between batches).
PerplexityResult computePerplexity(const LlamaModel& model, const std::vector<TokenId>& tokens,
                                   const PerplexityOptions& opts, const ProgressCallback& progress = {},
                                   const CancelToken* cancel = nullptr);

}  // namespace pareto
