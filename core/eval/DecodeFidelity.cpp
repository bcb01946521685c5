#include "eval/DecodeFidelity.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "eval/Continuations.h"
#include "eval/KlDivergence.h"
#include "model/LoadedModel.h"
#include "util/Error.h"

namespace pareto {
namespace {

struct TokenScores {
  // One per continuation token, sequences one after another.
  std::vector<double> nll, denseNll;   // the compressed and the dense model's
  std::vector<TokenId> argmax;         // the compressed model's
  at::Tensor kl;                       // float64 [positions]: KL(P_dense ‖ P_compressed)
};

// The final hidden states of `model` at the positions that predict continuation tokens, and those tokens: the
// logits at position p+j-1 predict token j. One forward over prompt+continuation gives exactly the logits that
// step-by-step decoding with the cache would, because causal attention lets position p+j-1 see only the tokens
// up to it. Sequences are right-padded; the padding comes after every scored position, so it never reaches them.
std::pair<at::Tensor, at::Tensor> predictingStates(const LlamaModel& model,
                                                   const std::vector<std::vector<TokenId>>& prompts,
                                                   const std::vector<std::vector<TokenId>>& continuations) {
  const int64_t B = static_cast<int64_t>(prompts.size());
  int64_t width = 0;
  for (int64_t b = 0; b < B; ++b)
    width = std::max<int64_t>(width, static_cast<int64_t>(prompts[b].size() + continuations[b].size()) - 1);
  std::vector<int64_t> flat(static_cast<size_t>(B * width), 0);
  std::vector<int64_t> rows, targets;
  for (int64_t b = 0; b < B; ++b) {
    const auto& p = prompts[b];
    const auto& c = continuations[b];
    auto out = flat.begin() + b * width;
    out = std::copy(p.begin(), p.end(), out);
    std::copy(c.begin(), c.end() - 1, out);   // the last token is only predicted, never consumed
    for (size_t j = 0; j < c.size(); ++j) {
      rows.push_back(b * width + static_cast<int64_t>(p.size() + j) - 1);
      targets.push_back(c[j]);
    }
  }
  const auto longOpts = at::TensorOptions().dtype(at::kLong);
  at::Tensor ids = at::tensor(flat, longOpts).view({B, width});
  LlamaModel::Context ctx = model.prepare(B, width, nullptr, nullptr);
  at::Tensor x = model.embed(ids);
  for (int64_t l = 0; l < model.numLayers(); ++l) x = model.block(l, x, ctx);
  const auto device = x.device();
  at::Tensor picked = x.reshape({B * width, x.size(-1)}).index_select(0, at::tensor(rows, longOpts).to(device));
  return {picked, at::tensor(targets, longOpts).to(device)};
}

std::vector<double> doubles(const std::vector<at::Tensor>& parts) {
  at::Tensor t = at::cat(parts).to(at::kCPU, at::kDouble).contiguous();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

// Teacher-forced scores of every continuation token by both models, and the KL between their distributions.
TokenScores scoreContinuations(const LlamaModel& dense, const LlamaModel& compressed,
                               const std::vector<std::vector<TokenId>>& prompts,
                               const std::vector<std::vector<TokenId>>& continuations) {
  const auto [compressedStates, wanted] = predictingStates(compressed, prompts, continuations);
  const auto [denseStates, denseWanted] = predictingStates(dense, prompts, continuations);

  // The head in chunks keeps [positions, vocab] logits small for 100k+ vocabularies.
  constexpr int64_t kChunk = 512;
  const int64_t n = compressedStates.size(0);
  std::vector<at::Tensor> nlls, denseNlls, argmaxes, kls;
  auto nllOf = [](const at::Tensor& logits, const at::Tensor& target) {
    return (at::logsumexp(logits, {-1}) - logits.gather(1, target).squeeze(1)).to(at::kCPU, at::kDouble);
  };
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t len = std::min(kChunk, n - start);
    at::Tensor logits = compressed.head(compressedStates.narrow(0, start, len).unsqueeze(0)).squeeze(0);   // [len, V]
    at::Tensor denseLogits = dense.head(denseStates.narrow(0, start, len).unsqueeze(0)).squeeze(0);
    nlls.push_back(nllOf(logits, wanted.narrow(0, start, len).unsqueeze(1)));
    denseNlls.push_back(nllOf(denseLogits, denseWanted.narrow(0, start, len).unsqueeze(1)));
    argmaxes.push_back(logits.argmax(-1).to(at::kCPU, at::kLong));
    kls.push_back(tokenKlDivergence(denseLogits, logits.to(denseLogits.device())));
  }
  TokenScores s;
  s.nll = doubles(nlls);
  s.denseNll = doubles(denseNlls);
  at::Tensor arg = at::cat(argmaxes).contiguous();
  s.argmax.assign(arg.data_ptr<int64_t>(), arg.data_ptr<int64_t>() + n);
  s.kl = at::cat(kls).contiguous();
  return s;
}

int64_t sharedPrefixLength(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<int64_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

}  // namespace

void requireComparable(const LlamaModel& dense, const LlamaModel& compressed) {
  const ModelConfig& d = dense.config();
  const ModelConfig& c = compressed.config();
  auto refuse = [](const std::string& what, int64_t a, int64_t b) {
    throw InputError("the dense and the compressed model differ in " + what + " (" + std::to_string(a) + " vs " +
                     std::to_string(b) + "): a compressed model must keep its reference's shape");
  };
  if (d.vocabSize != c.vocabSize) refuse("vocabulary size", d.vocabSize, c.vocabSize);
  if (d.hiddenSize != c.hiddenSize) refuse("hidden size", d.hiddenSize, c.hiddenSize);
  if (d.numLayers != c.numLayers) refuse("number of layers", d.numLayers, c.numLayers);
}

std::vector<std::vector<TokenId>> comparablePromptIds(const LoadedModel& dense, const LoadedModel& compressed,
                                                      const std::vector<std::string>& prompts) {
  try {
    requireComparable(*dense.model, *compressed.model);
  } catch (const InputError& e) {
    throw InputError(fileMessage(compressed.directory, std::string(e.what()) + " (dense: " + dense.directory + ")"));
  }
  std::vector<std::vector<TokenId>> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(dense.promptIds(prompts[i]));
    if (compressed.promptIds(prompts[i]) != ids.back())
      throw InputError(fileMessage(compressed.directory, "its tokenizer encodes prompt " + std::to_string(i + 1) +
                                                             " differently from the dense model's (" +
                                                             dense.directory + "): compare models that share one"));
  }
  return ids;
}

size_t checkComparisonInputs(const std::string& what, const LlamaModel& dense, const LlamaModel& compressed,
                             const std::vector<std::vector<TokenId>>& prompts, int64_t steps,
                             const std::string& stepsName, int64_t requestedBatch) {
  requireComparable(dense, compressed);
  if (prompts.empty()) throw InputError(what + " needs at least one prompt");
  if (steps < 1) throw InputError(what + " needs " + stepsName + " >= 1");
  // Checked before anything is allocated or generated: the per-step tables and the KV cache both grow with it.
  const int64_t positions = dense.config().maxPositionEmbeddings;
  for (const auto& p : prompts) {
    if (p.empty()) throw InputError(what + " needs non-empty prompts");
    if (steps > positions - static_cast<int64_t>(p.size()))
      throw InputError(what + ": a prompt of " + std::to_string(p.size()) + " tokens plus " + stepsName + " " +
                       std::to_string(steps) + " exceed the model's " + std::to_string(positions) +
                       " positions (max_position_embeddings); lower " + stepsName + " or use shorter prompts");
  }
  return static_cast<size_t>(requestedBatch > 0 ? requestedBatch : (dense.options().device.is_cuda() ? 64 : 8));
}

FidelityResult decodeFidelity(const LlamaModel& dense, const LlamaModel& compressed,
                              const std::vector<std::vector<TokenId>>& prompts, const DecodeFidelityOptions& opts,
                              const ProgressCallback& progress, const CancelToken* cancel) {
  const auto start = std::chrono::steady_clock::now();
  const size_t batch = checkComparisonInputs("decode fidelity", dense, compressed, prompts, opts.maxNewTokens,
                                             "max new tokens", opts.batch);

  FidelityResult r;
  r.prompts = static_cast<int64_t>(prompts.size());
  double nllSum = 0, denseNllSum = 0;
  int64_t agreements = 0;
  KlAccumulator kl;
  for (size_t first = 0; first < prompts.size(); first += batch) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    const size_t last = std::min(prompts.size(), first + batch);
    const ContinuationBatch b = continuationsOf(dense, compressed, prompts, first, last, opts.maxNewTokens,
                                                opts.eosTokenIds, batch, opts.continuations);
    const TokenScores scores = scoreContinuations(dense, compressed, b.prompts, b.dense);
    kl.add(scores.kl);
    const double* klValues = scores.kl.data_ptr<double>();

    size_t k = 0;   // index into the flattened scores
    for (size_t i = 0; i < b.prompts.size(); ++i) {
      PromptFidelity p;
      p.promptTokens = static_cast<int64_t>(b.prompts[i].size());
      p.denseTokens = static_cast<int64_t>(b.dense[i].size());
      p.compressedTokens = static_cast<int64_t>(b.compressed[i].size());
      for (TokenId tok : b.dense[i]) {
        p.nllSum += scores.nll[k];
        p.denseNllSum += scores.denseNll[k];
        p.klSum += klValues[k];
        p.agreements += scores.argmax[k] == tok ? 1 : 0;
        ++k;
      }
      p.sharedPrefix = sharedPrefixLength(b.dense[i], b.compressed[i]);
      nllSum += p.nllSum;
      denseNllSum += p.denseNllSum;
      agreements += p.agreements;
      r.continuationTokens += p.denseTokens;
      r.perPrompt.push_back(p);
    }
    if (progress)
      progress({"decode fidelity", double(last) / prompts.size(),
                std::to_string(last) + "/" + std::to_string(prompts.size()) + " prompts"});
  }

  const double tokens = static_cast<double>(r.continuationTokens);
  r.decodeNll = nllSum / tokens;
  r.denseNll = denseNllSum / tokens;
  r.top1Agreement = agreements / tokens;
  const KlDivergenceSummary klSummary = kl.summary();
  r.klMean = klSummary.mean;
  r.klP99 = klSummary.p99;
  std::vector<int64_t> shared;
  int64_t fullMatches = 0;
  for (const auto& p : r.perPrompt) {
    shared.push_back(p.sharedPrefix);
    fullMatches += p.sharedPrefix == p.denseTokens ? 1 : 0;
  }
  std::sort(shared.begin(), shared.end());
  double sum = 0;
  for (int64_t s : shared) sum += static_cast<double>(s);
  const size_t n = shared.size();
  r.sharedPrefixMean = sum / n;
  r.sharedPrefixMedian = n % 2 == 1 ? double(shared[n / 2]) : 0.5 * double(shared[n / 2 - 1] + shared[n / 2]);
  r.sharedPrefixMin = shared.front();
  r.sharedPrefixMax = shared.back();
  r.fullMatchFraction = double(fullMatches) / n;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace pareto
