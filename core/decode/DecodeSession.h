// One decode loop over a DecodeModel: a static KV cache and static buffers for `batch` sequences, and a step
// that reads everything it needs (input tokens, positions, cache slot) from device tensors and leaves the next
// step's inputs there (the argmax token, or one sampled on the device). Because no step depends on a host
// value, the step can be captured once in a CUDA graph (at::cuda::CUDAGraph) and replayed per token: no
// per-kernel launch overhead and no host synchronisation inside or between steps.
//
// The eager path (step() without capture) runs exactly the same operations, so a captured and an uncaptured
// session give identical tokens; on the CPU only the eager path exists (the kernels' references).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "decode/DecodeModel.h"
#include "model/Generation.h"
#include "tokenizer/Tokenizer.h"

namespace pareto {

class DecodeSession {
 public:
  // Cache for `capacity` positions per sequence (batch 1..16).
  DecodeSession(const DecodeModel& model, int64_t batch, int64_t capacity);
  ~DecodeSession();
  DecodeSession(const DecodeSession&) = delete;
  DecodeSession& operator=(const DecodeSession&) = delete;

  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }   // cache slots filled so far

  // The parts of a step, for benchmarks that time each part alone to show where a token's time goes (the
  // tokens are then meaningless). Set before capture(); all parts by default.
  enum Part : unsigned { kLinears = 1, kAttention = 2, kNormsAndActivation = 4, kHead = 8, kAllParts = 15 };
  void setParts(unsigned parts) { parts_ = parts; }

  // How the next token is chosen, set before capture(): greedy (the default) or sampled on the device with the
  // temperature, top-k and top-p of `s` — the same candidate set as generate()'s host sampler, drawn by the
  // Gumbel-max trick (argmax of scores + Gumbel noise, an exact draw from the softmax) from LibTorch's default
  // generator, which a captured graph advances on every replay. The seed is the caller's (at::manual_seed):
  // the tokens differ from generate()'s for the same seed, the distribution does not. Throws InputError for
  // invalid options.
  void setSampling(const SamplingOptions& s);

  // Captures one step in a CUDA graph; later step() calls replay it. The session's state is unchanged.
  // Throws InputError on the CPU.
  void capture();
  bool captured() const;

  // Sets the next step's inputs from the host: one token per row, its RoPE position, and the first cache slot
  // the row may attend to (left padding of batched prompts). Used for prompts (teacher forcing).
  void feed(const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions,
            const std::vector<int64_t>& validFrom);
  // One token for every row: the cache slot length() is written, logits computed, and the argmax (or sampled)
  // token becomes the next step's input (positions advance by one).
  void step();

  // Benchmarks: the first `length` cache slots filled with random keys and values (decode speed does not depend
  // on them), every row at position `length`, input token 0.
  void fillRandomContext(int64_t length, uint64_t seed);
  // The device-side state (slot, positions, input tokens, first valid slots) to return to with restore().
  struct Snapshot {
    at::Tensor ids, positions, slot, validFrom;
    int64_t length = 0;
  };
  Snapshot snapshot() const;
  void restore(const Snapshot& s);

  at::Tensor logits() const;   // float32 [batch, vocab] of the last step
  // int64 [batch, capacity + 1]: column s + 1 holds the token chosen after slot s.
  const at::Tensor& generated() const { return generated_; }
  // Bytes one step reads from the KV cache at the current length (every row attends to length() + 1 slots).
  int64_t kvBytesPerStep() const;

 private:
  void runStep();
  void sampleNext();

  const DecodeModel& model_;
  int64_t batch_, capacity_, length_ = 0;
  unsigned parts_ = kAllParts;
  SamplingOptions sampling_;
  at::Tensor ids_, positions_, slot_, validFrom_, next_;
  at::Tensor residual_, normed_, qkv_, q_, attn_, o_, gateUp_, act_, down_, logitsHalf_, logits_, generated_;
  std::vector<at::Tensor> keys_, values_;
  // Fused small ops (runtime/DecodeOps.h): RoPE, cache write and attention as one (ropeAttention), the greedy
  // argmax with the next step's inputs as one (greedyNextToken), and the norms, SiLU·mul and residual adds folded
  // into the packed GEMVs (at batch 1 only); PARETO_DECODE_FUSED=0 turns all off, a list (attention,next-token,folds)
  // keeps those named: the A/Bs of scripts/gpu-decode.sh. Their counters, zeros between launches.
  bool fuseAttention_ = true, fuseNextToken_ = true, fold_ = true;
  at::Tensor attentionCounters_, stepCounter_;
  std::vector<std::string> names_;   // module names for errors, per layer × {qkv, o, gate_up, down}
  struct Graph;
  std::unique_ptr<Graph> graph_;
};

// Generation through the decode runtime: prompts left-padded into one batch, each prompt fed one token per step,
// then new tokens as steps whose input is the previous step's choice (graph replays when useGraph and on CUDA).
// Greedy unless `sampling` says otherwise (DecodeSession::setSampling; the generator is seeded with
// sampling.seed first). Returns each prompt's new tokens, cut after the first EOS.
std::vector<std::vector<TokenId>> decodeGenerate(const DecodeModel& model, const std::vector<std::vector<TokenId>>& prompts,
                                                 int64_t maxNewTokens, const std::vector<TokenId>& eosTokenIds,
                                                 bool useGraph, const SamplingOptions& sampling = {});
inline std::vector<std::vector<TokenId>> decodeGreedy(const DecodeModel& model,
                                                      const std::vector<std::vector<TokenId>>& prompts,
                                                      int64_t maxNewTokens, const std::vector<TokenId>& eosTokenIds,
                                                      bool useGraph) {
  return decodeGenerate(model, prompts, maxNewTokens, eosTokenIds, useGraph);
}

}  // namespace pareto
