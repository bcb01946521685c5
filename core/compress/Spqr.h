// SpQR (Dettmers et al. 2023, "SpQR: A Sparse-Quantized Representation for Near-Lossless LLM Weight
// Compression") as a pure solver over (W, H):
//
//   1. H is damped like GPTQ (λ = damp · mean diag H, grown tenfold while not positive definite; dead inputs,
//      H_jj = 0, get H_jj = 1 and their weights are set to 0).
//   2. Outliers are chosen UP FRONT from W (after dead inputs are zeroed) by the saliency w_ij² / [H⁻¹]_jj, with
//      H⁻¹ the inverse of the damped H: either every weight whose saliency is > outlierThreshold (an absolute
//      value, in the units of w²·H), or exactly round(outlierRatio · rows · cols) weights of highest saliency
//      over the whole matrix (ties broken by at::topk). This is the brief's "simpler acceptable version"; the
//      paper re-evaluates saliency inside the sweep on the error-updated weights.
//   3. A GPTQ sweep in input order with lazy blocks (as compress/Gptq.cpp): a group of groupSize input columns
//      gets its grid when the sweep reaches its first column, from the current error-updated weights of that
//      group EXCLUDING its outliers: asymmetric min-max, s = (hi − lo)/(2^b − 1), z = −lo/s (a real zero point,
//      not rounded, as the paper's round_zero=False). s and z are then quantized (second level): for a fixed
//      input group, the scaleGroup consecutive ROWS (output channels) share one min-max grid of scaleBits bits,
//      ŝ = base + q·step with base (rounded down) and step (rounded up) stored in fp16; the same for z. A column
//      is quantized on (ŝ, ẑ): q = clamp(round(w/ŝ + ẑ), 0, 2^b − 1), ŵ = (q − ẑ)·ŝ in float32. An outlier takes
//      its current (error-updated) value rounded to fp16 (error ≈ 0); every error is propagated to the later
//      columns through the upper Cholesky factor of H⁻¹.
//   Degenerate groups (no non-outlier weight, or hi = lo) take the largest s of their second-level group (1 if
//   none) and z = −lo/s; first-level scales are clamped to ≥ 2^−24 so that every ŝ is positive.
//
// rows must be a multiple of scaleGroup and cols a multiple of groupSize. The packed form and the exact bits per
// weight are in formats/SpqrWeight.h.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <string>

namespace pareto {

struct SpqrOptions {
  int bits = 3;                    // weight code bits, 2..8
  int64_t groupSize = 16;          // input columns per first-level group
  int scaleBits = 3;               // bits of the quantized first-level scales and zeros, 2..8
  int64_t scaleGroup = 16;         // output rows per second-level group (for one input group)
  double outlierRatio = -1;        // fraction in [0, 1] of weights kept in fp16; negative = unset
  double outlierThreshold = -1;    // saliency threshold (>= 0); negative = unset. Exactly one of the two is set.
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

// Everything on the weight's device.
struct SpqrResult {
  at::Tensor dequantized;        // [rows, cols], the weight's dtype: grid values, outliers exact (fp16 values)
  at::Tensor codes;              // uint8 [rows, cols] in [0, 2^bits − 1] (at outliers: the grid code, unused)
  at::Tensor scaleCodes;         // uint8 [rows, groups] in [0, 2^scaleBits − 1]: first-level scale codes
  at::Tensor zeroCodes;          // uint8 [rows, groups]: first-level zero codes
  at::Tensor scaleBase, scaleStep;  // fp16 [rows/scaleGroup, groups]: ŝ = base + code·step (float32)
  at::Tensor zeroBase, zeroStep;    // fp16 [rows/scaleGroup, groups]: ẑ = base + code·step (float32)
  at::Tensor scales, zeros;      // float32 [rows, groups]: the dequantized ŝ and ẑ
  at::Tensor outlierRowOffsets;  // int32 [rows + 1] (CSR)
  at::Tensor outlierColumns;     // int16 [nnz] when cols <= 32767, else int32; ascending within a row
  at::Tensor outlierValues;      // fp16 [nnz]
  int bits = 0;
  int scaleBits = 0;
  int64_t groupSize = 0;
  int64_t scaleGroup = 0;
  SpqrReport report;

  // Exact bits per weight of the packed form (formats/SpqrWeight.h), from the shapes alone.
  double bitsPerWeight() const;
};

// weight: [out, in] floating, any device (work in float32, float64 for a float64 weight). hessian: [in, in]
// Σ x xᵀ, any floating dtype and device; copied. Throws InputError naming the module for bad input or options,
// Error when H stays non-positive-definite or the result is not finite.
SpqrResult spqrQuantize(const at::Tensor& weight, const at::Tensor& hessian, const SpqrOptions& options = {},
                        const std::string& moduleName = {});

}  // namespace pareto
