// GPTQ (Frantar et al. 2023): quantize column by column in input order and after each column update the
// not-yet-quantized ones to compensate (Optimal Brain Quantization through the upper Cholesky factor of H⁻¹), in
// lazy blocks so that the bulk of the update is one matrix product per block. This is IST-DASLab's
// `GPTQ.fasterquant` step for step, on the grids of compress/QuantGrid.h (symmetric codes are signed, not the
// reference's unsigned-with-midpoint), with these choices:
//   - tensor and channel grids are computed once up front from W (after dead inputs are zeroed);
//   - groups, dynamic (the reference default): a group's grid is computed when the sweep reaches its first column,
//     from the current, fully error-updated W, whatever the block size (the reference reads it from W, which lacks
//     the updates of the current lazy block's earlier columns; the two agree when g is a multiple of the block
//     size, e.g. the default g128 with blocks of 128);
//   - groups, static (`static_groups=True`): every group's grid is computed up front from the original W;
//   - act-order (columns by descending diag H) is supported for tensor, channel and static groups, where a column
//     keeps the group of its original index; with dynamic groups it is rejected. Codes, scales and the
//     dequantized weight are returned in the ORIGINAL column order; `permutation` says the order of the sweep
//     (compress stores it beside the codes: formats/PackedModuleIO.h).
//   - after pruning (options.keep): only the kept weights are quantized. A pruned weight is fixed at exactly 0 when
//     the sweep reaches its column (its code is the one that dequantizes to 0: 0, or the zero point) and never
//     widens a grid (grids are computed with pruned entries read as 0, which every grid represents exactly);
//     the drift earlier columns' updates gave it is set back to 0 and compensated on the later columns like
//     any other fixed value, as SparseGPT's joint prune + quantize does. The mask is therefore kept exactly.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <string>

#include "compress/QuantGrid.h"

namespace pareto {

struct GptqOptions {
  double damp = 0.01;        // λ = damp · mean(diag H) is added to the diagonal; must be > 0
  int64_t blockSize = 128;   // columns per lazy block
  bool actOrder = false;     // process columns by descending diag(H)
  bool staticGroups = false; // group grids from the original W up front (required for act-order with groups)
  int maxDampRetries = 4;    // times λ is multiplied by 10 when H + λI is not positive definite
  at::Tensor keep;           // optional bool [out, in]: the weights pruning kept; the others are fixed at 0
};

struct GptqReport {
  double damp = 0;          // the damping fraction finally used (options.damp · 10^dampRetries)
  double lambda = 0;        // the absolute value added to the diagonal
  int dampRetries = 0;      // > 0 means H was (numerically) not positive definite
  int64_t deadInputs = 0;   // inputs with H_ii == 0: their weights were set to 0 (and quantize to exactly 0)
  // Σ ½ (w − q)² / [H⁻¹]ᵢᵢ over all weights (the reference's `Losses`).
  double loss = 0;
};

struct GptqResult {
  QuantResult quant;        // in the original column order
  GptqReport report;
  at::Tensor permutation;   // act-order only: int64 [in], permutation[k] = original column quantized k-th
};

// weight: [out, in] floating, any device (the work runs there in float32, float64 for a float64 weight; the
// dequantized result has the weight's dtype). hessian: [in, in] Σ x xᵀ (sum or mean), any floating dtype and
// device; copied, never modified. Throws InputError naming the module for bad input and Error when H stays
// non-positive-definite after every retry or the result would not be finite.
GptqResult gptqQuantize(const at::Tensor& weight, const at::Tensor& hessian, const QuantSpec& spec,
                        const GptqOptions& options = {}, const std::string& moduleName = {});

}  // namespace pareto
