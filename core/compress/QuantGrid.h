// Uniform quantization grids and round-to-nearest (RTN).
//
// A grid maps a weight w to an integer code q and back to ŵ = (q − z) · s:
//   symmetric (absmax):  s = max|w| / (2^(b−1) − 1),  z = 0,
//                        q = clamp(round(w / s), −(2^(b−1) − 1), 2^(b−1) − 1)       (int8 codes)
//   asymmetric (min-max): lo = min(min w, 0), hi = max(max w, 0), s = (hi − lo) / (2^b − 1),
//                        z = round(−lo / s) ∈ [0, 2^b − 1], q = clamp(round(w / s) + z, 0, 2^b − 1)  (uint8 codes)
// The asymmetric range always contains 0 (as in IST-DASLab's gptq `Quantizer`), so that the zero point is itself a
// code and 0 is represented exactly. One grid covers the whole tensor, one output row (channel), or one group of g
// consecutive input columns of one row.
//
// Scales are stored as fp16 (see formats/QuantGroupWeight.h), so every scale computed here is rounded UP to the
// next fp16 value before it is used: the dequantized weight a solver returns is then exactly what the packed form
// unpacks to, and rounding up (not to nearest) keeps the whole range [lo, hi] on the grid, so |w − ŵ| ≤ s/2 for
// every w in the range. A group whose range is empty (all zero) gets s = 1 and codes 0 (ŵ = 0).
//
// The grid's description (QuantSpec) and a solver's codes on it (QuantResult) are formats/QuantSpec.h: the stored
// layout follows them, the solvers here fill them.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <string>

#include "formats/QuantSpec.h"

namespace pareto {

// The grid of each row of x over its last dimension: x float [r, k] → scale and zero float [r, 1] (zero is all 0
// for symmetric grids). Scales are fp16-representable (rounded up), never 0. Throws InputError if a scale does not
// fit fp16 (|w| beyond ~8e6 at 4 bits).
struct QuantGrid {
  at::Tensor scale;
  at::Tensor zero;
};
QuantGrid findQuantGrid(const at::Tensor& x, const QuantSpec& spec, const std::string& who = "quantization");

// Float codes of x on a grid (scale and zero broadcast against x), in [qmin, qmax].
at::Tensor quantizeToCodes(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& zero,
                           const QuantSpec& spec);
// (codes − zero) · scale, in the codes' floating dtype. The formats' unpack computes exactly this.
at::Tensor dequantizeCodes(const at::Tensor& codes, const at::Tensor& scale, const at::Tensor& zero);


// Throws InputError unless weight is a defined 2-D floating tensor of finite values whose columns fit the spec.
void checkQuantWeight(const at::Tensor& weight, const QuantSpec& spec, const std::string& moduleName);

// A result over a pruned weight (codes of pruned positions irrelevant) restricted to the kept weights, each row
// compacted in column order: codes and dequantized [rows, kept per row], scales and zeros unchanged. For N:M
// pruning, where every row keeps cols·N/M weights and a group of g kept values is exactly g·M/N original columns,
// this is the QuantResult over the bitmask's values (formats/BitmaskNMWeight.h) with group size g. Throws
// InputError when `keep` is not bool of the codes' shape or the rows keep different counts.
QuantResult quantKeptColumns(const QuantResult& result, const at::Tensor& keep);

// Round to nearest on the spec's grids, computed from the weight itself. Any device; the work is float32 (float64
// for a float64 weight). Throws InputError naming the module for bad input.
QuantResult rtnQuantize(const at::Tensor& weight, const QuantSpec& spec, const std::string& moduleName = {});

}  // namespace pareto
