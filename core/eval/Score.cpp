#include "eval/Score.h"

#include <ATen/ATen.h>

#include "util/Error.h"

namespace pareto {

ScoreResult scoreSequence(const LlamaModel& model, const std::vector<TokenId>& ids) {
  if (ids.empty()) throw InputError("nothing to score: the sequence is empty");
  if (static_cast<int64_t>(ids.size()) > model.config().maxPositionEmbeddings)
    throw InputError("sequence of " + std::to_string(ids.size()) + " tokens exceeds the model's " +
                     std::to_string(model.config().maxPositionEmbeddings) + " positions");
  at::Tensor input = at::tensor(ids, at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
  at::Tensor logits = model.forward(input).squeeze(0).to(at::kCPU);   // [T, V]
  const int64_t T = logits.size(0);
  ScoreResult r;
  if (T > 1) {
    at::Tensor logp = at::log_softmax(logits.narrow(0, 0, T - 1).to(at::kDouble), -1);
    at::Tensor target = input.narrow(1, 1, T - 1).reshape({T - 1, 1});
    r.nllSum = -logp.gather(-1, target).sum().item<double>();
  }
  r.lastLogits = logits[T - 1].contiguous();
  at::Tensor top = std::get<1>(r.lastLogits.topk(std::min<int64_t>(10, r.lastLogits.size(0))));
  for (int64_t i = 0; i < top.size(0); ++i) r.lastTop10.push_back(top[i].item<int64_t>());
  return r;
}

}  // namespace pareto
