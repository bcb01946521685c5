// What the OBS-style solvers (SparseGPT, GPTQ, SpQR) share: the damped inverse Cholesky factor they all sweep
// with (their input checks are in compress/SolverInputs.h).
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
  at::Tensor inverse;    // (H + λI)⁻¹ itself
  Damping damping;
};

// Adds λ = damp · mean(diag H) to the diagonal of `hessian` (in place), growing λ tenfold up to maxRetries times
// while a factorisation fails, as the IST-DASLab reference does. Throws Error naming `who` and `method` when
// even the largest damping fails.
DampedInverse dampedInverse(at::Tensor& hessian, double damp, int maxRetries, const std::string& who,
                            const std::string& method);

// One step of the OBS sweep with lazy blocks (IST-DASLab `fasterprune` / `fasterquant`): column i of `block`
// (the current lazy block of W, columns i1 .. i1+count) was `original` and is now fixed to `fixed`; its error
// scaled by U_ii goes to errors[:, i] and `losses`, and is compensated on the block's later columns.
void obsFixColumn(const at::Tensor& block, const at::Tensor& hinvBlock, int64_t i, const at::Tensor& original,
                  const at::Tensor& fixed, const at::Tensor& errors, const at::Tensor& losses);
// After a lazy block [i1, i1 + count): its accumulated errors update every later column of `w` in one product.
void obsPropagateBlock(const at::Tensor& w, const at::Tensor& errors, const at::Tensor& hinv, int64_t i1,
                       int64_t count);

// "0.01", "1e-08": short numbers for messages.
std::string shortDecimal(double value);

}  // namespace pareto
