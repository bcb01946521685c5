// Autoregressive generation with the KV cache: one prefill of the prompt, then one-token decode steps.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/KVCache.h"
#include "model/LlamaModel.h"
#include "tokenizer/Tokenizer.h"

namespace pareto {

struct SamplingOptions {
  bool greedy = true;
  double temperature = 1.0;   // > 0
  int64_t topK = 0;           // 0: no top-k cut
  double topP = 1.0;          // (0, 1]; 1: no nucleus cut
  uint64_t seed = 0;
};

struct GenerationOptions {
  int64_t maxNewTokens = 32;
  SamplingOptions sampling;
  std::vector<TokenId> eosTokenIds;   // generation stops after emitting one of these (it is kept in the output)
};

// Throws InputError for invalid sampling options.
void validate(const SamplingOptions& s);

// Picks the next token from float32 logits [vocab] (any device). `rng` carries the sampling state between
// steps; the same seed gives the same tokens on every device because sampling runs in float64 on the host.
class TokenSampler {
 public:
  explicit TokenSampler(SamplingOptions opts);
  TokenId next(const at::Tensor& logits);

 private:
  SamplingOptions opts_;
  uint64_t state_;
  double uniform();
};

// One sequence's generation a token at a time: what generate() runs, for callers that show tokens as they come
// or take turns between models (the workbench's side-by-side generation). The constructor checks the prompt and
// the options (InputError: empty prompt, sampling, prompt + new tokens past the model's positions) and makes the
// KV cache; step() runs one forward (the prompt's prefill first) and picks the next token.
class GenerationStream {
 public:
  GenerationStream(const LlamaModel& model, const std::vector<TokenId>& prompt, const GenerationOptions& opts);
  // Generates the next token and returns true; false, doing nothing, once an EOS came or maxNewTokens are out.
  bool step();
  bool done() const;
  const std::vector<TokenId>& tokens() const { return tokens_; }   // new tokens only
  // Wall time of the steps after the first (which holds the prompt's prefill): the decode speed.
  double decodeSeconds() const { return decodeSeconds_; }

 private:
  const LlamaModel& model_;
  GenerationOptions opts_;
  KVCache cache_;
  TokenSampler sampler_;
  at::Tensor next_;
  std::vector<TokenId> tokens_;
  bool ended_ = false;
  double decodeSeconds_ = 0;
};

// New tokens only (the prompt is not repeated). The prompt must be non-empty. `onToken`, when given, sees each
// token as it is generated.
std::vector<TokenId> generate(const LlamaModel& model, const std::vector<TokenId>& prompt,
                              const GenerationOptions& opts, const std::function<void(TokenId)>& onToken = {});

// Several prompts at once: left-padded into one batch that shares each weight read, each sequence with its own
// positions and stopping at its own EOS. Sequence i samples with seed opts.sampling.seed + i, so results do
// not depend on how prompts are grouped into batches. Returns the new tokens of each prompt.
std::vector<std::vector<TokenId>> generateBatch(const LlamaModel& model,
                                                const std::vector<std::vector<TokenId>>& prompts,
                                                const GenerationOptions& opts);

}  // namespace pareto
