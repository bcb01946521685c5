// A SpQR-quantized weight (the solver: compress/Spqr.h) in packed storage, every stream row-major:
//
//   codes        uint8 [ceil(rows·cols/8) · b]: the b-bit weight codes [rows, cols], bit-packed: every 8
//                consecutive codes fill b bytes, code k of the 8 in bits [b·k, b·k + b) of the little-endian
//                b-byte word (formats/BitPacking.h; the tail is padded with zero codes)
//   scaleCodes   uint8 [ceil(rows·groups/8) · sb]: the sb-bit first-level scale codes [rows, groups], packed the
//                same way (groups = cols/β₁)
//   zeroCodes    uint8 [ceil(rows·groups/8) · b]: the first-level zero points [rows, groups] as b-BIT INTEGER
//                codes in [0, 2^b − 1], packed the same way. Min-max asymmetric rounding makes the zero point an
//                integer code (the one that dequantizes to exactly 0), so it needs no second-level statistics.
//   scaleBase, scaleStep
//                fp16 [rows/β₂, groups]: the second-level grid of the scales, one per β₂ consecutive ROWS of one
//                first-level group
//   outlierRowOffsets int32 [rows + 1], outlierColumns int16 [nnz] (int32 when cols > 32767), outlierValues
//                fp16 [nnz]: the outliers in CSR, columns ascending within a row
//
// (Format version 2. Version 1, before this change, stored the zero points as sb-bit codes on a second-level
// grid with fp16 zeroBase/zeroStep like the scales; those tensors are gone.)
//
// Dequantization (float32, exactly the solver's expressions, so unpack() reproduces its result bit for bit):
//   ŝ[r, g] = scaleBase[r/β₂, g] + scaleCode[r, g] · scaleStep[r/β₂, g]
//   ŵ[r, c] = (code[r, c] − zeroCode[r, c/β₁]) · ŝ[r, c/β₁], then ŵ[r, c] = value for every CSR outlier (r, c).
// Codes are stored for every position, outliers included (the dense part stays a plain bit stream); a weight
// that must be exactly 0 (pruned before quantization) has code = its group's zero code.
//
// Bits per weight, every stored byte over rows·cols (b bits, β₁ = groupSize, β₂ = scaleGroup, sb = scaleBits,
// n = rows·cols, G = n/β₁ first-level groups, k outliers, index bits ι = 16 or 32), counted with
// formats/PackedBlocks.h (spqrDenseBytes + spqrOutlierBytes):
//   bits = 8·b·⌈n/8⌉ + 8·sb·⌈G/8⌉ + 8·b·⌈G/8⌉ + 2·16·G/β₂ + 32·(rows + 1) + (ι + 16)·k
//   bpw ≈ b + sb/β₁ + b/β₁ + 32/(β₁β₂) + 32/cols + (ι + 16)·k/n
//   3-bit, β₁ = β₂ = 16, sb = 3: 3 + 3/16 + 3/16 + 32/256 = 3.5 (packed::block_spqr3_tile16x16: 112 bytes per
//   256 weights), + 32 bits per outlier (0.032 bpw per 0.1% of outliers) + 32/cols for the row offsets.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>

namespace pareto {

// The parts before bit packing, as the solver (compress/Spqr.h: SpqrResult) computes them; everything on one device.
struct SpqrCodes {
  at::Tensor codes;              // uint8 [rows, cols] in [0, 2^bits − 1] (at outliers: the grid code, unused;
                                 // at pruned weights: the zero code)
  at::Tensor scaleCodes;         // uint8 [rows, groups] in [0, 2^scaleBits − 1]: first-level scale codes
  at::Tensor zeroCodes;          // uint8 [rows, groups] in [0, 2^bits − 1]: the integer zero points
  at::Tensor scaleBase, scaleStep;  // fp16 [rows/scaleGroup, groups]: ŝ = base + code·step (float32)
  at::Tensor outlierRowOffsets;  // int32 [rows + 1] (CSR)
  at::Tensor outlierColumns;     // int16 [nnz] when cols <= 32767, else int32; ascending within a row
  at::Tensor outlierValues;      // fp16 [nnz]
  int bits = 0;
  int scaleBits = 0;
  int64_t groupSize = 0;
  int64_t scaleGroup = 0;
};

struct SpqrWeight {
  at::Tensor codes;        // uint8, b-bit stream of [rows, cols]
  at::Tensor scaleCodes;   // uint8, sb-bit stream of [rows, groups]
  at::Tensor zeroCodes;    // uint8, b-bit stream of [rows, groups]: integer zero points
  at::Tensor scaleBase, scaleStep;   // fp16 [rows/scaleGroup, groups]
  at::Tensor outlierRowOffsets;
  at::Tensor outlierColumns;
  at::Tensor outlierValues;
  int bits = 0;
  int scaleBits = 0;
  int64_t groupSize = 0;
  int64_t scaleGroup = 0;
  int64_t rows = 0;
  int64_t cols = 0;

  // From a solver's codes; on their device. Throws InputError when the parts do not fit together.
  static SpqrWeight pack(const SpqrCodes& result);

  // Dense [rows, cols] float32 (or `dtype`), on the codes' device. Checks consistency first.
  at::Tensor unpack() const;
  at::Tensor unpack(at::ScalarType dtype) const;
  at::Tensor unpackCodes() const;  // uint8 [rows, cols]

  // Shapes, dtypes and ranges of every part (codes of the right byte count, a valid CSR), so that a weight read
  // from a file is checked before it is trusted; throws InputError saying which part is wrong.
  void checkConsistent() const;

  // The formula above (formats/PackedBlocks.h) from the shapes and the outlier count; checks consistency first,
  // which makes it equal to the bytes of the stored tensors.
  int64_t storedBytes() const;
  double bitsPerWeight() const;  // storedBytes · 8 / (rows · cols)
};

// Shared by the solver and unpack() so that both compute the same float32 expressions.
// base + codes · step (float32, broadcasting): the second-level dequantization of the scales.
at::Tensor spqrDequantizeStat(const at::Tensor& codes, const at::Tensor& base, const at::Tensor& step);
// (codes − zero) · scale (float32, broadcasting); zero holds integer codes.
at::Tensor spqrDequantizeWeight(const at::Tensor& codes, const at::Tensor& scale, const at::Tensor& zero);
// Stored bits of the packed form for the given shapes (the formula above).
int64_t spqrStoredBits(int64_t rows, int64_t cols, int bits, int64_t groupSize, int scaleBits, int64_t scaleGroup,
                       int64_t outliers);

}  // namespace pareto
