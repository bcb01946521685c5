#include "calib/DecodeCalibration.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "dist/ProcessGroup.h"
#include "model/LlamaModel.h"
#include "util/Error.h"

namespace pareto {
namespace {

// Appends prompt + continuation (its final EOS left out, trimmed to the budget) with weights 0 then 1.
void appendDecodeSequence(CalibrationSet& set, const std::vector<TokenId>& prompt, std::vector<TokenId> cont,
                          const DecodeCalibrationOptions& opts, int64_t& counted) {
  if (!cont.empty() &&
      std::find(opts.eosTokenIds.begin(), opts.eosTokenIds.end(), cont.back()) != opts.eosTokenIds.end())
    cont.pop_back();
  const int64_t take = std::min<int64_t>(static_cast<int64_t>(cont.size()), opts.tokens - counted);
  if (take <= 0) return;
  CalibrationSequence seq;
  seq.ids = prompt;
  seq.weights.assign(seq.ids.size(), 0.0f);
  seq.ids.insert(seq.ids.end(), cont.begin(), cont.begin() + take);
  seq.weights.resize(seq.ids.size(), 1.0f);
  counted += take;
  set.sequences.push_back(std::move(seq));
}

int64_t generationBatch(const LlamaModel& model, const DecodeCalibrationOptions& opts) {
  return opts.batch > 0 ? opts.batch : (model.options().device.is_cuda() ? 64 : 8);
}

std::vector<TokenId> promptIds(const Tokenizer& tokenizer, const std::string& prompt, const DecodeCalibrationOptions& opts) {
  std::vector<TokenId> ids;
  if (opts.bosTokenId) ids.push_back(*opts.bosTokenId);
  const auto text = tokenizer.encode(prompt);
  ids.insert(ids.end(), text.begin(), text.end());
  return ids;
}

// The generation of the batch whose first prompt is prompt `first` of the run: prompt k always samples with
// seed + k, whichever process generates it.
GenerationOptions batchGeneration(const DecodeCalibrationOptions& opts, size_t first) {
  GenerationOptions gen;
  gen.maxNewTokens = opts.maxNewTokens;
  gen.sampling = opts.sampling;
  gen.sampling.seed = opts.sampling.seed + first;
  gen.eosTokenIds = opts.eosTokenIds;
  return gen;
}

void reportTokens(const ProgressCallback& progress, int64_t counted, int64_t wanted) {
  if (progress)
    progress({"decode calibration", std::min(1.0, double(counted) / wanted),
              std::to_string(counted) + "/" + std::to_string(wanted) + " decode tokens"});
}

void requireTokens(size_t prompts, int64_t counted, int64_t wanted) {
  if (counted < wanted)
    throw InputError("the " + std::to_string(prompts) + " prompts gave only " + std::to_string(counted) +
                     " decode tokens of the " + std::to_string(wanted) +
                     " asked for (raise max_new_tokens or add prompts)");
}

}  // namespace

CalibrationSet decodeCalibration(const LlamaModel& model, const Tokenizer& tokenizer,
                                 const std::vector<std::string>& prompts, const DecodeCalibrationOptions& opts,
                                 const ProgressCallback& progress, const CancelToken* cancel) {
  if (opts.tokens < 1) throw InputError("calibration needs at least one token");
  if (opts.maxNewTokens < 1) throw InputError("decode calibration needs max_new_tokens >= 1");
  if (prompts.empty()) throw InputError("decode calibration needs prompts");
  const int64_t batch = generationBatch(model, opts);
  std::vector<size_t> order = seededPermutation(prompts.size(), opts.seed);

  CalibrationSet set;
  set.source = "decode";
  int64_t counted = 0;
  size_t next = 0;
  while (counted < opts.tokens && next < order.size()) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    std::vector<std::vector<TokenId>> promptIds;
    const size_t batchStart = next;
    for (; next < order.size() && static_cast<int64_t>(promptIds.size()) < batch; ++next)
      promptIds.push_back(pareto::promptIds(tokenizer, prompts[order[next]], opts));
    auto continuations = generateBatch(model, promptIds, batchGeneration(opts, batchStart));
    for (size_t i = 0; i < promptIds.size() && counted < opts.tokens; ++i)
      appendDecodeSequence(set, promptIds[i], continuations[i], opts, counted);
    reportTokens(progress, counted, opts.tokens);
  }
  requireTokens(prompts.size(), counted, opts.tokens);
  return set;
}

