#include "decode/DecodeSession.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "model/OutOfMemory.h"
#include "runtime/DecodeOps.h"
#include "util/Error.h"

#ifdef PARETO_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace pareto {

struct DecodeSession::Graph {
#ifdef PARETO_WITH_CUDA
  at::cuda::CUDAGraph graph;
#endif
};

DecodeSession::DecodeSession(const DecodeModel& model, int64_t batch, int64_t capacity)
    : model_(model), batch_(batch), capacity_(capacity) {
  const ModelConfig& c = model.config();
  if (batch < 1 || batch > 16) throw InputError("decode batch must be 1..16, got " + std::to_string(batch));
  if (capacity < 1) throw InputError("decode cache capacity must be at least 1 position");
  if (capacity > c.maxPositionEmbeddings)
    throw InputError(std::to_string(capacity) + " positions exceed the model's " +
                     std::to_string(c.maxPositionEmbeddings));
  const auto& opts = model.options();
  const auto act = at::TensorOptions().device(opts.device).dtype(opts.dtype);
  const auto longs = at::TensorOptions().device(opts.device).dtype(at::kLong);
  const int64_t H = c.hiddenSize, D = c.headDim;
  ids_ = at::zeros({batch}, longs);
  positions_ = at::zeros({batch}, longs);
  validFrom_ = at::zeros({batch}, longs);
  slot_ = at::zeros({1}, longs);
  next_ = at::zeros({batch}, longs);
  residual_ = at::zeros({batch, H}, act);
  normed_ = at::zeros({batch, H}, act);
  qkv_ = at::zeros({batch, (c.numHeads + 2 * c.numKvHeads) * D}, act);
  q_ = at::zeros({batch, c.numHeads, D}, act);
  attn_ = at::zeros({batch, c.numHeads * D}, act);
  o_ = at::zeros({batch, H}, act);
  gateUp_ = at::zeros({batch, 2 * c.intermediateSize}, act);
  act_ = at::zeros({batch, c.intermediateSize}, act);
  down_ = at::zeros({batch, H}, act);
  logitsHalf_ = at::zeros({batch, model.outputHead().rows()}, act);
  logits_ = at::zeros({batch, model.outputHead().rows()}, act.dtype(at::kFloat));
  generated_ = at::zeros({batch, capacity + 1}, longs);
  // PARETO_DECODE_FUSED: unset or 1 all fusions, 0 none, else a comma list of those kept (attention, next-token,
  // folds), for an A/B of each.
  const char* fused = std::getenv("PARETO_DECODE_FUSED");
  const std::string kept = fused == nullptr ? "1" : fused;
  const auto keeps = [&](const std::string& name) {
    return kept == "1" || ("," + kept + ",").find("," + name + ",") != std::string::npos;
  };
  fuseAttention_ = keeps("attention");
  fuseNextToken_ = keeps("next-token");
  // Folded only at batch 1. At batch 8 the folded kernels (the norm's 1/rms recomputed by every block for every
  // row, the folds' code in the loop) made the step 14% slower for int4 g128 and 21% for 2:4 + int4 than the
  // separate ops; at batch 1 they save 1.4% and 0% (bench/NOTES.md, "The folds at batch 8").
  fold_ = keeps("folds") && batch == 1;
  attentionCounters_ = at::zeros({decodeAttentionCounters(batch, c.numHeads, c.numKvHeads)}, longs.dtype(at::kInt));
  stepCounter_ = at::zeros({1}, longs.dtype(at::kInt));
  for (int64_t l = 0; l < model.numLayers(); ++l) {
    keys_.push_back(at::zeros({batch, c.numKvHeads, capacity, D}, act));
    values_.push_back(at::zeros({batch, c.numKvHeads, capacity, D}, act));
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : {"self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"})
      names_.push_back(p + n);
  }
}

DecodeSession::~DecodeSession() = default;

bool DecodeSession::captured() const { return graph_ != nullptr; }

