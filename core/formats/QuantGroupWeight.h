// A weight quantized on uniform grids (formats/QuantSpec.h; solvers: RTN, GPTQ in compress/), in packed storage:
//
//   codes   bits 4: uint8 [rows, cols/2], two codes a byte, column 2k in the low nibble, 2k+1 in the high one;
//                   a symmetric code q ∈ [−7, 7] is stored biased as q + 8, an asymmetric one q ∈ [0, 15] as is
//           bits 8: int8 [rows, cols] (symmetric, q ∈ [−127, 127]) or uint8 [rows, cols] (asymmetric)
//           other:  uint8 [rows, cols·b/8], each row a little-endian bit stream (formats/BitPacking.h; cols a
//                   multiple of 8), symmetric codes biased by 2^(b−1)
//   scales  fp16 [rows, groups]; one row ([1, 1]) for a per-tensor grid; groups = 1 for per-channel
//   zeros   asymmetric only: uint8 [rows, groups] (the shape of scales), the code that dequantizes to 0
//
// and dequantizes as ŵ[r, c] = (q[r, c] − zero[r, c/g]) · scale[r, c/g] in float32, g = cols / groups, exactly
// the expression the solvers use, so unpack() reproduces their dequantized weight bit for bit.
//
// Bits per weight, like llama.cpp's block structs (block_q4_0: 2 bytes of fp16 scale + 16 bytes of nibbles for
// 32 weights = 4.5 bpw), counting every stored byte over rows · cols:
//
//   bpw = b + 16 / g (fp16 scale per group) + 8 / g (uint8 zero per group, asymmetric only)
//
//   int4 g128 symmetric: 4 + 16/128 = 4.125      int4 g128 asymmetric: 4 + 24/128 = 4.1875
//   int8 per channel:    8 + 16/cols             int4 g32 symmetric:   4.5 (= q4_0)
//
// storedBytes() counts with formats/PackedBlocks.h (quantGroupBytes; block_int4_g128 = 66 bytes for 128 weights).
//
// GPTQ with act-order quantizes the columns in a permuted order; the codes here are always in the ORIGINAL
// column order (unpack needs no permutation). The order is stored beside them (formats/PackedModuleIO.h), int32
// [cols of the dense weight], qperm[k] = the original column quantized k-th: informational, and what a kernel
// needs to regroup columns by their quantization order. checkColumnPermutation() validates it on load.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>

#include "formats/QuantSpec.h"

namespace pareto {

struct QuantGroupWeight {
  at::Tensor codes;   // see above
  at::Tensor scales;  // fp16 [rows or 1, groups]
  at::Tensor zeros;   // uint8 [rows or 1, groups], asymmetric only
  int bits = 0;       // 2..8
  bool symmetric = true;
  int64_t groupSize = 0;  // input columns per scale: g for groups, cols for per-channel and per-tensor
  int64_t rows = 0;
  int64_t cols = 0;

  // From a solver's result (rtnQuantize / gptqQuantize) and the spec it was made with; on the codes' device.
  // Throws InputError for unpackable bits (not 4 or 8), odd columns at 4 bits, or parts that do not fit the spec
  // (shapes, dtypes, codes out of range, scales not fp16-exact).
  static QuantGroupWeight pack(const QuantResult& result, const QuantSpec& spec);

  // Dense [rows, cols]: the dequantized weight in float32, or converted to `dtype`; on the codes' device. Checks
  // that the parts agree first (a packed weight may have been read from a file) and throws InputError if not.
  at::Tensor unpack() const;
  at::Tensor unpack(at::ScalarType dtype) const;
  at::Tensor unpackCodes() const;  // the integer codes [rows, cols], int8 (symmetric) or uint8 (asymmetric)

  void checkConsistent() const;

  // codes + scales + zeros, counted with formats/PackedBlocks.h (checks consistency first, which makes it equal
  // to the bytes of the three tensors).
  int64_t storedBytes() const;
  double bitsPerWeight() const;  // storedBytes · 8 / (rows · cols)
};

// Throws InputError (saying what is wrong, for the caller to prefix with the file and tensor) unless `permutation`
// is an integer tensor [cols] holding every index 0 .. cols−1 exactly once.
void checkColumnPermutation(const at::Tensor& permutation, int64_t cols);

}  // namespace pareto
