#include "eval/Continuations.h"

#include <algorithm>
#include <string>

#include "model/Generation.h"
#include "util/Error.h"

namespace pareto {

ContinuationBatch continuationsOf(const LlamaModel& dense, const LlamaModel& compressed,
                                  const std::vector<std::vector<TokenId>>& prompts, size_t first, size_t last,
                                  int64_t maxNewTokens, const std::vector<TokenId>& eosTokenIds, size_t batch,
                                  const Continuations* shared) {
  ContinuationBatch c;
  c.prompts.assign(prompts.begin() + first, prompts.begin() + last);
  if (shared != nullptr) {
    if (shared->maxNewTokens != maxNewTokens || shared->eosTokenIds != eosTokenIds || shared->batch != batch ||
        shared->dense.size() != prompts.size() || shared->compressed.size() != prompts.size())
      throw Error("shared continuations were generated for other prompts or settings (" +
                  std::to_string(shared->maxNewTokens) + " new tokens in batches of " +
                  std::to_string(shared->batch) + "; asked: " + std::to_string(maxNewTokens) + " in batches of " +
                  std::to_string(batch) + ")");
    c.dense.assign(shared->dense.begin() + first, shared->dense.begin() + last);
    c.compressed.assign(shared->compressed.begin() + first, shared->compressed.begin() + last);
    return c;
  }
  GenerationOptions gen;
  gen.maxNewTokens = maxNewTokens;
  gen.eosTokenIds = eosTokenIds;
  c.dense = generateBatch(dense, c.prompts, gen);
  c.compressed = generateBatch(compressed, c.prompts, gen);
  return c;
}

Continuations generateContinuations(const LlamaModel& dense, const LlamaModel& compressed,
                                    const std::vector<std::vector<TokenId>>& prompts, int64_t maxNewTokens,
                                    const std::vector<TokenId>& eosTokenIds, size_t batch,
                                    const ProgressCallback& progress, const CancelToken* cancel) {
  Continuations c;
  c.maxNewTokens = maxNewTokens;
  c.eosTokenIds = eosTokenIds;
  c.batch = std::max<size_t>(1, batch);
  for (size_t first = 0; first < prompts.size(); first += c.batch) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    const size_t last = std::min(prompts.size(), first + c.batch);
    ContinuationBatch b = continuationsOf(dense, compressed, prompts, first, last, maxNewTokens, eosTokenIds,
                                          c.batch, nullptr);
    for (auto& t : b.dense) c.dense.push_back(std::move(t));
    for (auto& t : b.compressed) c.compressed.push_back(std::move(t));
    if (progress)
      progress({"continuations", double(last) / prompts.size(),
                std::to_string(last) + "/" + std::to_string(prompts.size()) + " prompts"});
  }
  return c;
}

}  // namespace pareto
