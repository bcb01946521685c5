// The greedy continuations of held-out prompts that decode fidelity and activation drift both start from: the
// dense model's and the compressed model's own. Generating them is most of either measurement's time, so a
// caller that measures both (the workbench's evaluation) generates them once and hands them to each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/LlamaModel.h"
#include "tokenizer/Tokenizer.h"
#include "util/Progress.h"

namespace pareto {

struct Continuations {
  int64_t maxNewTokens = 0;              // tokens each model generated per prompt (fewer after an EOS)
  std::vector<TokenId> eosTokenIds;
  size_t batch = 0;                      // prompts generated together
  std::vector<std::vector<TokenId>> dense, compressed;   // per prompt, in prompt order (a final EOS kept)
};

// Both models continue every prompt greedily, `batch` prompts at a time (checkComparisonInputs picks it as
// decode fidelity and activation drift do). Checks `cancel` between batches.
Continuations generateContinuations(const LlamaModel& dense, const LlamaModel& compressed,
                                    const std::vector<std::vector<TokenId>>& prompts, int64_t maxNewTokens,
                                    const std::vector<TokenId>& eosTokenIds, size_t batch,
                                    const ProgressCallback& progress = {}, const CancelToken* cancel = nullptr);

// The continuations of prompts [first, last): taken from `shared` when given (Error unless it was generated for
// these prompts with these settings, in batches of `batch`), else generated now. The same batches give the same
// tokens, so a measurement reads the same numbers either way.
struct ContinuationBatch {
  std::vector<std::vector<TokenId>> prompts;            // prompts [first, last)
  std::vector<std::vector<TokenId>> dense, compressed;  // their continuations
};
ContinuationBatch continuationsOf(const LlamaModel& dense, const LlamaModel& compressed,
                                  const std::vector<std::vector<TokenId>>& prompts, size_t first, size_t last,
                                  int64_t maxNewTokens, const std::vector<TokenId>& eosTokenIds, size_t batch,
                                  const Continuations* shared);

}  // namespace pareto
