#include "calib/DecodeCalibration.h"

#include <algorithm>

#include "model/LlamaModel.h"
#include "util/Error.h"

namespace pareto {

CalibrationSet decodeCalibration(const LlamaModel& model, const Tokenizer& tokenizer,
                                 const std::vector<std::string>& prompts, const DecodeCalibrationOptions& opts,
                                 const ProgressCallback& progress, const CancelToken* cancel) {
  if (opts.tokens < 1) throw InputError("calibration needs at least one token");
  if (opts.maxNewTokens < 1) throw InputError("decode calibration needs max_new_tokens >= 1");
  if (prompts.empty()) throw InputError("decode calibration needs prompts");
  const int64_t batch = opts.batch > 0 ? opts.batch : (model.options().device.is_cuda() ? 64 : 8);
  std::vector<size_t> order = seededPermutation(prompts.size(), opts.seed);

  CalibrationSet set;
  set.source = "decode";
  int64_t counted = 0;
  size_t next = 0;
  while (counted < opts.tokens && next < order.size()) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    std::vector<std::vector<TokenId>> promptIds;
    const size_t batchStart = next;
    for (; next < order.size() && static_cast<int64_t>(promptIds.size()) < batch; ++next) {
      std::vector<TokenId> ids;
      if (opts.bosTokenId) ids.push_back(*opts.bosTokenId);
      auto text = tokenizer.encode(prompts[order[next]]);
      ids.insert(ids.end(), text.begin(), text.end());
      promptIds.push_back(std::move(ids));
    }
    GenerationOptions gen;
    gen.maxNewTokens = opts.maxNewTokens;
    gen.sampling = opts.sampling;
    gen.sampling.seed = opts.sampling.seed + batchStart;   // prompt k of the run always samples with seed + k
    gen.eosTokenIds = opts.eosTokenIds;
    auto continuations = generateBatch(model, promptIds, gen);
    for (size_t i = 0; i < promptIds.size() && counted < opts.tokens; ++i) {
      std::vector<TokenId> cont = continuations[i];
      if (!cont.empty() &&
          std::find(opts.eosTokenIds.begin(), opts.eosTokenIds.end(), cont.back()) != opts.eosTokenIds.end())
        cont.pop_back();
      const int64_t take = std::min<int64_t>(static_cast<int64_t>(cont.size()), opts.tokens - counted);
      if (take == 0) continue;
      CalibrationSequence seq;
      seq.ids = promptIds[i];
      seq.weights.assign(seq.ids.size(), 0.0f);
      seq.ids.insert(seq.ids.end(), cont.begin(), cont.begin() + take);
      seq.weights.resize(seq.ids.size(), 1.0f);
      counted += take;
      set.sequences.push_back(std::move(seq));
    }
    if (progress)
      progress({"decode calibration", std::min(1.0, double(counted) / opts.tokens),
                std::to_string(counted) + "/" + std::to_string(opts.tokens) + " decode tokens"});
  }
  if (counted < opts.tokens)
    throw InputError("the " + std::to_string(prompts.size()) + " prompts gave only " + std::to_string(counted) +
                     " decode tokens of the " + std::to_string(opts.tokens) +
                     " asked for (raise max_new_tokens or add prompts)");
  return set;
}

}  // namespace pareto
