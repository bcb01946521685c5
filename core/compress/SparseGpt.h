// SparseGPT (Frantar & Alistarh 2023): prune column by column in the order of the inputs and after each column
// update the not-yet-pruned ones to compensate (Optimal Brain Surgeon through the upper Cholesky factor of H⁻¹),
// in lazy blocks so that the bulk of the update is one matrix product per block. This is IST-DASLab's
// `SparseGPT.fasterprune` step for step, with one deliberate difference: an unstructured block removes exactly
// floor(s · count) weights, where the reference's `score <= sorted[floor(s · count)]` removes one more (and every
// tie), which also made s = 0 prune.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <string>

#include "compress/PruneResult.h"
#include "compress/SparsityPattern.h"

namespace pareto {

struct SparseGptOptions {
  double damp = 0.01;       // λ = damp · mean(diag H) is added to the diagonal; must be > 0
  int64_t blockSize = 128;  // columns per lazy block; a multiple of M for N:M
  int maxDampRetries = 4;   // times λ is multiplied by 10 when H + λI is not positive definite
};

struct SparseGptReport {
  double damp = 0;          // the damping fraction finally used (options.damp · 10^dampRetries)
  double lambda = 0;        // the absolute value added to the diagonal
  int dampRetries = 0;      // how often λ had to grow; > 0 means H was (numerically) not positive definite
  int64_t deadInputs = 0;   // inputs with H_ii == 0: never active, so their weights were set to 0
  // Σ ½ (w − q)² / [H⁻¹]ᵢᵢ over pruned weights (the reference's `Losses`): with exact arithmetic this is
  // ½ tr(ΔW (H + λI) ΔWᵀ), the objective increase the solver caused.
  double loss = 0;
};

struct SparseGptResult {
  PruneResult pruned;
  SparseGptReport report;
};

// weight: [out, in] floating, any device (the work runs there, in float32; the result has weight's dtype).
// hessian: [in, in] Σ x xᵀ (sum or mean; the scale does not matter), any floating dtype and device; it is copied,
// never modified. Unstructured chooses the mask per block: in each block of columns the floor(s · rows · cols)
// smallest w² / [H⁻¹]ᵢᵢ² are removed. N:M chooses each group of M columns from the same score just before the
// group is pruned. Throws InputError naming the module for bad input and Error when H stays non-positive-definite
// after every retry or the result would not be finite.
SparseGptResult sparseGptPrune(const at::Tensor& weight, const at::Tensor& hessian, const SparsityPattern& pattern,
                               const SparseGptOptions& options = {}, const std::string& moduleName = {});

}  // namespace pareto
