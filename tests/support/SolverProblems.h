// Synthetic (W, X, H = XᵀX) problems for the OBS-style solver tests (SparseGPT, GPTQ, SpQR) and the error
// measures they are judged by.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>

namespace pareto::test {

struct Problem {
  at::Tensor weight;   // [rows, cols] float32
  at::Tensor inputs;   // [samples, cols] float32
  at::Tensor hessian;  // inputsᵀ inputs, float32
};

// x = z (I + G/(2√n)) diag(scales): correlated inputs of very different sizes, with a Hessian conditioned well
// enough that float32 and float64 runs of an algorithm agree closely. A fraction `planted` of the weights is
// scaled by `factor` (outliers for SpQR); with planted = 0 no extra random numbers are drawn.
inline Problem correlatedProblem(int64_t rows, int64_t cols, int64_t samples, uint64_t seed, double planted = 0,
                                 double factor = 1) {
  at::manual_seed(seed);
  Problem p;
  p.weight = at::randn({rows, cols});
  if (planted > 0) p.weight = at::where(at::rand({rows, cols}) < planted, p.weight * factor, p.weight);
  const at::Tensor mixing = at::eye(cols) + 0.5 * at::randn({cols, cols}) / std::sqrt(double(cols));
  p.inputs = at::matmul(at::randn({samples, cols}), mixing) * at::exp(0.7 * at::randn({cols})).unsqueeze(0);
  p.hessian = at::matmul(p.inputs.t(), p.inputs);
  return p;
}

// Inputs that mostly live in a `rank`-dimensional subspace plus a little isotropic noise: the redundancy of LLM
// hidden states that lets the solvers move one column's error onto the columns after it.
inline Problem lowRankProblem(int64_t rows, int64_t cols, int64_t samples, int64_t rank, double noise, uint64_t seed) {
  at::manual_seed(seed);
  Problem p;
  p.weight = at::randn({rows, cols});
  const at::Tensor basis = at::randn({rank, cols}) / std::sqrt(double(rank));
  p.inputs = (at::matmul(at::randn({samples, rank}), basis) + noise * at::randn({samples, cols})) *
             at::exp(0.7 * at::randn({cols})).unsqueeze(0);
  p.hessian = at::matmul(p.inputs.t(), p.inputs);
  return p;
}

// ‖(W − Ŵ) Xᵀ‖ / ‖W Xᵀ‖ in float64.
inline double reconstructionError(const Problem& p, const at::Tensor& compressed) {
  const at::Tensor x = p.inputs.to(at::kDouble), w = p.weight.to(at::kDouble);
  const at::Tensor delta = w - compressed.to(at::kDouble).cpu();
  return at::matmul(delta, x.t()).norm().item<double>() / at::matmul(w, x.t()).norm().item<double>();
}

inline double relativeDifference(const at::Tensor& actual, const at::Tensor& expected) {
  const at::Tensor a = actual.to(at::kDouble).cpu(), e = expected.to(at::kDouble).cpu();
  return (a - e).norm().item<double>() / e.norm().item<double>();
}

}  // namespace pareto::test
