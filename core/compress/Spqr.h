// SpQR (Dettmers et al. 2023, "SpQR: A Sparse-Quantized Representation for Near-Lossless LLM Weight
// Compression") as a pure solver over (W, H):
//
//   1. H is damped like GPTQ (λ = damp · mean diag H, grown tenfold while not positive definite; dead inputs,
//      H_jj = 0, get H_jj = 1 and their weights are set to 0).
//   2. Outliers. Up front, the saliency w_ij² / [H⁻¹]_jj of the (dead-zeroed) original weights, H⁻¹ the inverse
//      of the damped H, picks either exactly round(outlierRatio · N) weights of highest saliency over the whole
//      matrix (N = the weights being quantized: all, or the kept ones after pruning; ties broken by at::topk) or
//      every weight whose saliency exceeds outlierThreshold (in the units of w²·H).
//      With OutlierSelection::InSweep (the default; the paper also picks outliers group by group during the
//      sweep) that choice is re-evaluated when the sweep reaches a group of groupSize input columns, on the
//      group's CURRENT, error-updated weights and the current inverse-Hessian diagonal d_j = U_jj² (U the upper
//      Cholesky factor of H⁻¹, so U_jj² = [H_F⁻¹]_jj over the columns F not fixed yet):
//        ratio mode: the group keeps the number of outliers the up-front choice gave it (the total stays exactly
//          round(ratio · N), spread over the matrix as the global saliency says) and takes the weights whose
//          removal saves the most, the paper's leave-one-out criterion: per row, Σ_k (w_k − q(w_k))² / d_k on the
//          group's first-level grid, minus the same with that weight left out of the grid (and kept exact).
//          On the synthetic problems of the tests this lowers ‖(W − Ŵ)X‖ by 0-9% against the up-front choice
//          (re-picking by w²/d alone, tried first, was 0-2% worse than up front);
//        threshold mode: every weight whose current saliency w_ij² / d_j exceeds the threshold (d_j ≤ [H⁻¹]_jj,
//          so for the same w a threshold admits more weights here than up front).
//      OutlierSelection::UpFront keeps the up-front choice as is.
//   3. A GPTQ sweep in input order with lazy blocks (as compress/ObsSweep.h): a group of groupSize input columns
//      gets its grid when the sweep reaches its first column, from the current error-updated weights of that
//      group EXCLUDING its outliers (and pruned weights): min-max asymmetric with the range widened to contain 0,
//      lo = min(min w, 0), hi = max(max w, 0), s = (hi − lo)/(2^b − 1). The scale is quantized (second level): for
//      a fixed input group, the scaleGroup consecutive ROWS (output channels) share one min-max grid of
//      scaleBits bits, ŝ = base + q·step with base (rounded down) and step (rounded up) stored in fp16. The zero
//      point is then the integer code z = clamp(round(−lo/ŝ), 0, 2^b − 1): as in RTN's min-max grid, it is a
//      b-bit code that dequantizes to exactly 0, so it needs no second-level statistics. A column is quantized
//      on (ŝ, z): q = clamp(round(w/ŝ + z), 0, 2^b − 1), ŵ = (q − z)·ŝ in float32. An outlier takes its current
//      (error-updated) value rounded to fp16; every error is propagated to the later columns through U.
//   Degenerate groups (no weight left after excluding outliers and pruned ones, or all zero) take the largest s
//   of their second-level group (1 if none); first-level scales are clamped to ≥ 2^−24 so that every ŝ is > 0.
//
// Pruned weights (options.keep): fixed at exactly 0 (code = the group's zero code), never outliers, outside every
// grid's range; their error (the drift the sweep gave them, set back to 0) is propagated like any other, as in
// SparseGPT's joint prune + quantize.
//
// rows must be a multiple of scaleGroup and cols a multiple of groupSize. The packed form and the exact bits per
// weight are in formats/SpqrWeight.h: 3-bit, groups of 16, scale_bits 3 → 3.5 bits per weight + 32 per outlier.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <string>

#include "formats/SpqrWeight.h"

namespace pareto {

enum class OutlierSelection {
  UpFront,  // saliency of the original weights with the full inverse-Hessian diagonal, chosen once
  InSweep,  // the up-front choice re-evaluated per group on the error-updated weights (see above)
};

struct SpqrOptions {
  int bits = 3;                    // weight code bits, 2..8 (also the bits of the integer zero points)
  int64_t groupSize = 16;          // input columns per first-level group
  int scaleBits = 3;               // bits of the quantized first-level scales, 2..8
  int64_t scaleGroup = 16;         // output rows per second-level group (for one input group)
  double outlierRatio = -1;        // fraction in [0, 1] of the quantized weights kept in fp16; negative = unset
  double outlierThreshold = -1;    // saliency threshold (>= 0); negative = unset. Exactly one of the two is set.
  OutlierSelection selection = OutlierSelection::InSweep;
  at::Tensor keep;                 // optional bool [rows, cols]: the weights pruning kept; the rest become 0
  double damp = 0.01;              // λ = damp · mean(diag H); > 0
  int64_t blockSize = 128;         // columns per lazy block
  int maxDampRetries = 4;          // times λ is multiplied by 10 when H + λI is not positive definite

  // Throws InputError naming `who` for bad values.
  void validate(const std::string& who = "SpQR") const;
};

struct SpqrReport {
  double damp = 0;          // damping fraction finally used
  double lambda = 0;        // absolute value added to the diagonal
  int dampRetries = 0;
  int64_t deadInputs = 0;
  int64_t outliers = 0;     // number of fp16 outliers
  double loss = 0;          // Σ ½ (w − ŵ)² / U_jj² over all weights, U the upper Cholesky factor of H⁻¹
};

// Everything on the weight's device. The codes, statistics and outliers the packed form stores (SpqrCodes,
// formats/SpqrWeight.h), and what the solver knows besides.
struct SpqrResult : SpqrCodes {
  at::Tensor dequantized;        // [rows, cols], the weight's dtype: grid values, outliers exact (fp16 values)
  at::Tensor scales, zeros;      // float32 [rows, groups]: the dequantized ŝ, and the zero codes as floats
  SpqrReport report;

  // Exact bits per weight of the packed form (formats/SpqrWeight.h), from the shapes alone.
  double bitsPerWeight() const;
};

// A result computed with options.keep on an N:M-pruned weight (group size g·M/N original columns) restricted to
// the kept weights, each row compacted in column order: codes and dequantized [rows, cols·N/M], outlier columns
// renumbered to kept-value indices, groupSize g; the statistics are unchanged (a group of g·M/N original
// columns holds exactly g kept values). This is what is stored beside the bitmask (format bitmask-N:M+spqr-Bbit).
// Throws InputError when the rows keep different counts, the group does not map to whole kept values, or an
// outlier sits on a pruned position.
SpqrResult spqrKeptColumns(const SpqrResult& result, const at::Tensor& keep);

// weight: [out, in] floating, any device (work in float32, float64 for a float64 weight). hessian: [in, in]
// Σ x xᵀ, any floating dtype and device; copied. Throws InputError naming the module for bad input or options,
// Error when H stays non-positive-definite or the result is not finite.
SpqrResult spqrQuantize(const at::Tensor& weight, const at::Tensor& hessian, const SpqrOptions& options = {},
                        const std::string& moduleName = {});

}  // namespace pareto
