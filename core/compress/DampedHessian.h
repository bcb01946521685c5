// What the OBS-style solvers (SparseGPT, GPTQ, SpQR) share: the damped inverse Cholesky factor they all sweep
// with (the sweep is compress/ObsSweep.h, their input checks are in compress/SolverInputs.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace pareto {

struct Damping {
  double damp = 0;     // the fraction of mean(diag H) finally used (requested · 10^retries)
  double lambda = 0;   // the absolute value added to the diagonal
  int retries = 0;     // > 0: H + λI was (numerically) not positive definite at the requested damping
};

struct DampedInverse {
  at::Tensor upper;      // upper Cholesky factor U of (H + λI)⁻¹: row i is the OBS update after fixing column i
  Damping damping;
  // diag (H + λI)⁻¹ = the column sums of U ⊙ U (as Uᵀ U is the inverse): the inverse itself is never formed.
  at::Tensor inverseDiagonal() const;
};

// Adds λ = damp · mean(diag H) to the diagonal of `hessian` (in place), growing λ tenfold up to maxRetries times
// while a factorisation fails, as the IST-DASLab reference does. Throws Error naming `who` and `method` when
// even the largest damping fails.
DampedInverse dampedInverse(at::Tensor& hessian, double damp, int maxRetries, const std::string& who,
                            const std::string& method);

// "0.01", "1e-08": short numbers for messages.
std::string shortDecimal(double value);

}  // namespace pareto
