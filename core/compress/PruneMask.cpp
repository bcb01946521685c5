#include "compress/PruneMask.h"

#include <ATen/ATen.h>

#include <cmath>

namespace pareto {
namespace {

// Removes the `count` smallest entries along the last dimension of `scores`.
at::Tensor keepAllButSmallest(const at::Tensor& scores, int64_t count) {
  at::Tensor keep = at::ones(scores.sizes(), scores.options().dtype(at::kBool));
  if (count <= 0) return keep;
  const at::Tensor removed = std::get<1>(at::topk(scores, count, /*dim=*/-1, /*largest=*/false, /*sorted=*/false));
  keep.scatter_(-1, removed, false);
  return keep;
}

// floor(s · count), guarding against s·count landing just below an integer in binary (0.3 · 10).
int64_t removedCount(double sparsity, int64_t count) {
  return int64_t(std::floor(sparsity * double(count) + 1e-9));
}

}  // namespace

at::Tensor keepMaskFromScores(const at::Tensor& scores, const SparsityPattern& pattern, UnstructuredScope scope) {
  const int64_t rows = scores.size(0), cols = scores.size(1);
  if (pattern.isNM()) {
    const int64_t m = pattern.m();
    return keepAllButSmallest(scores.reshape({rows, cols / m, m}), m - pattern.n()).view({rows, cols});
  }
  if (scope == UnstructuredScope::PerRow) return keepAllButSmallest(scores, removedCount(pattern.sparsity(), cols));
  // The whole tensor is one slice: a full sort of the flattened scores, whose first `count` entries go.
  const int64_t count = removedCount(pattern.sparsity(), rows * cols);
  at::Tensor keep = at::ones({rows * cols}, scores.options().dtype(at::kBool));
  if (count > 0) {
    const at::Tensor order = std::get<1>(scores.reshape({rows * cols}).sort(/*dim=*/0, /*descending=*/false));
    keep.index_fill_(0, order.narrow(0, 0, count), false);
  }
  return keep.view({rows, cols});
}

}  // namespace pareto