CalibrationSet decodeCalibrationShare(const LlamaModel& model, const Tokenizer& tokenizer,
                                      const std::vector<std::string>& prompts, const DecodeCalibrationOptions& opts,
                                      ProcessGroup& group, const ProgressCallback& progress,
                                      const CancelToken* cancel) {
  if (opts.tokens < 1) throw InputError("calibration needs at least one token");
  if (opts.maxNewTokens < 1) throw InputError("decode calibration needs max_new_tokens >= 1");
  if (prompts.empty()) throw InputError("decode calibration needs prompts");
  const size_t batch = static_cast<size_t>(generationBatch(model, opts));
  const size_t ranks = static_cast<size_t>(group.size()), rank = static_cast<size_t>(group.rank());
  const std::vector<size_t> order = seededPermutation(prompts.size(), opts.seed);
  const size_t batches = (order.size() + batch - 1) / batch;

  CalibrationSet set;
  set.source = "decode";
  int64_t counted = 0;   // over every rank, in the single-process order
  for (size_t round = 0; counted < opts.tokens && round * ranks < batches; ++round) {
    if (group.any(cancel != nullptr && cancel->isCancelled())) throw Cancelled();
    const size_t mine = round * ranks + rank;
    std::vector<std::vector<TokenId>> ids, continuations;
    if (mine < batches) {
      for (size_t k = mine * batch; k < std::min(order.size(), (mine + 1) * batch); ++k)
        ids.push_back(promptIds(tokenizer, prompts[order[k]], opts));
      continuations = generateBatch(model, ids, batchGeneration(opts, mine * batch));
    }
    // Every rank's continuation lengths (+1, so that 0 marks no prompt) in the order of the round's batches.
    at::Tensor lengths = at::zeros({static_cast<int64_t>(ranks), static_cast<int64_t>(batch)}, at::kLong);
    for (size_t i = 0; i < continuations.size(); ++i) {
      const auto& c = continuations[i];
      const bool eos = !c.empty() &&
                       std::find(opts.eosTokenIds.begin(), opts.eosTokenIds.end(), c.back()) != opts.eosTokenIds.end();
      lengths[static_cast<int64_t>(rank)][static_cast<int64_t>(i)] = static_cast<int64_t>(c.size()) - (eos ? 1 : 0) + 1;
    }
    group.allReduceSum(lengths);
    for (size_t r = 0; r < ranks; ++r)
      for (size_t i = 0; i < batch; ++i) {
        const int64_t length = lengths[static_cast<int64_t>(r)][static_cast<int64_t>(i)].item<int64_t>() - 1;
        if (length < 0 || counted >= opts.tokens) continue;
        if (r == rank) {
          int64_t before = counted;
          appendDecodeSequence(set, ids[i], continuations[i], opts, before);
        }
        counted += std::min(length, opts.tokens - counted);
      }
    reportTokens(progress, counted, opts.tokens);
  }
  requireTokens(prompts.size(), counted, opts.tokens);
  return set;
}

CalibrationSet continuationCalibration(const std::vector<PromptContinuation>& records,
                                       const DecodeCalibrationOptions& opts, const std::string& source) {
  if (opts.tokens < 1) throw InputError("calibration needs at least one token");
  CalibrationSet set;
  set.source = "decode";
  int64_t counted = 0;
  for (size_t k : seededPermutation(records.size(), opts.seed)) {
    if (counted >= opts.tokens) break;
    appendDecodeSequence(set, records[k].prompt, records[k].continuation, opts, counted);
  }
  if (counted < opts.tokens)
    throw InputError(fileMessage(source, "the " + std::to_string(records.size()) + " continuations hold only " +
                                             std::to_string(counted) + " decode tokens of the " +
                                             std::to_string(opts.tokens) + " asked for"));
  return set;
}

std::vector<PromptContinuation> generateContinuations(const LlamaModel& model, const Tokenizer& tokenizer,
                                                      const std::vector<std::string>& prompts,
                                                      const DecodeCalibrationOptions& opts,
                                                      const ProgressCallback& progress, const CancelToken* cancel) {
  if (opts.maxNewTokens < 1) throw InputError("generation needs max_new_tokens >= 1");
  const size_t batch = static_cast<size_t>(generationBatch(model, opts));
  std::vector<PromptContinuation> out;
  for (size_t start = 0; start < prompts.size(); start += batch) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    std::vector<std::vector<TokenId>> ids;
    for (size_t i = start; i < std::min(prompts.size(), start + batch); ++i)
      ids.push_back(promptIds(tokenizer, prompts[i], opts));
    GenerationOptions gen;
    gen.maxNewTokens = opts.maxNewTokens;
    gen.sampling = opts.sampling;
    gen.sampling.seed = opts.sampling.seed + start;
    gen.eosTokenIds = opts.eosTokenIds;
    std::vector<std::vector<TokenId>> continuations = generateBatch(model, ids, gen);
    for (size_t i = 0; i < ids.size(); ++i) out.push_back({std::move(ids[i]), std::move(continuations[i])});
    if (progress)
      progress({"generate", double(out.size()) / prompts.size(),
                std::to_string(out.size()) + "/" + std::to_string(prompts.size()) + " prompts"});
  }
  return out;
}

}  // namespace pareto