void DecodeSession::runStep() {
  const ModelConfig& c = model_.config();
  const double eps = c.rmsNormEps;
  const double scale = 1.0 / std::sqrt(double(c.headDim));
  const bool linears = parts_ & kLinears, attention = parts_ & kAttention, norms = parts_ & kNormsAndActivation;
  // The small ops folded into the packed GEMVs next to them (PackedLinear::fusesInKernel): each norm into the GEMV
  // that reads it, SiLU·mul into the down projection, the residual adds into the o and down projections. Only in
  // the whole step: `bench decode --breakdown` times the parts unfused, each alone.
  const bool fold = fold_ && parts_ == kAllParts;
  const auto folds = [&](const auto& linear) { return fold && linear.fusesInKernel(); };
  at::index_select_out(residual_, model_.embedding(), 0, ids_);
  at::Tensor pending;  // a block's output not yet in the residual stream: the next norm adds it
  // out = linear(weight ⊙ rmsnorm(residual + pending)).
  const auto normedLinear = [&](const auto& linear, const at::Tensor& weight, const at::Tensor& out,
                                const std::string& name) {
    if (folds(linear) && !pending.defined()) {
      GemvFusion f;
      f.input = GemvFusion::Input::RmsNorm;
      f.normWeight = weight;
      f.eps = eps;
      linear.forward(residual_, out, name, f);
      return;
    }
    if (norms) addRmsNorm(residual_, pending, weight, eps, normed_);
    pending = at::Tensor();
    if (linears) linear.forward(normed_, out, name);
  };
  // residual += linear(x), or `scratch` = linear(x) left pending for the next norm.
  const auto residualLinear = [&](const auto& linear, const at::Tensor& x, GemvFusion::Input input,
                                  const at::Tensor& scratch, const std::string& name) {
    if (folds(linear)) {
      GemvFusion f;
      f.input = input;
      f.accumulate = true;
      linear.forward(x, residual_, name, f);
      return;
    }
    at::Tensor in = x;
    if (input == GemvFusion::Input::SiluMul) {
      if (norms) siluMul(x, act_);
      in = act_;
    }
    if (linears) linear.forward(in, scratch, name);
    pending = scratch;
  };
  for (int64_t l = 0; l < model_.numLayers(); ++l) {
    const DecodeLayer& L = model_.layer(l);
    const std::string* name = &names_[size_t(l) * 4];
    normedLinear(L.qkv, L.inputNorm, qkv_, name[0]);
    if (attention && fuseAttention_) {
      ropeAttention(qkv_, L.qNorm, L.kNorm, eps, positions_, model_.invFreq(), slot_, keys_[l], values_[l], validFrom_,
                    scale, attentionCounters_, attn_);
    } else if (attention) {
      ropeAndCacheWrite(qkv_, L.qNorm, L.kNorm, eps, positions_, model_.invFreq(), slot_, q_, keys_[l], values_[l]);
      decodeAttention(q_, keys_[l], values_[l], slot_, validFrom_, scale, attn_);
    }
    residualLinear(L.o, attn_, GemvFusion::Input::Plain, o_, name[1]);
    normedLinear(L.gateUp, L.postAttentionNorm, gateUp_, name[2]);
    residualLinear(L.down, gateUp_, GemvFusion::Input::SiluMul, down_, name[3]);
  }
  if (parts_ & kHead) {
    const PackedLinear& head = model_.outputHead();
    if (folds(head) && !pending.defined()) {
      GemvFusion f;
      f.input = GemvFusion::Input::RmsNorm;
      f.normWeight = model_.finalNorm();
      f.eps = eps;
      head.forward(residual_, logitsHalf_, "lm_head", f);
    } else {
      addRmsNorm(residual_, pending, model_.finalNorm(), eps, normed_);
      head.forward(normed_, logitsHalf_, "lm_head");
    }
    if (sampling_.greedy && fuseNextToken_) {
      greedyNextToken(logitsHalf_, next_, ids_, positions_, slot_, generated_, stepCounter_);
      return;
    }
    logits_.copy_(logitsHalf_);
    if (sampling_.greedy)
      at::argmax_out(next_, logits_, -1);
    else
      sampleNext();
  }
  // The next step's inputs, on the device: the argmax token at the next slot and position.
  positions_.add_(1);
  slot_.add_(1);
  ids_.copy_(next_);
  generated_.index_copy_(1, slot_, next_.unsqueeze(1));
}

