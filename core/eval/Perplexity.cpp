#include "eval/Perplexity.h"

#include <ATen/ATen.h>

#include <cmath>

#include "model/OutOfMemory.h"
#include "util/Error.h"

namespace pareto {

PerplexityResult computePerplexity(const LlamaModel& model, const std::vector<TokenId>& tokens,
                                   const PerplexityOptions& opts, const ProgressCallback& progress,
                                   const CancelToken* cancel) {
  const int64_t W = opts.window;
  if (W < 2) throw InputError("perplexity window must be at least 2 tokens");
  if (W > model.config().maxPositionEmbeddings)
    throw InputError("window " + std::to_string(W) + " exceeds the model's " +
                     std::to_string(model.config().maxPositionEmbeddings) + " positions");
  const int64_t total = static_cast<int64_t>(tokens.size());
  int64_t windows = total / W;
  if (opts.maxWindows > 0) windows = std::min(windows, opts.maxWindows);
  if (windows == 0)
    throw InputError("the text has " + std::to_string(total) + " tokens, fewer than one window of " +
                     std::to_string(W));
  // Batches amortise the weight reads; on the CPU a few windows already saturate the cores.
  int64_t batch = opts.batch > 0 ? opts.batch : (model.options().device.is_cuda() ? 16 : 4);
  batch = std::min(batch, windows);
  // A forward holds the float32 logits of every window of the batch and their log-softmax.
  const double logitBytes = 2.0 * double(batch) * double(W) * double(model.config().vocabSize) * sizeof(float);
  if (!model.options().device.is_cuda())
    requireHostMemory("perplexity", logitBytes,
                      "lower --batch (windows per forward; " + std::to_string(batch) + " asked)");

  at::Tensor all = at::tensor(at::ArrayRef<int64_t>(tokens.data(), windows * W), at::TensorOptions().dtype(at::kLong))
                       .view({windows, W});
  double nllSum = 0;
  for (int64_t start = 0; start < windows; start += batch) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    const int64_t n = std::min(batch, windows - start);
    at::Tensor ids = all.narrow(0, start, n).to(model.options().device);
    at::Tensor logits = model.forward(ids);   // [n, W, V] float32
    at::Tensor logp = at::log_softmax(logits.narrow(1, 0, W - 1), -1);
    at::Tensor target = ids.narrow(1, 1, W - 1).unsqueeze(-1);
    nllSum += -logp.gather(-1, target).sum().to(at::kDouble).item<double>();
    if (progress)
      progress({"perplexity", double(start + n) / windows,
                "window " + std::to_string(start + n) + "/" + std::to_string(windows)});
  }
  PerplexityResult r;
  r.windows = windows;
  r.window = W;
  r.tokens = total;
  r.scoredTokens = windows * (W - 1);
  r.meanNll = nllSum / double(r.scoredTokens);
  r.ppl = std::exp(r.meanNll);
  return r;
}

}  // namespace pareto
