#include "eval/Perplexity.h"

#include <ATen/ATen.h>

#include <cmath>

#include "model/LoadedModel.h"
#include "model/OutOfMemory.h"
#include "util/Error.h"

namespace pareto {
namespace {

// The summed NLL of a batch's next-token predictions: logits [n, W, V] of windows `ids` [n, W].
double nllSum(const at::Tensor& logits, const at::Tensor& ids) {
  const int64_t W = ids.size(1);
  at::Tensor logp = at::log_softmax(logits.narrow(1, 0, W - 1), -1);
  at::Tensor target = ids.narrow(1, 1, W - 1).unsqueeze(-1);
  return -logp.gather(-1, target).sum().to(at::kDouble).item<double>();
}

}  // namespace

std::vector<TokenId> comparableTextIds(const LoadedModel& dense, const LoadedModel& model, const std::string& textFile) {
  const std::string why = ": KL divergence compares two models that read the same tokens";
  if (dense.config.vocabSize != model.config.vocabSize)
    throw InputError(fileMessage(model.directory, "its vocabulary has " + std::to_string(model.config.vocabSize) +
                                                      " entries and the dense model's (" + dense.directory + ") " +
                                                      std::to_string(dense.config.vocabSize) + why));
  std::vector<TokenId> ids = encodeTextFile(*model.tokenizer, textFile, /*addSpecialTokens=*/false);
  if (encodeTextFile(*dense.tokenizer, textFile, /*addSpecialTokens=*/false) != ids)
    throw InputError(fileMessage(model.directory, "its tokenizer encodes " + textFile +
                                                      " differently from the dense model's (" + dense.directory +
                                                      ")" + why));
  return ids;
}

PerplexityResult computePerplexity(const LlamaModel& model, const std::vector<TokenId>& tokens,
                                   const PerplexityOptions& opts, const ProgressCallback& progress,
                                   const CancelToken* cancel) {
  const int64_t W = opts.window;
  if (W < 2) throw InputError("perplexity window must be at least 2 tokens");
  if (W > model.config().maxPositionEmbeddings)
    throw InputError("window " + std::to_string(W) + " exceeds the model's " +
                     std::to_string(model.config().maxPositionEmbeddings) + " positions");
  const LlamaModel* dense = opts.dense;
  if (dense != nullptr) {
    if (dense->config().vocabSize != model.config().vocabSize)
      throw InputError("the dense model's vocabulary has " + std::to_string(dense->config().vocabSize) +
                       " entries, the model's " + std::to_string(model.config().vocabSize) +
                       ": KL divergence needs one vocabulary");
    if (W > dense->config().maxPositionEmbeddings)
      throw InputError("window " + std::to_string(W) + " exceeds the dense model's " +
                       std::to_string(dense->config().maxPositionEmbeddings) + " positions");
  }
  const int64_t total = static_cast<int64_t>(tokens.size());
  int64_t windows = total / W;
  if (opts.maxWindows > 0) windows = std::min(windows, opts.maxWindows);
  if (windows == 0)
    throw InputError("the text has " + std::to_string(total) + " tokens, fewer than one window of " +
                     std::to_string(W));
  // Batches amortise the weight reads; on the CPU a few windows already saturate the cores.
  int64_t batch = opts.batch > 0 ? opts.batch : (model.options().device.is_cuda() ? 16 : 4);
  batch = std::min(batch, windows);
  // A forward holds the float32 logits of every window of the batch and their log-softmax; with the dense
  // model, its logits too.
  const double logitBytes = (dense != nullptr ? 4.0 : 2.0) * double(batch) * double(W) *
                            double(model.config().vocabSize) * sizeof(float);
  if (!model.options().device.is_cuda())
    requireHostMemory("perplexity", logitBytes,
                      "lower --batch (windows per forward; " + std::to_string(batch) + " asked)");

  at::Tensor all = at::tensor(at::ArrayRef<int64_t>(tokens.data(), windows * W), at::TensorOptions().dtype(at::kLong))
                       .view({windows, W});
  double modelNll = 0, denseNll = 0;
  KlAccumulator kl;
  for (int64_t start = 0; start < windows; start += batch) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    const int64_t n = std::min(batch, windows - start);
    at::Tensor ids = all.narrow(0, start, n).to(model.options().device);
    at::Tensor logits = model.forward(ids);   // [n, W, V] float32
    modelNll += nllSum(logits, ids);
    if (dense != nullptr) {
      at::Tensor denseIds = ids.to(dense->options().device);
      at::Tensor denseLogits = dense->forward(denseIds);
      denseNll += nllSum(denseLogits, denseIds);
      const int64_t V = logits.size(-1);
      kl.add(tokenKlDivergence(denseLogits.narrow(1, 0, W - 1).reshape({n * (W - 1), V}),
                               logits.narrow(1, 0, W - 1).reshape({n * (W - 1), V}).to(denseLogits.device())));
    }
    if (progress)
      progress({"perplexity", double(start + n) / windows,
                "window " + std::to_string(start + n) + "/" + std::to_string(windows)});
  }
  PerplexityResult r;
  r.windows = windows;
  r.window = W;
  r.tokens = total;
  r.scoredTokens = windows * (W - 1);
  r.meanNll = modelNll / double(r.scoredTokens);
  r.ppl = std::exp(r.meanNll);
  if (dense != nullptr) {
    r.klToDense = kl.summary();
    r.denseMeanNll = denseNll / double(r.scoredTokens);
    r.densePpl = std::exp(*r.denseMeanNll);
  }
  return r;
}

}  // namespace pareto