// The fused greedy step never widens the logits (its argmax reads the 16-bit values); the copy is the same values.
at::Tensor DecodeSession::logits() const { return logitsHalf_.to(at::kFloat); }

void DecodeSession::setSampling(const SamplingOptions& s) {
  if (!s.greedy) validate(s);
  if (graph_) throw InputError("decode sampling must be chosen before the step is captured");
  sampling_ = s;
}

// Only device operations of static shape, no host synchronisation: capturable, like the rest of the step.
void DecodeSession::sampleNext() {
  at::Tensor scores = logits_ / sampling_.temperature;
  const int64_t vocab = scores.size(-1);
  if (sampling_.topK > 0 && sampling_.topK < vocab) {
    const at::Tensor kth = std::get<0>(at::topk(scores, sampling_.topK, -1)).narrow(-1, sampling_.topK - 1, 1);
    scores = scores.masked_fill(scores < kth, -INFINITY);
  }
  if (sampling_.topP < 1.0) {
    // The smallest prefix of the ranked candidates whose mass reaches top-p, the crossing token included: a
    // token stays when the mass of the tokens ranked before it is still below top-p (the first always does).
    auto [sorted, order] = at::sort(scores, -1, /*descending=*/true);
    const at::Tensor probs = at::softmax(sorted, -1);
    const at::Tensor before = at::cumsum(probs, -1) - probs;
    scores = at::empty_like(scores).scatter_(-1, order, sorted.masked_fill(before >= sampling_.topP, -INFINITY));
  }
  // Gumbel-max: argmax(scores + G), G = −log(−log U), is a draw from softmax(scores); excluded tokens stay −∞.
  // U is kept off 0 so that the noise stays finite.
  const at::Tensor u = at::rand_like(scores).clamp_min_(1e-20);
  at::argmax_out(next_, scores - at::log(-at::log(u)), -1);
}

void DecodeSession::capture() {
#ifdef PARETO_WITH_CUDA
  if (!model_.options().device.is_cuda()) throw InputError("CUDA graphs need a CUDA device");
  if (graph_) return;
  const Snapshot before = snapshot();
  // Capture needs a side stream; one eager step on it first creates cuBLAS handles and workspaces, which
  // cannot be created during capture. Its effects are undone by restore().
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  c10::cuda::getCurrentCUDAStream().synchronize();
  {
    c10::cuda::CUDAStreamGuard guard(stream);
    runStep();
    restore(before);
    stream.synchronize();
    auto g = std::make_unique<Graph>();
    g->graph.capture_begin();
    runStep();
    g->graph.capture_end();
    graph_ = std::move(g);
    stream.synchronize();
  }
#else
  throw InputError("this build has no CUDA support: decode runs eagerly on the CPU");
#endif
}

void DecodeSession::step() {
  if (length_ >= capacity_)
    throw InputError("decode cache full: " + std::to_string(capacity_) + " positions");
#ifdef PARETO_WITH_CUDA
  if (graph_) {
    graph_->graph.replay();
    ++length_;
    return;
  }
#endif
  runStep();
  ++length_;
}

void DecodeSession::feed(const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions,
                         const std::vector<int64_t>& validFrom) {
  if (int64_t(tokens.size()) != batch_ || int64_t(positions.size()) != batch_ || int64_t(validFrom.size()) != batch_)
    throw InputError("decode feed needs one token, position and first slot per row (" + std::to_string(batch_) + ")");
  const int64_t vocab = model_.config().vocabSize;
  for (int64_t b = 0; b < batch_; ++b) {
    if (tokens[b] < 0 || tokens[b] >= vocab)
      throw InputError("token id " + std::to_string(tokens[b]) + " is outside the vocabulary (" + std::to_string(vocab) + ")");
    if (validFrom[b] < 0 || validFrom[b] > length_)
      throw InputError("first attended slot " + std::to_string(validFrom[b]) + " is past the slot being written");
  }
  auto host = [](const std::vector<int64_t>& v) { return at::tensor(v, at::TensorOptions().dtype(at::kLong)); };
  ids_.copy_(host(tokens));
  positions_.copy_(host(positions));
  validFrom_.copy_(host(validFrom));
}

