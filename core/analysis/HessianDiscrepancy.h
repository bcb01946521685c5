// Hessian discrepancy (DESIGN.md, "Definitions"): how far a calibration Hessian H_c is from the target H_t that
// the compressed module will really see, δ = ‖H_t^{-1/2} (H_c − H_t) H_t^{-1/2}‖₂. It bounds the relative error
// of the calibration objective tr(ΔW H_c ΔWᵀ) against the target one, for every weight change ΔW.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <string>
#include <vector>

namespace pareto {

struct DiscrepancyOptions {
  double damp = 0.01;        // λ = damp · mean(diag H_t) is added to H_t before factorising
  double tolerance = 1e-3;   // relative accuracy of δ
  int maxIterations = 300;   // Lanczos steps before giving up with converged = false
  uint64_t seed = 0;         // start vector; the same seed gives the same δ
};

struct DiscrepancyResult {
  double delta = 0;              // largest |eigenvalue| of L⁻¹ (H_c − H_t) L⁻ᵀ
  double extremeEigenvalue = 0;  // that eigenvalue with its sign: > 0 where calibration over-weights a direction
  int iterations = 0;            // Lanczos steps (operator applications)
  bool converged = false;
  double dampUsed = 0;           // the damp that factorised (options.damp, or 10×, 100× … after failures)
};

// calibration, target: [n, n] symmetric Hessians, each already divided by its weight sum, same n; any floating
// dtype; the calibration is moved to the target's device. H_t + λI = LLᵀ is factorised (retrying with 10× the
// damping a few times when that fails) and δ is the spectral norm of L⁻¹ (H_c − H_t) L⁻ᵀ, found by Lanczos
// with two triangular solves per step; no inverse is formed.
//
// Dead inputs (H_t[j][j] = 0, an input the target never excites) are handled by the damping: their direction
// gets λ in the factor, so a calibration that does excite input j contributes H_c[j][j]/λ to δ — a large value,
// which is the point: such a calibration spends its error budget on a direction the target does not use.
//
// Throws InputError naming `moduleName` for bad shapes or a target that is zero or not finite, Error when even
// the largest damping does not factorise.
DiscrepancyResult hessianDiscrepancy(const at::Tensor& calibration, const at::Tensor& target,
                                     const DiscrepancyOptions& options = {}, const std::string& moduleName = {});

// The study's summary over modules: the fraction of modules where δ(decode) < δ(text) and the median of
// δ(text)/δ(decode) (a ratio is +inf where only δ(decode) is 0, 1 where both are). NaN for both with no modules.
struct DiscrepancySummary {
  double fractionDecodeSmaller = 0;
  double medianRatio = 0;
  int modules = 0;
};
// Throws InputError when the lists differ in length or hold a negative or NaN δ.
DiscrepancySummary summarizeDiscrepancies(const std::vector<double>& deltaText, const std::vector<double>& deltaDecode);

}  // namespace pareto
