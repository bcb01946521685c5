#include "eval/KlDivergence.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "util/Error.h"

namespace pareto {

at::Tensor tokenKlDivergence(const at::Tensor& denseLogits, const at::Tensor& modelLogits) {
  if (denseLogits.dim() != 2 || denseLogits.sizes() != modelLogits.sizes())
    throw Error("KL divergence needs two [positions, vocab] logit tensors of one shape");
  // A few million float64 values per chunk: [512, 8192] or [32, 150k].
  constexpr int64_t kChunkValues = int64_t{1} << 22;
  const int64_t n = denseLogits.size(0), vocab = std::max<int64_t>(1, denseLogits.size(1));
  const int64_t rows = std::max<int64_t>(1, kChunkValues / vocab);
  std::vector<at::Tensor> parts;
  for (int64_t start = 0; start < n; start += rows) {
    const int64_t len = std::min(rows, n - start);
    at::Tensor logPd = at::log_softmax(denseLogits.narrow(0, start, len).to(at::kDouble), -1);
    at::Tensor logPm = at::log_softmax(modelLogits.narrow(0, start, len).to(at::kDouble), -1);
    parts.push_back((logPd.exp() * (logPd - logPm)).sum(-1).to(at::kCPU));
  }
  if (parts.empty()) return at::zeros({0}, at::TensorOptions().dtype(at::kDouble));
  return at::cat(parts).contiguous();
}

double percentileOfSorted(const std::vector<double>& sorted, double fraction) {
  if (sorted.empty()) throw Error("percentile of an empty list");
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  const double position = fraction * double(sorted.size() - 1);
  const size_t below = static_cast<size_t>(position);
  const double t = position - double(below);
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return (1 - t) * sorted[below] + t * sorted[above];
}

void KlAccumulator::add(const at::Tensor& perPosition) {
  at::Tensor v = perPosition.to(at::kCPU, at::kDouble).contiguous();
  values_.insert(values_.end(), v.data_ptr<double>(), v.data_ptr<double>() + v.numel());
}

KlDivergenceSummary KlAccumulator::summary() const {
  if (values_.empty()) throw Error("KL divergence over no positions");
  std::vector<double> sorted = values_;
  std::sort(sorted.begin(), sorted.end());
  KlDivergenceSummary s;
  s.positions = positions();
  s.mean = std::accumulate(values_.begin(), values_.end(), 0.0) / double(values_.size());
  s.p99 = percentileOfSorted(sorted, 0.99);
  return s;
}

}  // namespace pareto
