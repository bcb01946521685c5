// An N:M-sparse weight in the layout the bitmask_nm_gemv kernel reads.
//
// Per output row, for every 32 input columns, one 32-bit mask word (bit b of word k set ⇔ column 32k + b is
// kept), and separately the kept values of the row in column order:
//
//   masks  int32 [rows, cols/32]       word k of row r covers columns 32k .. 32k+31
//   values dtype [rows, cols·N/M]      row r: the kept W[r, c] for increasing c
//
// Why this shape: because M divides 32, every mask word holds exactly 32·N/M set bits, so the kernel's inner loop
// over a word has a compile-time trip count (16 for 2:4) and can be fully unrolled, recovering each column by
// bit-scan (find first set, clear lowest bit) with no per-word count or offset table; and value k·32·N/M of a row
// is always the first one of word k, so a warp can start anywhere without a prefix sum. Masks and values are
// separate arrays rather than interleaved blocks (as llama.cpp's block_q4_0 does) so that each is a plain stream
// of 16-byte loads. Storing the words as int32 (bit 31 is the sign bit) keeps the format expressible in LibTorch
// 1.13, which has no uint32 tensors; the bits are identical. The unit of both streams is
// packed::block_bitmask24_f16 and friends (formats/PackedBlocks.h: one mask word + its 32·N/M values).
//
// After N:M pruning + quantization (formats "bitmask-N:M+intB-…" / "+spqr-Bbit") the values stream is replaced by a
// QuantGroupWeight / SpqrWeight over the kept values [rows, cols·N/M] (groups of g kept values = g·M/N columns).
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>

namespace pareto {

struct BitmaskNMWeight {
  at::Tensor masks;   // int32 [rows, cols/32], see above
  at::Tensor values;  // [rows, cols·N/M] in the packed weight's dtype, kept values in column order
  int n = 0;          // kept per group
  int m = 0;          // group size (divides 32)
  int64_t rows = 0;
  int64_t cols = 0;

  // weight: [rows, cols] floating; mask: bool [rows, cols], true = kept, with exactly N kept in every group of M
  // consecutive columns; cols % 32 == 0. Result on the weight's device. Throws InputError saying which rule fails
  // (for a bad group: its row, columns and count).
  static BitmaskNMWeight pack(const at::Tensor& weight, const at::Tensor& mask, int n, int m);

  // Dense [rows, cols] in the values' dtype and device, removed entries 0: exactly the packed weight where kept.
  // Both unpacks first check that the parts agree (dtypes, shapes, exactly N bits per group of M), since a packed
  // weight may have been read from a file; they throw InputError saying what does not.
  at::Tensor unpack() const;
  at::Tensor unpackMask() const;  // bool [rows, cols] on the masks' device, true = kept

  void checkConsistent() const;   // the dtype and shape part of that check

  // rows · cols/32 blocks of packed::bitmaskBlockBytes (formats/PackedBlocks.h: block_bitmask24_f16 is 36 bytes),
  // which is exactly masks + values; checks consistency first.
  int64_t storedBytes() const;
  double bitsPerWeight() const;   // storedBytes · 8 / (rows · cols): fp16 2:4 stores 8 + 1 = 9
};

}  // namespace pareto
