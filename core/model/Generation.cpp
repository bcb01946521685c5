#include "model/Generation.h"

#include <chrono>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/OutOfMemory.h"
#include "util/Error.h"

namespace pareto {

void validate(const SamplingOptions& s) {
  if (s.greedy) return;
  if (!(s.temperature > 0)) throw InputError("temperature must be > 0 (use greedy decoding for 0)");
  if (s.topK < 0) throw InputError("top-k must be >= 0 (0 disables it)");
  if (!(s.topP > 0 && s.topP <= 1)) throw InputError("top-p must be in (0, 1]");
}

TokenSampler::TokenSampler(SamplingOptions opts) : opts_(opts), state_(opts.seed) {}

// splitmix64: tiny, seedable and identical everywhere, unlike std:: distributions whose output differs
// between standard libraries.
double TokenSampler::uniform() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

TokenId TokenSampler::next(const at::Tensor& logits) {
  at::Tensor flat = logits.reshape({-1});
  if (opts_.greedy) return flat.argmax().item<int64_t>();

  at::Tensor scores = flat.to(at::kCPU, at::kDouble) / opts_.temperature;
  const int64_t vocab = scores.size(0);
  // Order candidates by score (ties by id) so top-k/top-p are deterministic.
  at::Tensor sortedIdx = std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  at::Tensor sorted = scores.index_select(0, sortedIdx);
  int64_t keep = vocab;
  if (opts_.topK > 0) keep = std::min(keep, opts_.topK);
  at::Tensor probs = at::softmax(sorted.narrow(0, 0, keep), 0);
  const double* p = probs.data_ptr<double>();
  if (opts_.topP < 1.0) {
    // Smallest prefix whose mass reaches top_p (the token crossing the threshold is kept, as in HF).
    double mass = 0;
    int64_t n = 0;
    while (n < keep) {
      mass += p[n++];
      if (mass >= opts_.topP) break;
    }
    keep = std::max<int64_t>(n, 1);
  }
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += p[i];
  double r = uniform() * total;
  int64_t pick = keep - 1;
  for (int64_t i = 0; i < keep; ++i) {
    r -= p[i];
    if (r < 0) {
      pick = i;
      break;
    }
  }
  return sortedIdx[pick].item<int64_t>();
}

namespace {

std::vector<std::vector<TokenId>> generateBatchUnguarded(const LlamaModel& model,
                                                         const std::vector<std::vector<TokenId>>& prompts,
                                                         const GenerationOptions& opts) {
  validate(opts.sampling);
  const int64_t B = static_cast<int64_t>(prompts.size());
  std::vector<std::vector<TokenId>> out(prompts.size());
  if (B == 0 || opts.maxNewTokens <= 0) return out;
  int64_t longest = 0;
  for (const auto& p : prompts) {
    if (p.empty()) throw InputError("generation needs non-empty prompts");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  }
  if (opts.maxNewTokens > model.config().maxPositionEmbeddings - longest)
    throw InputError("longest prompt (" + std::to_string(longest) + " tokens) plus " +
                     std::to_string(opts.maxNewTokens) + " new tokens exceed the model's " +
                     std::to_string(model.config().maxPositionEmbeddings) +
                     " positions (max_position_embeddings); lower the new tokens or the steps");
  const int64_t capacity = longest + opts.maxNewTokens;

  std::vector<TokenId> flat(static_cast<size_t>(B * longest), 0);
  at::Tensor positions = at::zeros({B, longest}, at::kLong);
  at::Tensor padding = at::zeros({B, capacity}, at::kBool);
  std::vector<int64_t> nextPos(prompts.size());
  std::vector<TokenSampler> samplers;
  for (int64_t b = 0; b < B; ++b) {
    const auto& p = prompts[static_cast<size_t>(b)];
    const int64_t pad = longest - static_cast<int64_t>(p.size());
    std::copy(p.begin(), p.end(), flat.begin() + b * longest + pad);
    positions[b].narrow(0, pad, longest - pad).copy_(at::arange(longest - pad, at::kLong));
    if (pad > 0) padding[b].narrow(0, 0, pad).fill_(true);
    nextPos[static_cast<size_t>(b)] = longest - pad;
    SamplingOptions s = opts.sampling;
    s.seed += static_cast<uint64_t>(b);
    samplers.emplace_back(s);
  }
  KVCache cache = model.makeCache(B, capacity);
  at::Tensor ids = at::tensor(flat, at::TensorOptions().dtype(at::kLong)).view({B, longest});
  BatchLayout layout{positions, padding.narrow(1, 0, longest)};
  std::vector<bool> done(prompts.size(), false);
  int64_t remaining = B;
  for (int64_t step = 0; step < opts.maxNewTokens && remaining > 0; ++step) {
    at::Tensor logits = model.forward(ids, &cache, /*lastOnly=*/true, &layout);   // [B, 1, V]
    // Greedy picks on the device: B ids cross to the host instead of B x vocab logits (at batch 256 and a
    // 128k vocabulary, 131 MB a step and a host argmax over 33M values). argmax takes the first maximum on
    // every device, as TokenSampler's does, so the tokens are the same.
    at::Tensor picks;
    if (opts.sampling.greedy)
      picks = logits.reshape({B, -1}).argmax(-1).to(at::kCPU);
    else
      logits = logits.to(at::kCPU);
    std::vector<TokenId> fed(prompts.size(), 0);
    for (int64_t b = 0; b < B; ++b) {
      const size_t i = static_cast<size_t>(b);
      if (done[i]) continue;   // finished sequences keep stepping (batch shape is fixed) but are ignored
      TokenId tok = picks.defined() ? static_cast<TokenId>(picks.data_ptr<int64_t>()[b]) : samplers[i].next(logits[b]);
      out[i].push_back(tok);
      fed[i] = tok;
      if (std::find(opts.eosTokenIds.begin(), opts.eosTokenIds.end(), tok) != opts.eosTokenIds.end()) {
        done[i] = true;
        --remaining;
      }
    }
    ids = at::tensor(fed, at::TensorOptions().dtype(at::kLong)).view({B, 1});
    at::Tensor stepPos = at::tensor(nextPos, at::TensorOptions().dtype(at::kLong)).view({B, 1});
    for (int64_t& p : nextPos) ++p;
    layout = BatchLayout{stepPos, padding.narrow(1, 0, cache.length() + 1)};
  }
  return out;
}

}  // namespace

// The KV cache (batch x capacity) is what runs out first on a GPU: name the stage and say what to lower.
constexpr const char* kGenerationHint = "lower the batch (fewer prompts at once) or the number of new tokens";

namespace {

const GenerationOptions& checked(const LlamaModel& model, const std::vector<TokenId>& prompt,
                                 const GenerationOptions& opts) {
  if (prompt.empty()) throw InputError("generation needs a non-empty prompt");
  if (opts.maxNewTokens < 0) throw InputError("max new tokens must be >= 0");
  validate(opts.sampling);
  // Compared without the sum, which a huge --max-new-tokens would overflow.
  if (opts.maxNewTokens > model.config().maxPositionEmbeddings - static_cast<int64_t>(prompt.size()))
    throw InputError("prompt (" + std::to_string(prompt.size()) + " tokens) plus " +
                     std::to_string(opts.maxNewTokens) + " new tokens exceed the model's " +
                     std::to_string(model.config().maxPositionEmbeddings) +
                     " positions (max_position_embeddings); lower --max-new-tokens");
  return opts;
}

}  // namespace

GenerationStream::GenerationStream(const LlamaModel& model, const std::vector<TokenId>& prompt,
                                   const GenerationOptions& opts)
    : model_(model),
      opts_(checked(model, prompt, opts)),
      cache_(guardMemory("generation", kGenerationHint, [&] {
        return model.makeCache(1, static_cast<int64_t>(prompt.size()) + std::max<int64_t>(opts.maxNewTokens, 1));
      })),
      sampler_(opts.sampling),
      next_(at::tensor(prompt, at::TensorOptions().dtype(at::kLong)).unsqueeze(0)) {}

bool GenerationStream::done() const {
  return ended_ || static_cast<int64_t>(tokens_.size()) >= opts_.maxNewTokens;
}

bool GenerationStream::step() {
  if (done()) return false;
  const auto t0 = std::chrono::steady_clock::now();
  const TokenId tok = guardMemory("generation", kGenerationHint, [&] {
    const at::Tensor logits = model_.forward(next_, &cache_, /*lastOnly=*/true);
    return sampler_.next(logits);   // reads the token back: the step has finished on the device
  });
  if (!tokens_.empty()) decodeSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tokens_.push_back(tok);
  ended_ = std::find(opts_.eosTokenIds.begin(), opts_.eosTokenIds.end(), tok) != opts_.eosTokenIds.end();
  next_ = at::full({1, 1}, tok, at::TensorOptions().dtype(at::kLong));
  return true;
}

std::vector<TokenId> generate(const LlamaModel& model, const std::vector<TokenId>& prompt,
                              const GenerationOptions& opts, const std::function<void(TokenId)>& onToken) {
  GenerationStream stream(model, prompt, opts);
  while (stream.step())
    if (onToken) onToken(stream.tokens().back());
  return stream.tokens();
}

std::vector<std::vector<TokenId>> generateBatch(const LlamaModel& model,
                                                const std::vector<std::vector<TokenId>>& prompts,
                                                const GenerationOptions& opts) {
  return guardMemory("generation", kGenerationHint, [&] { return generateBatchUnguarded(model, prompts, opts); });
}

}  // namespace pareto
