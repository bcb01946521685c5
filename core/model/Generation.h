// Autoregressive generation with the KV cache: one prefill of the prompt, then one-token decode steps.
#pragma once

#include <cstdint>
#include <vector>

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

// New tokens only (the prompt is not repeated). The prompt must be non-empty.
std::vector<TokenId> generate(const LlamaModel& model, const std::vector<TokenId>& prompt,
                              const GenerationOptions& opts);

// Several prompts at once: left-padded into one batch that shares each weight read, each sequence with its own
// positions and stopping at its own EOS. Sequence i samples with seed opts.sampling.seed + i, so results do
// not depend on how prompts are grouped into batches. Returns the new tokens of each prompt.
std::vector<std::vector<TokenId>> generateBatch(const LlamaModel& model,
                                                const std::vector<std::vector<TokenId>>& prompts,
                                                const GenerationOptions& opts);

}  // namespace pareto
