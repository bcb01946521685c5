// A SpQR-quantized weight (compress/Spqr.h) in packed storage:
//
//   codes        uint8 [ceil(rows·cols/8) · bits]: the b-bit weight codes, row-major, bit-packed: every 8
//                consecutive codes fill b bytes, code k of the 8 in bits [b·k, b·k + b) of the little-endian
//                b-byte word (the tail is padded with zero codes)
//   scaleCodes   uint8 [ceil(rows·groups/8) · scaleBits]: first-level scale codes [rows, groups], packed the same
//   zeroCodes    same for the first-level zero codes
//   scaleBase, scaleStep, zeroBase, zeroStep
//                fp16 [rows/scaleGroup, groups]: second-level grids (scaleGroup consecutive rows of one group)
//   outlierRowOffsets int32 [rows + 1], outlierColumns int16 [nnz] (int32 when cols > 32767), outlierValues
//                fp16 [nnz]: the outliers in CSR
//
// Dequantization (float32, exactly the solver's expressions, so unpack() reproduces its result bit for bit):
//   ŝ[r, g] = scaleBase[r/β₂, g] + scaleCode[r, g] · scaleStep[r/β₂, g]      (same for ẑ)
//   ŵ[r, c] = (code[r, c] − ẑ[r, c/β₁]) · ŝ[r, c/β₁], then ŵ[r, c] = value for every CSR outlier (r, c).
//
// Bits per weight, every stored byte over rows·cols (b bits, β₁ = groupSize, β₂ = scaleGroup, sb = scaleBits,
// n = rows·cols, G = rows·cols/β₁ first-level groups, k outliers, index bits ι = 16 or 32):
//   bits = 8·b·⌈n/8⌉ + 2·8·sb·⌈G/8⌉ + 4·16·G/β₂ + 32·(rows + 1) + (ι + 16)·k
//   bpw ≈ b + 2·sb/β₁ + 64/(β₁β₂) + 32/cols + 32·k/n
//   3-bit, β₁ = β₂ = 16, sb = 3: 3 + 0.375 + 0.25 = 3.625, plus 0.32 at 1% outliers (≈ 3.95), 0.16 at 0.5%.
// Codes are stored for every position, outliers included (the dense part stays a plain bit stream).
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>

#include "compress/Spqr.h"

namespace pareto {

struct SpqrWeight {
  at::Tensor codes;
  at::Tensor scaleCodes;
  at::Tensor zeroCodes;
  at::Tensor scaleBase, scaleStep, zeroBase, zeroStep;
  at::Tensor outlierRowOffsets;
  at::Tensor outlierColumns;
  at::Tensor outlierValues;
  int bits = 0;
  int scaleBits = 0;
  int64_t groupSize = 0;
  int64_t scaleGroup = 0;
  int64_t rows = 0;
  int64_t cols = 0;

  // From a solver result; on its device. Throws InputError when the parts do not fit together.
  static SpqrWeight pack(const SpqrResult& result);

  // Dense [rows, cols] float32 (or `dtype`), on the codes' device. Checks consistency first.
  at::Tensor unpack() const;
  at::Tensor unpack(at::ScalarType dtype) const;
  at::Tensor unpackCodes() const;  // uint8 [rows, cols]

  void checkConsistent() const;

  int64_t storedBytes() const;
  double bitsPerWeight() const;  // storedBytes · 8 / (rows · cols)
};

// Shared by the solver and unpack() so that both compute the same float32 expressions.
// base + codes · step (float32, broadcasting).
at::Tensor spqrDequantizeStat(const at::Tensor& codes, const at::Tensor& base, const at::Tensor& step);
// (codes − zero) · scale (float32, broadcasting).
at::Tensor spqrDequantizeWeight(const at::Tensor& codes, const at::Tensor& scale, const at::Tensor& zero);
// Stored bits of the packed form for the given shapes (the formula above).
int64_t spqrStoredBits(int64_t rows, int64_t cols, int bits, int64_t groupSize, int scaleBits, int64_t scaleGroup,
                       int64_t outliers);

}  // namespace pareto
