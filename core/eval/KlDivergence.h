// KL divergence to the dense model (DESIGN.md "Definitions"): at every predicted position, KL(P_dense ‖ P_model)
// = Σ_v p_dense(v) · (log p_dense(v) − log p_model(v)) over the full vocabulary, in nats; reported as the mean
// over positions and the 99th percentile, as llama.cpp's `llama-perplexity --kl-divergence` reports "Mean KLD"
// and "99.0% KLD" (its percentile interpolates linearly between the sorted values at fraction · (n − 1)).
//
// Callers compare the two models' logits position by position, a batch at a time, and keep only the per-token
// values (KlAccumulator), never the logits of a whole text.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace pareto {

// Per-position KL(P_dense ‖ P_model) of two [N, V] logit tensors on one device, computed in float64: a float64
// tensor [N] on the CPU. Rows go through in chunks so that the float64 copies stay small for 100k+ vocabularies.
// Identical rows give exactly 0.
at::Tensor tokenKlDivergence(const at::Tensor& denseLogits, const at::Tensor& modelLogits);

// The value at `fraction` (0..1) of `values` sorted ascending, interpolated linearly at fraction · (n − 1)
// (llama.cpp's percentile of its per-token KL values). Throws Error for an empty list.
double percentileOfSorted(const std::vector<double>& sorted, double fraction);

struct KlDivergenceSummary {
  double mean = 0;       // nats per position
  double p99 = 0;        // the 99th percentile of the per-position values
  int64_t positions = 0;
};

// Collects the per-position values batch by batch and summarizes them.
class KlAccumulator {
 public:
  void add(const at::Tensor& perPosition);   // float64 [N] on the CPU (tokenKlDivergence's result)
  int64_t positions() const { return static_cast<int64_t>(values_.size()); }
  // Throws Error when nothing was added.
  KlDivergenceSummary summary() const;

 private:
  std::vector<double> values_;
};

}  // namespace pareto
