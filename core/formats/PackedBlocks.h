// The storage units of the packed weight formats, as plain structs with static_assert'ed sizes and their bits
// per weight, in the manner of llama.cpp's block_q4_0 (`static_assert(sizeof(block_q4_0) == sizeof(ggml_half) +
// QK4_0 / 2, ...)`), plus the byte-count functions the formats' storedBytes() use.
//
// Our files keep each kind of data in its own stream (masks | values, codes | scales | zeros, ...) so that a
// kernel reads each as plain 16-byte loads; the structs below are therefore the unit one run of columns
// contributes across those streams, not an interleaved on-disk record. What ties them to the accounting: the
// formats (BitmaskNMWeight, QuantGroupWeight, SpqrWeight) compute storedBytes() with the constexpr functions
// here, each checkConsistent() requires every stored tensor to hold exactly its share, and every struct below
// is static_assert'ed against those same functions — so struct sizes, byte counts and bits per weight cannot
// drift apart without the build failing.
//
// Host-side C++17 only (no LibTorch, no Qt, no CUDA types: fp16 is its uint16_t bit pattern) so that the CUDA
// kernels in kernels/ can include this header too. Multi-byte fields are little-endian, as on every target.
#pragma once

#include <cstdint>

namespace pareto {
namespace packed {

using Fp16Bits = uint16_t;   // IEEE binary16 bit pattern
using MaskWord = uint32_t;   // bit b set ⇔ input column 32k + b kept (stored as int32 tensors: same bits)

constexpr int64_t kMaskWordColumns = 32;   // input columns per mask word

// ---- byte counts (shared by the formats and the asserts below) ----

// b-bit codes in the little-endian bit stream of formats/BitPacking.h: whole words of 8 codes, b bytes each.
constexpr int64_t codeStreamBytes(int64_t count, int bits) { return (count + 7) / 8 * bits; }

// QuantGroupWeight codes: each row packed on its own (two nibbles a byte at 4 bits, one byte at 8, a bit stream
// otherwise), so cols · bits must be a multiple of 8.
constexpr int64_t quantRowCodeBytes(int64_t cols, int bits) { return cols * bits / 8; }

// One quantization group of one row: g codes, an fp16 scale, and a uint8 zero point when asymmetric.
constexpr int64_t quantGroupBytes(int bits, int64_t groupSize, bool symmetric) {
  return quantRowCodeBytes(groupSize, bits) + int64_t(sizeof(Fp16Bits)) + (symmetric ? 0 : int64_t(sizeof(uint8_t)));
}

// Bitmask N:M, per 32 input columns of a row: one mask word and its 32·N/M kept values.
constexpr int64_t bitmaskBlockBytes(int n, int m, int64_t valueBytes) {
  return int64_t(sizeof(MaskWord)) + kMaskWordColumns * n / m * valueBytes;
}

// SpQR without its outliers, for a [rows, cols] weight (formats/SpqrWeight.h): b-bit weight codes, sb-bit scale
// codes and b-bit zero codes (one each per first-level group of β₁ columns), and an fp16 base + step per
// second-level group (β₂ rows of one first-level group).
constexpr int64_t spqrDenseBytes(int64_t rows, int64_t cols, int bits, int64_t groupSize, int scaleBits,
                                 int64_t scaleGroup) {
  return codeStreamBytes(rows * cols, bits) + codeStreamBytes(rows * (cols / groupSize), scaleBits) +
         codeStreamBytes(rows * (cols / groupSize), bits) +
         (rows / scaleGroup) * (cols / groupSize) * 2 * int64_t(sizeof(Fp16Bits));
}
// SpQR outliers in CSR: int32 row offsets [rows + 1] and per outlier a column index (int16 while the columns fit,
// else int32) and an fp16 value.
constexpr int64_t spqrOutlierIndexBytes(int64_t cols) { return cols <= 32767 ? 2 : 4; }
constexpr int64_t spqrOutlierBytes(int64_t rows, int64_t cols, int64_t outliers) {
  return (rows + 1) * int64_t(sizeof(int32_t)) + outliers * (spqrOutlierIndexBytes(cols) + int64_t(sizeof(Fp16Bits)));
}

// ---- the blocks ----

// Bitmask 2:4 with fp16 values, 32 columns: 4 + 16·2 = 36 bytes → 9 bits per weight.
struct block_bitmask24_f16 {
  MaskWord mask;
  Fp16Bits values[16];
};
static_assert(sizeof(block_bitmask24_f16) == sizeof(MaskWord) + 16 * sizeof(Fp16Bits),
              "wrong bitmask 2:4 fp16 block size/padding");
static_assert(sizeof(block_bitmask24_f16) == bitmaskBlockBytes(2, 4, sizeof(Fp16Bits)), "bitmask accounting");
static_assert(8.0 * sizeof(block_bitmask24_f16) / kMaskWordColumns == 9.0, "2:4 fp16 is 9 bits per weight");

// int4 codes of 32 columns, two a byte (low nibble = even column): 16 bytes → 4 bits per weight.
struct block_int4x32 {
  uint8_t qs[16];
};
static_assert(sizeof(block_int4x32) == 32 / 2, "wrong int4x32 block size/padding");
static_assert(sizeof(block_int4x32) == quantRowCodeBytes(32, 4), "int4 code accounting");

// int4 symmetric group of 128 columns: fp16 scale + 64 bytes of nibbles = 66 bytes → 4.125 bits per weight.
struct block_int4_g128 {
  Fp16Bits scale;
  uint8_t qs[128 / 2];
};
static_assert(sizeof(block_int4_g128) == sizeof(Fp16Bits) + 128 / 2, "wrong int4 g128 block size/padding");
static_assert(sizeof(block_int4_g128) == quantGroupBytes(4, 128, /*symmetric=*/true), "int4 g128 accounting");
static_assert(8.0 * sizeof(block_int4_g128) / 128 == 4.125, "int4 g128 is 4.125 bits per weight");

// SpQR 3-bit codes of one first-level group of 16 columns: 16 · 3 bits = 6 bytes → 3 bits per weight.
struct block_spqr3_g16 {
  uint8_t qs[16 * 3 / 8];
};
static_assert(sizeof(block_spqr3_g16) == 6, "wrong SpQR 3-bit g16 block size/padding");
static_assert(sizeof(block_spqr3_g16) == codeStreamBytes(16, 3), "SpQR code accounting");

// SpQR 3-bit, β₁ = 16 columns, sb = 3, β₂ = 16 rows: one second-level group (16 rows × 16 columns = 256 weights)
// holds 16 code groups (96 bytes), 16 3-bit scale codes (6 bytes), 16 3-bit zero codes (6 bytes) and the fp16
// base + step of its scales (4 bytes) = 112 bytes → 3 + 3/16 + 3/16 + 32/256 = 3.5 bits per weight, before the
// outliers (32 bits each: int16 column + fp16 value) and the int32 row offsets (32 / cols per weight).
struct block_spqr3_tile16x16 {
  block_spqr3_g16 groups[16];
  uint8_t scale_codes[16 * 3 / 8];
  uint8_t zero_codes[16 * 3 / 8];
  Fp16Bits scale_base;
  Fp16Bits scale_step;
};
static_assert(sizeof(block_spqr3_tile16x16) == 16 * sizeof(block_spqr3_g16) + 6 + 6 + 2 * sizeof(Fp16Bits),
              "wrong SpQR 3-bit tile size/padding");
static_assert(sizeof(block_spqr3_tile16x16) == spqrDenseBytes(16, 16, 3, 16, 3, 16), "SpQR accounting");
static_assert(8.0 * sizeof(block_spqr3_tile16x16) / 256 == 3.5, "SpQR 3-bit g16 is 3.5 bits per weight + outliers");
static_assert(spqrOutlierBytes(0, 4096, 1) - int64_t(sizeof(int32_t)) == 4, "an outlier costs 32 bits");

// Bitmask 2:4 + int4 kept values, 32 columns: mask word + 16 nibbles = 12 bytes → 3 bits per weight, plus the
// kept values' group scales (16/g bits per kept value, i.e. 8/g per weight at 2:4).
struct block_bitmask24_int4 {
  MaskWord mask;
  uint8_t qs[16 / 2];
};
static_assert(sizeof(block_bitmask24_int4) == sizeof(MaskWord) + 16 / 2, "wrong bitmask 2:4 int4 block size/padding");
static_assert(sizeof(block_bitmask24_int4) == bitmaskBlockBytes(2, 4, 0) + quantRowCodeBytes(16, 4),
              "bitmask + int4 accounting");
static_assert(8.0 * sizeof(block_bitmask24_int4) / kMaskWordColumns == 3.0, "2:4 + int4 codes are 3 bits per weight");

}  // namespace packed
}  // namespace pareto
