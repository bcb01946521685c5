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

// The final hidden state of every batch of windows ([n, W] ids each), block by block: a streamed model reads each
// block once for all windows and frees it before the next.
std::unique_ptr<ActivationStore> finalHiddenStates(const LlamaModel& model, const std::vector<at::Tensor>& batches,
                                                   const PerplexityOptions& opts, const std::string& which,
                                                   const ProgressCallback& progress, const CancelToken* cancel) {
  std::vector<std::vector<int64_t>> shapes;
  for (const at::Tensor& ids : batches) shapes.push_back({ids.size(0), ids.size(1), model.config().hiddenSize});
  auto store = std::make_unique<ActivationStore>(opts.activations, shapes, model.options().dtype, model.options().device,
                                                 opts.scratchDir);
  for (size_t i = 0; i < batches.size(); ++i) store->put(i, model.embed(batches[i]));
  const int64_t layers = model.numLayers();
  for (int64_t layer = 0; layer < layers; ++layer) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    model.loadLayer(layer);
    for (size_t i = 0; i < batches.size(); ++i) {
      const LlamaModel::Context ctx = model.prepare(batches[i].size(0), batches[i].size(1), nullptr, nullptr);
      store->put(i, model.block(layer, store->get(i), ctx));
    }
    model.releaseLayer(layer);
    if (progress)
      progress({"perplexity", double(layer + 1) / double(layers),
                which + " layer " + std::to_string(layer + 1) + "/" + std::to_string(layers)});
  }
  return store;
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
  // Streamed models first carry every window through all blocks; the heads then run batch by batch as below.
  const bool streamed = model.streamed() || (dense != nullptr && dense->streamed());
  std::vector<at::Tensor> batches;
  for (int64_t start = 0; start < windows; start += batch)
    batches.push_back(all.narrow(0, start, std::min(batch, windows - start)).to(model.options().device));
  std::unique_ptr<ActivationStore> modelHidden, denseHidden;
  if (streamed) {
    modelHidden = finalHiddenStates(model, batches, opts, "model", progress, cancel);
    model.loadHead();
    if (dense != nullptr) {
      std::vector<at::Tensor> denseBatches;
      for (const at::Tensor& ids : batches) denseBatches.push_back(ids.to(dense->options().device));
      denseHidden = finalHiddenStates(*dense, denseBatches, opts, "dense model", progress, cancel);
      dense->loadHead();
    }
  }
  for (size_t b = 0; b < batches.size(); ++b) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    const at::Tensor& ids = batches[b];
    const int64_t start = static_cast<int64_t>(b) * batch, n = ids.size(0);
    at::Tensor logits = streamed ? model.head(modelHidden->get(b)) : model.forward(ids);   // [n, W, V] float32
    modelNll += nllSum(logits, ids);
    if (dense != nullptr) {
      at::Tensor denseIds = ids.to(dense->options().device);
      at::Tensor denseLogits = streamed ? dense->head(denseHidden->get(b)) : dense->forward(denseIds);
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