void DecodeSession::fillRandomContext(int64_t length, uint64_t seed) {
  if (length < 0 || length >= capacity_)
    throw InputError("context of " + std::to_string(length) + " leaves no room in a cache of " +
                     std::to_string(capacity_) + " positions");
  at::manual_seed(seed);
  for (size_t l = 0; l < keys_.size(); ++l) {
    keys_[l].narrow(2, 0, length).normal_();
    values_[l].narrow(2, 0, length).normal_();
  }
  ids_.zero_();
  positions_.fill_(length);
  validFrom_.zero_();
  slot_.fill_(length);
  length_ = length;
}

DecodeSession::Snapshot DecodeSession::snapshot() const {
  return {ids_.clone(), positions_.clone(), slot_.clone(), validFrom_.clone(), length_};
}

void DecodeSession::restore(const Snapshot& s) {
  ids_.copy_(s.ids);
  positions_.copy_(s.positions);
  slot_.copy_(s.slot);
  validFrom_.copy_(s.validFrom);
  length_ = s.length;
}

int64_t DecodeSession::kvBytesPerStep() const {
  const ModelConfig& c = model_.config();
  const int64_t elem = keys_.empty() ? 0 : int64_t(keys_.front().element_size());
  return 2 * model_.numLayers() * batch_ * c.numKvHeads * c.headDim * elem * (length_ + 1);
}

namespace {

std::vector<std::vector<TokenId>> decodeGenerateUnguarded(const DecodeModel& model,
                                                          const std::vector<std::vector<TokenId>>& prompts,
                                                          int64_t maxNewTokens, const std::vector<TokenId>& eosTokenIds,
                                                          bool useGraph, const SamplingOptions& sampling) {
  const int64_t B = int64_t(prompts.size());
  std::vector<std::vector<TokenId>> out(prompts.size());
  if (B == 0 || maxNewTokens <= 0) return out;
  int64_t longest = 0;
  for (const auto& p : prompts) {
    if (p.empty()) throw InputError("generation needs non-empty prompts");
    longest = std::max<int64_t>(longest, int64_t(p.size()));
  }
  DecodeSession session(model, B, longest + maxNewTokens - 1);
  session.setSampling(sampling);
  if (!sampling.greedy) at::manual_seed(sampling.seed);
  if (useGraph && model.options().device.is_cuda()) session.capture();
  std::vector<int64_t> tokens(prompts.size()), positions(prompts.size()), validFrom(prompts.size());
  for (int64_t s = 0; s < longest; ++s) {
    for (int64_t b = 0; b < B; ++b) {
      const auto& p = prompts[size_t(b)];
      const int64_t pad = longest - int64_t(p.size());
      // A row still in its padding attends only to its own slot (finite, never read later).
      tokens[b] = s < pad ? p.front() : p[size_t(s - pad)];
      positions[b] = std::max<int64_t>(0, s - pad);
      validFrom[b] = std::min(pad, s);
    }
    session.feed(tokens, positions, validFrom);
    session.step();
  }
  for (int64_t i = 1; i < maxNewTokens; ++i) session.step();
  const at::Tensor gen = session.generated().narrow(1, longest, maxNewTokens).to(at::kCPU).contiguous();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* row = gen.data_ptr<int64_t>() + b * maxNewTokens;
    for (int64_t i = 0; i < maxNewTokens; ++i) {
      out[size_t(b)].push_back(row[i]);
      if (std::find(eosTokenIds.begin(), eosTokenIds.end(), row[i]) != eosTokenIds.end()) break;
    }
  }
  return out;
}

}  // namespace

std::vector<std::vector<TokenId>> decodeGenerate(const DecodeModel& model, const std::vector<std::vector<TokenId>>& prompts,
                                                 int64_t maxNewTokens, const std::vector<TokenId>& eosTokenIds,
                                                 bool useGraph, const SamplingOptions& sampling) {
  return guardMemory("generation (decode runtime)", "lower the batch (fewer prompts at once) or the number of new tokens",
                     [&] {
                       return decodeGenerateUnguarded(model, prompts, maxNewTokens, eosTokenIds, useGraph, sampling);
                     });
}

}  // namespace pareto
