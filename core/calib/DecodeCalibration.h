// Decode-aware calibration: the dense model continues held-in prompts with the KV cache, and only the
// continuation positions count. Running prompt+continuation teacher-forced afterwards reproduces exactly the
// activations the dense model had at those decode steps (causal attention: position t sees only tokens <= t,
// which are the same tokens), so no per-step hooks are needed.
#pragma once

#include <string>
#include <vector>

#include "calib/CalibrationSet.h"
#include "calib/ContinuationsFile.h"
#include "model/Generation.h"
#include "util/Progress.h"

namespace pareto {

class LlamaModel;
class ProcessGroup;

struct DecodeCalibrationOptions {
  int64_t tokens = 16384;        // continuation tokens that reach the Hessian (the last one is trimmed to fit)
  int64_t maxNewTokens = 128;    // per prompt
  SamplingOptions sampling;      // greedy by default; sequence i of the run samples with seed + i
  uint64_t seed = 0;             // which prompts, in which order
  int64_t batch = 0;             // prompts generated together; 0 picks one for the device
  std::vector<TokenId> eosTokenIds;
  std::optional<TokenId> bosTokenId;
};

// Each sequence is BOS + prompt + continuation (an EOS that ends a continuation is not included: no decode step
// ever consumes it), weights 0 on the prompt and 1 on the continuation. Prompts are taken in a seeded order
// until the budget is met; throws InputError when all prompts together fall short of it.
CalibrationSet decodeCalibration(const LlamaModel& model, const Tokenizer& tokenizer,
                                 const std::vector<std::string>& prompts, const DecodeCalibrationOptions& opts,
                                 const ProgressCallback& progress = {}, const CancelToken* cancel = nullptr);

// decodeCalibration spread over the ranks of `group`, each generating on its own device: the seeded order's
// batches of prompts are dealt out in turn (batch b to rank b mod size) and the budget is counted over all
// ranks' continuations in the order one process takes them. Returns this rank's share; the shares together are
// the set decodeCalibration gives with the same options. A cancel on any rank stops all.
CalibrationSet decodeCalibrationShare(const LlamaModel& model, const Tokenizer& tokenizer,
                                      const std::vector<std::string>& prompts, const DecodeCalibrationOptions& opts,
                                      ProcessGroup& group, const ProgressCallback& progress = {},
                                      const CancelToken* cancel = nullptr);

// The same calibration from continuations generated elsewhere (calib/ContinuationsFile.h): records taken in the
// seeded order of opts.seed until opts.tokens continuation tokens, as decodeCalibration takes its prompts, so
// greedy continuations written by `generate --prompts` give exactly the set decodeCalibration makes. Throws
// InputError when all records together fall short of the budget.
CalibrationSet continuationCalibration(const std::vector<PromptContinuation>& records,
                                       const DecodeCalibrationOptions& opts, const std::string& source);

// Continues every prompt (BOS + prompt, in order) as decode calibration does, `opts.batch` at a time; prompt k
// samples with opts.sampling.seed + k. For `generate --prompts ... --out FILE`.
std::vector<PromptContinuation> generateContinuations(const LlamaModel& model, const Tokenizer& tokenizer,
                                                      const std::vector<std::string>& prompts,
                                                      const DecodeCalibrationOptions& opts,
                                                      const ProgressCallback& progress = {},
                                                      const CancelToken* cancel = nullptr);

}  // namespace pareto
