// The quantized GEMV's formats and launch, compiled by two translation units: quant_group_gemv.cu (the entry point
// and the plain launches) and quant_group_gemv_folded.cu (the launches with the decode step's ops folded in,
// GemvProblem's input and accumulate). Every kernel exists in both forms (GemvDriver.cuh: kFolds), and one file
// compiling both took twice as long as any other kernel file. See QuantGroupGemv.h for the layout and the
// dequantization, GemvProblem.h for the work decomposition.
#pragma once

#include <string>

#include "GemvDriver.cuh"
#include "QuantGroupGemv.h"
#include "TensorCoreOps.cuh"

namespace pareto::kernels::quant_group_gemv {

// The packed codes of a chunk and the per-group values, shared by the two arithmetic paths below.
struct QuantParams {
  const uint4* codes;
  const __half* scales;
  const uint8_t* zeros;
  int64_t chunks;
  int64_t scaleColumns;
  int unitShift;        // log2 of the sum unit (a power of two: 32, 64, 128 or the chunk)
  int chunksPerGroup;   // 0 when groups are narrower than a chunk
  float symmetricZero;  // 8 (4 bits, stored biased) or 128 (8 bits, after flipping the sign bit)
  bool symmetric;
  bool oddExponent;     // 4-bit codes, fp16, tensor cores: odd columns dequantized under exponent 64 (see below)
  bool zeroMma;         // with oddExponent and 128-column units: the zero point on the tensor cores, no Σx (below)
  bool zeroRow;         // with zeroMma: its row-independent terms once a batch tile (quantZeroRowEnabled, below)
};

struct QuantCodeStream {
  using Params = QuantParams;
  // A lane's 128 bytes of codes of one chunk (GemvDriver.cuh: `load` issues them, `compute` uses them).
  struct Fragment {
    uint4 piece[8];
  };
  struct RowState {};

  __device__ static __forceinline__ Fragment load(const Params& w, int64_t group, int64_t chunk, int lane) {
    const int64_t base = group * w.chunks + chunk;
    Fragment f;
#pragma unroll
    for (int i = 0; i < 8; ++i) f.piece[i] = detail::loadStreaming(w.codes + (base * 8 + i) * 32 + lane);
    return f;
  }

  __device__ static __forceinline__ RowState rowBegin(const Params&, int64_t) { return {}; }

  // The scale column of the unit that ends `unitEndCol` columns into the chunk (a multiple of the unit).
  __device__ static __forceinline__ int64_t scaleColumn(const Params& w, int64_t chunk, int chunkCols, int unitEndCol) {
    const int unitInChunk = (unitEndCol >> w.unitShift) - 1;
    return w.chunksPerGroup == 0 ? chunk * (chunkCols >> w.unitShift) + unitInChunk : chunk / w.chunksPerGroup;
  }

  template <int B, ActivationType TT>
  __device__ static __forceinline__ void rowExtra(const Params&, const RowState&, int64_t, int, int,
                                                  const detail::InputReader<TT>&, float (&)[B]) {}
};

__device__ __forceinline__ uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// The FFMA path (8-bit codes at batch 1-2 and with bf16 activations; everything under PARETO_QUANT_MMA=0): one
// byte permute builds the fp32 number
// f = 0.5 + q/256 (4-bit q placed in the mantissa under a fixed exponent: bytes [0, 0, q, 0x3F]) or
// f = 1 + q/32768 (8-bit: bytes [0, q, 0x80, 0x3F]), exact, and the lane accumulates Σ f·x over a unit; the
// unit's Σ x (computed once per block, when x is staged) turns that into Σ (q − z)·x = 256·Σ f x − (128 + z)·Σ x
// (4 bits) or 32768·Σ f x − (32768 + z)·Σ x (8 bits). Two instructions a weight (permute, FMA).
template <int Bits, ActivationType T>
struct QuantFfmaFormat : QuantCodeStream {
  static constexpr int kChunkCols = Bits == 4 ? 256 : 128;
  static constexpr int kSubBlocks = kChunkCols / 32;
  static constexpr float kScale = Bits == 4 ? 256.f : 32768.f;   // Σ q x = kScale · (Σ f x − kBias · Σ x)
  static constexpr float kBias = Bits == 4 ? 0.5f : 1.f;

  __device__ static __forceinline__ float nibbleFloat(uint32_t w, int k) {
    return __uint_as_float(__byte_perm(w, 0x3F000000u, (7 << 12) | (k << 8) | (4 << 4) | 4));
  }
  __device__ static __forceinline__ float byteFloat(uint32_t w, int k) {
    return __uint_as_float(__byte_perm(w, 0x3F800000u, (7 << 12) | (6 << 8) | (k << 4) | 4));
  }

  template <int B>
  __device__ static __forceinline__ void compute(const Params& w, const Fragment& fragment, int64_t group,
                                                 int64_t chunk, int lane, const float* xs, int64_t xStride,
                                                 const float* xsum, int64_t sumStride, float (&acc)[B]) {
    float unitAcc[B];
#pragma unroll
    for (int b = 0; b < B; ++b) unitAcc[b] = 0.f;
#pragma unroll
    for (int sb = 0; sb < kSubBlocks; ++sb) {
      // 32 columns: one piece at 4 bits, two at 8.
#pragma unroll
      for (int wi = 0; wi < Bits; ++wi) {
        uint32_t q = word(fragment.piece[(sb * 4 * Bits + wi * 4) / 16], wi % 4);
        const int col = sb * 32 + wi * (32 / Bits);
        if constexpr (Bits == 4) {
          const uint32_t lo = q & 0x0F0F0F0Fu, hi = (q >> 4) & 0x0F0F0F0Fu;
          const float f[8] = {nibbleFloat(lo, 0), nibbleFloat(hi, 0), nibbleFloat(lo, 1), nibbleFloat(hi, 1),
                              nibbleFloat(lo, 2), nibbleFloat(hi, 2), nibbleFloat(lo, 3), nibbleFloat(hi, 3)};
#pragma unroll
          for (int b = 0; b < B; ++b) {
            const float4 x0 = *reinterpret_cast<const float4*>(xs + b * xStride + col);
            const float4 x1 = *reinterpret_cast<const float4*>(xs + b * xStride + col + 4);
            float s = unitAcc[b];
            s = fmaf(f[0], x0.x, s); s = fmaf(f[1], x0.y, s); s = fmaf(f[2], x0.z, s); s = fmaf(f[3], x0.w, s);
            s = fmaf(f[4], x1.x, s); s = fmaf(f[5], x1.y, s); s = fmaf(f[6], x1.z, s); s = fmaf(f[7], x1.w, s);
            unitAcc[b] = s;
          }
        } else {
          if (w.symmetric) q ^= 0x80808080u;  // int8 q → q + 128, so every code reads as unsigned
          const float f[4] = {byteFloat(q, 0), byteFloat(q, 1), byteFloat(q, 2), byteFloat(q, 3)};
#pragma unroll
          for (int b = 0; b < B; ++b) {
            const float4 x0 = *reinterpret_cast<const float4*>(xs + b * xStride + col);
            float s = unitAcc[b];
            s = fmaf(f[0], x0.x, s); s = fmaf(f[1], x0.y, s); s = fmaf(f[2], x0.z, s); s = fmaf(f[3], x0.w, s);
            unitAcc[b] = s;
          }
        }
      }
      // End of a sum unit (a group, or the chunk when groups are wider): apply its scale and zero.
      if ((((sb + 1) * 32) & ((1 << w.unitShift) - 1)) == 0) {
        const int unitInChunk = (((sb + 1) * 32) >> w.unitShift) - 1;
        const int64_t at = (group * w.scaleColumns + scaleColumn(w, chunk, kChunkCols, (sb + 1) * 32)) * 32 + lane;
        const float scale = __half2float(__ldg(w.scales + at));
        const float zero = w.symmetric ? w.symmetricZero : float(__ldg(w.zeros + at));
        const float offset = kScale * kBias + zero;
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const float sumX = xsum[b * sumStride + unitInChunk];
          acc[b] = fmaf(scale, fmaf(kScale, unitAcc[b], -offset * sumX), acc[b]);
          unitAcc[b] = 0.f;
        }
      }
    }
  }
};

// Codes on the tensor cores at every batch, fed from the lane-per-row layout as it is (no new layout; the
// float64 reference reads the same bytes), through a shared-memory ring.
//
// Stream: a warp's chunk is 8 pieces of 512 bytes (piece i: 16 bytes of each of the row group's 32 rows). The
// 32 lanes copy them with cp.async (lane l the 16 bytes of row l, evict-first), together with the chunk's
// scales and zeros (64 and 32 contiguous bytes a sum unit in the [G][S][32] arrays), into one slot of the
// warp's ring.
//
// Fragments: ldmatrix.x4 over a piece in shared memory hands lane l = 4g + t bytes 4t..4t+3 of rows g, g+8,
// g+16 and g+24: 8 codes (4 bits: columns 8t..8t+7 of the piece) or 4 codes (8 bits: columns 4t..4t+3) of each
// of four rows, which is the A fragment of m16n8k16 for rows 0-15 and 16-31 up to an order of k. k order is
// free as long as A and B agree: for 4 bits, the k slots (2t, 2t+1 | 2t+8, 2t+9) of the first MMA are columns
// (8t, 8t+4 | 8t+1, 8t+5) and of the second (8t+2, 8t+6 | 8t+3, 8t+7), which is what `(q >> s) & 0x000F000F`
// pairs up; for 8 bits they are columns (4t, 4t+1 | 4t+2, 4t+3), two byte permutes. So the transpose a new
// fragment-ordered layout would do at load time costs one ldmatrix a piece here, the same as a 16-byte shared
// load of a pre-ordered one. A piece is read from shared memory once, in 4 phases of 128 contiguous bytes:
// no bank conflicts.
//
// Dequantization: `(q & mask) | exponent` is 1024 + q in fp16 (0x6400; bf16 0x4300 = 128 + q for 4 bits), exact,
// so the MMA adds Σ (bias + q)·x in fp32 (products of small integers and 16-bit x are exact); at the end of each
// sum unit the bias and the zero come off with the unit's Σ x, folded into the scale's FMA:
// acc += s · (C − (bias + z) · Σx). 3 SHF + 4 LOP3 a 4-bit word of 8 codes, 2 PRMT an 8-bit word of 4.
//
// B operand (x): the batch is N (lanes g = batch row, 8 a tile; batch 16 takes two tiles), x staged in shared
// memory as 16-bit rows, 4-bit: each 8 columns stored in the order (0,4, 1,5, 2,6, 3,7) so that one 16-byte
// load per lane and piece is the B registers of both MMAs. Below batch 8 the lanes of the batch rows the compiled
// batch lacks load row g mod B (finite values whose C columns nobody reads), so no lane is predicated; rows the
// compiled batch has beyond the actual one are staged as zeros.
//
// Ring chunks: a layout chunk (8 pieces), or from quantHalvesMinBatch half of one (kHalves = 2: 4 pieces, 3
// stages), which leaves the staged x more of the shared memory (QuantGroupGemv.h). The sum unit is then at most
// the half (quantRingSumUnit).
//
// The common sum unit (kCommonUnitShift: int4 g128, int8 per channel) is compiled as its own loop, so that the
// unit ends are known and the pieces between them are one straight run of code (the runtime test after every
// piece kept ptxas from moving the next piece's shared loads above it).
//
// Accumulator C: lane (g, t) of tile (m, n) holds rows 16m + g (c0, c1) and 16m + g + 8 (c2, c3) for batch rows
// 8n + 2t and 8n + 2t + 1.
template <int Bits, ActivationType T, int kHalves,
          int kStages = (kHalves == 1 ? kQuantRingStages : kQuantHalfRingStages)>
struct QuantMmaFormat : QuantCodeStream {
  static constexpr int kLayoutChunkCols = Bits == 4 ? 256 : 128;
  static constexpr int kChunkCols = kLayoutChunkCols / kHalves;  // the ring's chunk
  static constexpr int kPieces = 8 / kHalves;
  static constexpr int kPieceCols = kLayoutChunkCols / 8;
  static constexpr int kRingStages = kStages;  // kQuantDeepRingStages for v7d's half chunks at batch 1-4
  static constexpr int kSlotBytes = kHalves == 1 ? kQuantSlotBytes : kQuantHalfSlotBytes;
  static constexpr int kCodeBytes = kHalves == 1 ? kQuantCodeBytes : kQuantHalfCodeBytes;
  static constexpr int kScaleBytes = kHalves == 1 ? kQuantScaleBytes : kQuantHalfScaleBytes;
  static_assert(kHalves == 1 || kHalves == 2, "whole or half layout chunks");
  // The sum unit compiled as its own loop: 128 columns (int4 g128; int8 per channel, whose unit is the chunk),
  // the half chunk of 8-bit codes (int8 per channel from quantHalvesMinBatch).
  static constexpr int kCommonUnitShift = Bits == 8 && kHalves == 2 ? 6 : 7;
  static constexpr int kPadHalves = quantStagePadHalves(Bits);
  static constexpr uint32_t kExponent = T == ActivationType::Float16 ? 0x64006400u : 0x43004300u;
  static constexpr float kBias = T == ActivationType::Float16 ? 1024.f : 128.f;
  static_assert(Bits == 4 || T == ActivationType::Float16, "8-bit codes on the tensor cores need fp16");

  template <int B> static constexpr int kTiles = B > 8 ? 2 : 1;  // batch tiles of 8
  template <int B> struct Accumulator {
    float v[2][kTiles<B>][4];
  };

  template <int B> __host__ __device__ static constexpr int64_t stagedWords(int64_t sliceCols) {
    return int64_t(B) * (sliceCols + kPadHalves) / 2;
  }
  template <int B>
  __device__ static __forceinline__ void stage(uint32_t* xs, int64_t b, int64_t col, int64_t sliceCols,
                                               const uint4& v) {
    uint4 out = v;
    if constexpr (Bits == 4)
      out = make_uint4(__byte_perm(v.x, v.z, 0x5410), __byte_perm(v.x, v.z, 0x7632), __byte_perm(v.y, v.w, 0x5410),
                       __byte_perm(v.y, v.w, 0x7632));
    *reinterpret_cast<uint4*>(xs + b * ((sliceCols + kPadHalves) / 2) + col / 2) = out;
  }

  // Sum units of a chunk, and the first scale column of the chunk.
  __device__ static __forceinline__ int unitsOf(const Params& w) {
    return w.chunksPerGroup == 0 ? kChunkCols >> w.unitShift : 1;
  }

  // `chunk` is the ring's: layout chunk chunk / kHalves, its pieces from (chunk mod kHalves) · kPieces.
  __device__ static __forceinline__ void copyChunk(const Params& w, int64_t group, int64_t chunk, int lane,
                                                   uint32_t slot, uint64_t evictFirst) {
    const int64_t layoutChunk = chunk / kHalves;
    const int firstPiece = int(chunk % kHalves) * kPieces;
    const uint4* codes = w.codes + ((group * w.chunks + layoutChunk) * 8 + firstPiece) * 32 + lane;
#pragma unroll
    for (int i = 0; i < kPieces; ++i)
      detail::copyAsyncEvictFirst(slot + i * 512 + lane * 16, codes + i * 32, evictFirst);
    const int units = unitsOf(w);
    const int64_t column = w.chunksPerGroup == 0 ? chunk * units : layoutChunk / w.chunksPerGroup;
    const int64_t at = (group * w.scaleColumns + column) * 32;  // first entry of the chunk's scale columns
    if (lane < 4 * units) detail::copyAsync(slot + kCodeBytes + lane * 16, w.scales + at + lane * 8);
    if (!w.symmetric && lane < 2 * units)
      detail::copyAsync(slot + kCodeBytes + kScaleBytes + lane * 16, w.zeros + at + lane * 16);
  }

  template <int B>
  __device__ static __forceinline__ void computeSlot(const Params& w, const uint8_t* slot, int64_t, int64_t,
                                                     int64_t localChunk, int lane, const uint32_t* xs,
                                                     int64_t sliceCols, const float* xsum, int64_t sumStride,
                                                     Accumulator<B>& acc) {
    // The launch staged no sums (quantZeroOnTensorCores): only this loop can run it.
    if constexpr (T == ActivationType::Float16) {
      if (w.zeroMma) {
        if (w.zeroRow)
          computeChunk<B, Bits == 4, kCommonUnitShift, true, true>(w, slot, localChunk, lane, xs, sliceCols, xsum,
                                                                   sumStride, acc);
        else
          computeChunk<B, Bits == 4, kCommonUnitShift, true>(w, slot, localChunk, lane, xs, sliceCols, xsum,
                                                             sumStride, acc);
        return;
      }
    }
    // Otherwise (other group sizes, PARETO_QUANT_ZERO_MMA=0) the odd columns in place with the 960 MMA, not at batch
    // 16: its two batch tiles double the extra MMAs, and it measured 5% slower with them (v6c). The common unit has
    // its own loop in fp16 only (bf16 and PARETO_QUANT_ODD=0 keep the runtime unit: fewer instantiations to compile).
    if constexpr (Bits == 4 && T == ActivationType::Float16 && B <= 8) {
      if (w.oddExponent) {
        if (w.unitShift == kCommonUnitShift)
          computeChunk<B, true, kCommonUnitShift>(w, slot, localChunk, lane, xs, sliceCols, xsum, sumStride, acc);
        else
          computeChunk<B, true, 0>(w, slot, localChunk, lane, xs, sliceCols, xsum, sumStride, acc);
        return;
      }
    } else if constexpr (T == ActivationType::Float16) {
      if (w.unitShift == kCommonUnitShift) {
        computeChunk<B, false, kCommonUnitShift>(w, slot, localChunk, lane, xs, sliceCols, xsum, sumStride, acc);
        return;
      }
    }
    computeChunk<B, false, 0>(w, slot, localChunk, lane, xs, sliceCols, xsum, sumStride, acc);
  }

  // kOddExponent (4-bit codes, fp16): the odd columns of each 8-code word are read in place, under the fp16
  // exponent of 64 (0x5400: mantissa bits 4-7 are 1/16 each, so (q << 4) | 0x5400 is 64 + q, exact), which saves
  // the two shifts that move them down: 1 SHF + 4 LOP3 a word instead of 3 + 4. Their bias (64, not 1024) is
  // made up on the tensor cores: one more MMA a row tile and piece, A = 960 at every k, B = the lane's odd-column
  // x registers, adds 960 · Σ x over the piece's odd columns to every row, after which every column reads
  // 1024 + q as before (960 · x is exact in fp32, like every product here).
  // kUnitShift: log2 of the sum unit when known at compile time, 0: w.unitShift.
  // kZeroMma (with kOddExponent; quantZeroOnTensorCores): the zero point is subtracted on the tensor cores too, so
  // x is staged without its per-unit sums. The 960 MMA of the odd columns takes A = 960 − (1024 + z) = −(64 + z) of
  // each row instead of 960, and one more MMA a row tile and piece adds −(1024 + z) · x over the even columns: the
  // unit's C is Σ (q − z) · x and its end is acc += s · C. Every A value is exact in fp16 (z ≤ 63; 4-bit zeros are
  // ≤ 15) and every product exact in fp32, as before. 8-bit codes (1024 + q at every column): one more MMA a row
  // tile and piece with A = −(1024 + z) (z ≤ 255, exact), into the other chain.
  // kZeroRow (with kZeroMma; QuantParams::zeroRow): the zero's product splits into a part every row shares, −1024 ·
  // Σ x over the even columns − 64 · Σ x over the odd ones (int8: −1024 · Σ x), and −z · Σ x, whose Σ x every row
  // shares too; so one MMA a batch tile and code MMA pair takes both, the first in its A rows 0-7 (the bias at each
  // k; symmetric codes add their constant z to it), Σ x in rows 8-15 (ones), into a C that the lane reads as
  // (bias, bias, Σx, Σx) for its batch rows 2t, 2t + 1, and the unit's end takes acc += s · (C + bias − z · Σ x).
  // Per piece that is kN (int8) or 2·kN (int4) zero MMAs where kZeroMma alone issues 2·kN or 4·kN: at batch 16, 12 MMAs
  // a piece instead of 16 (int4). The bias products are exact in fp32 as before; z · Σ x is one more rounding.
  template <int B, bool kOddExponent, int kUnitShift, bool kZeroMma = false, bool kZeroRow = false>
  __device__ static __forceinline__ void computeChunk(const Params& w, const uint8_t* slot, int64_t localChunk,
                                                      int lane, const uint32_t* xs, int64_t sliceCols,
                                                      const float* xsum, int64_t sumStride, Accumulator<B>& acc) {
    using detail::maskAndSet;
    constexpr int kN = kTiles<B>;
    const int g = lane >> 2, t = lane & 3;
    const int64_t rowWords = (sliceCols + kPadHalves) / 2;
    // The lane's B rows (batch g and 8 + g; g mod B below batch 8) in the staging, at this chunk's first column.
    const uint32_t* xRow[kN];
#pragma unroll
    for (int n = 0; n < kN; ++n)
      xRow[n] = xs + (B >= 8 ? 8 * n + g : g & (B - 1)) * rowWords + localChunk * (kChunkCols / 2) +
                (Bits == 4 ? 4 * t : 2 * t);
    const int unitShift = kUnitShift > 0 ? kUnitShift : w.unitShift;
    const uint32_t mask = 0x000F000Fu, exponent = kExponent;
    const uint32_t slotAddress = detail::sharedAddressOf(slot);
    // Two accumulators a tile pair (even and odd MMAs), so that consecutive MMAs do not wait on each other.
    float c[2][2][kN][4];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < kN; ++n)
#pragma unroll
          for (int i = 0; i < 4; ++i) c[h][m][n][i] = 0.f;
    const int units = kUnitShift > 0 ? (kChunkCols >> kUnitShift > 1 ? kChunkCols >> kUnitShift : 1) : unitsOf(w);
    static_assert(!kZeroMma || ((kOddExponent || Bits == 8) && kUnitShift > 0),
                  "the zero on the tensor cores: 4-bit codes with the odd exponent or 8-bit codes, a known unit");
    // kZeroMma: the A operands of the unit's zeros, [m][0] rows 16m + g, [m][1] rows 16m + g + 8, both halves alike:
    // even columns −(1024 + z), odd columns −(64 + z) (quantZeroEvenBits, quantZeroOddBits).
    uint32_t zeroEven[2][2], zeroOdd[2][2];
    static_assert(!kZeroRow || kZeroMma, "the row-independent zero is a form of the zero on the tensor cores");
    // kZeroRow: the C of the shared terms, a batch tile each (rows 0-7 the bias, 8-15 Σ x), and their A operands:
    // rows g (a0, a2: the even and the odd columns' bias) and g + 8 (a1, a3: ones).
    [[maybe_unused]] float zr[kN][4];
    [[maybe_unused]] uint32_t rowBiasEven = 0, rowBiasOdd = 0;
    [[maybe_unused]] constexpr uint32_t kOnes = 0x3C003C00u;  // 1.0 in fp16, twice
    if constexpr (kZeroRow) {
      // Symmetric codes: their constant zero joins the bias, and Σ x is not used.
      const uint32_t z = w.symmetric ? uint32_t(w.symmetricZero) : 0u;
      rowBiasEven = quantZeroEvenBits(z) * 0x00010001u;
      rowBiasOdd = (Bits == 4 ? quantZeroOddBits(z) : quantZeroEvenBits(z)) * 0x00010001u;
#pragma unroll
      for (int n = 0; n < kN; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) zr[n][i] = 0.f;
    }
#pragma unroll
    for (int piece = 0; piece < kPieces; ++piece) {
      if constexpr (kZeroMma && !kZeroRow) {
        if (((piece * kPieceCols) & ((1 << kUnitShift) - 1)) == 0) {  // the first piece of a unit
          const int unit = units == 1 ? 0 : (piece * kPieceCols) >> kUnitShift;
          const uint8_t* zeros = slot + kCodeBytes + kScaleBytes + unit * 32;
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const uint32_t z = w.symmetric ? uint32_t(w.symmetricZero) : uint32_t(zeros[g + 8 * k]);
            zeroEven[k / 2][k % 2] = quantZeroEvenBits(z) * 0x00010001u;
            zeroOdd[k / 2][k % 2] = quantZeroOddBits(z) * 0x00010001u;
          }
        }
      }
      uint32_t r[4];
      detail::ldmatrixX4(r, slotAddress + piece * 512 + lane * 16);
      if constexpr (Bits == 4) {
        uint4 xb[kN];
#pragma unroll
        for (int n = 0; n < kN; ++n) xb[n] = *reinterpret_cast<const uint4*>(xRow[n] + piece * (kPieceCols / 2));
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          const uint32_t lo = r[2 * m], hi = r[2 * m + 1];  // rows 16m + g, 16m + g + 8
          uint32_t lo04, hi04, lo15, hi15, lo26, hi26, lo37, hi37;
          if constexpr (kOddExponent) {
            const uint32_t oddMask = 0x00F000F0u, oddExponent = 0x54005400u;
            const uint32_t lo8 = lo >> 8, hi8 = hi >> 8;
            lo04 = maskAndSet(lo, mask, exponent), hi04 = maskAndSet(hi, mask, exponent);
            lo15 = maskAndSet(lo, oddMask, oddExponent), hi15 = maskAndSet(hi, oddMask, oddExponent);
            lo26 = maskAndSet(lo8, mask, exponent), hi26 = maskAndSet(hi8, mask, exponent);
            lo37 = maskAndSet(lo8, oddMask, oddExponent), hi37 = maskAndSet(hi8, oddMask, oddExponent);
          } else {
            lo04 = maskAndSet(lo, mask, exponent), hi04 = maskAndSet(hi, mask, exponent);
            lo15 = maskAndSet(lo >> 4, mask, exponent), hi15 = maskAndSet(hi >> 4, mask, exponent);
            lo26 = maskAndSet(lo >> 8, mask, exponent), hi26 = maskAndSet(hi >> 8, mask, exponent);
            lo37 = maskAndSet(lo >> 12, mask, exponent), hi37 = maskAndSet(hi >> 12, mask, exponent);
          }
#pragma unroll
          for (int n = 0; n < kN; ++n) {
            detail::mma16816<T>(c[0][m][n], lo04, hi04, lo15, hi15, xb[n].x, xb[n].y);
            detail::mma16816<T>(c[1][m][n], lo26, hi26, lo37, hi37, xb[n].z, xb[n].w);
            if constexpr (kZeroRow) {
              if (m == 1) {  // once a piece and batch tile, after both row tiles' code MMAs
                detail::mma16816<T>(zr[n], rowBiasEven, kOnes, rowBiasOdd, kOnes, xb[n].x, xb[n].y);
                detail::mma16816<T>(zr[n], rowBiasEven, kOnes, rowBiasOdd, kOnes, xb[n].z, xb[n].w);
              }
            } else if constexpr (kZeroMma) {
              // One into each chain for each m, as below.
              detail::mma16816<T>(c[m][m][n], zeroEven[m][0], zeroEven[m][1], zeroOdd[m][0], zeroOdd[m][1], xb[n].x,
                                  xb[n].y);
              detail::mma16816<T>(c[1 - m][m][n], zeroEven[m][0], zeroEven[m][1], zeroOdd[m][0], zeroOdd[m][1],
                                  xb[n].z, xb[n].w);
            } else if constexpr (kOddExponent) {
              const uint32_t k960 = 0x63806380u;  // 960 in fp16, twice
              // Into the other chain for m = 0 than for m = 1, so that no chain gets two MMAs a piece.
              detail::mma16816<T>(c[m][m][n], k960, k960, k960, k960, xb[n].y, xb[n].w);
            }
          }
        }
      } else {
        uint2 xb[kN];
#pragma unroll
        for (int n = 0; n < kN; ++n) xb[n] = *reinterpret_cast<const uint2*>(xRow[n] + piece * (kPieceCols / 2));
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          uint32_t lo = r[2 * m], hi = r[2 * m + 1];
          if (w.symmetric) lo ^= 0x80808080u, hi ^= 0x80808080u;  // int8 q → q + 128, so every code reads as unsigned
          const uint32_t lo01 = __byte_perm(lo, 0x64646464u, 0x4140), hi01 = __byte_perm(hi, 0x64646464u, 0x4140);
          const uint32_t lo23 = __byte_perm(lo, 0x64646464u, 0x4342), hi23 = __byte_perm(hi, 0x64646464u, 0x4342);
#pragma unroll
          for (int n = 0; n < kN; ++n) {
            detail::mma16816<T>(c[piece & 1][m][n], lo01, hi01, lo23, hi23, xb[n].x, xb[n].y);
            if constexpr (kZeroRow) {
              if (m == 1) detail::mma16816<T>(zr[n], rowBiasEven, kOnes, rowBiasOdd, kOnes, xb[n].x, xb[n].y);
            } else if constexpr (kZeroMma)  // −(1024 + z) at every k of rows 16m + g and 16m + g + 8, into the other chain
              detail::mma16816<T>(c[(piece & 1) ^ 1][m][n], zeroEven[m][0], zeroEven[m][1], zeroEven[m][0],
                                  zeroEven[m][1], xb[n].x, xb[n].y);
          }
        }
      }
      // End of a sum unit (a group, or the chunk when groups are wider): scales and zeros of the lane's four
      // rows, the unit's Σx of its two batch rows a tile.
      if ((((piece + 1) * kPieceCols) & ((1 << unitShift) - 1)) == 0) {
        const int unit = units == 1 ? 0 : (((piece + 1) * kPieceCols) >> unitShift) - 1;
        const __half* scales = reinterpret_cast<const __half*>(slot + kCodeBytes) + unit * 32;
        [[maybe_unused]] const uint8_t* zeros = slot + kCodeBytes + kScaleBytes + unit * 32;
        float s[4], o[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          s[k] = __half2float(scales[g + 8 * k]);
          if constexpr (!kZeroMma) o[k] = kBias + (w.symmetric ? w.symmetricZero : float(zeros[g + 8 * k]));
          if constexpr (kZeroRow) o[k] = w.symmetric ? 0.f : float(zeros[g + 8 * k]);  // z; symmetric: in the bias
        }
#pragma unroll
        for (int n = 0; n < kN; ++n) {
          const int b0 = 8 * n + 2 * t, b1 = b0 + 1;
          float sum0 = 0.f, sum1 = 0.f;
          if constexpr (!kZeroMma) {
            sum0 = b0 < B ? xsum[b0 * sumStride + unit] : 0.f;
            sum1 = b1 < B ? xsum[b1 * sumStride + unit] : 0.f;
          }
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            float* a = acc.v[m][n];
            const float* c0 = c[0][m][n];
            const float* c1 = c[1][m][n];
            if constexpr (kZeroRow) {  // C + bias − z · Σ x is Σ (q − z) · x
              const float* r = zr[n];
#pragma unroll
              for (int i = 0; i < 4; ++i)
                a[i] = fmaf(s[2 * m + i / 2], (c0[i] + c1[i]) + fmaf(-o[2 * m + i / 2], r[2 + i % 2], r[i % 2]), a[i]);
            } else if constexpr (kZeroMma) {  // C is already Σ (q − z) · x
#pragma unroll
              for (int i = 0; i < 4; ++i) a[i] = fmaf(s[2 * m + i / 2], c0[i] + c1[i], a[i]);
            } else {
              a[0] = fmaf(s[2 * m], fmaf(-o[2 * m], sum0, c0[0] + c1[0]), a[0]);
              a[1] = fmaf(s[2 * m], fmaf(-o[2 * m], sum1, c0[1] + c1[1]), a[1]);
              a[2] = fmaf(s[2 * m + 1], fmaf(-o[2 * m + 1], sum0, c0[2] + c1[2]), a[2]);
              a[3] = fmaf(s[2 * m + 1], fmaf(-o[2 * m + 1], sum1, c0[3] + c1[3]), a[3]);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) c[0][m][n][i] = c[1][m][n][i] = 0.f;
          }
          if constexpr (kZeroRow)
#pragma unroll
            for (int i = 0; i < 4; ++i) zr[n][i] = 0.f;
        }
      }
    }
  }

  template <int B>
  __device__ static __forceinline__ void finish(const Accumulator<B>& acc, int lane, float (&total)[B]) {
    detail::rowsOfFragments<B, kTiles<B>>(acc.v, lane, total);
  }
};

template <int Bits, ActivationType T, bool kFolds>
std::string launch(const GemvProblem& p, const QuantGroupGemvWeight& w, const GemvSplit& s, float* partials,
                   int* counters, cudaStream_t stream) {
  // The split (quantGroupGemvSplit) sized the shared memory and counted the chunks for the same choices:
  // quantUsesTensorCores and quantRingHalves.
  const int batch = compiledBatch(p.batch);
  const bool mma = quantUsesTensorCores(Bits, T, batch);
  const int halves = quantRingHalves(Bits, T, batch);
  const int64_t sumUnit = quantRingSumUnit(w.groupSize, Bits, halves);
  QuantParams params{static_cast<const uint4*>(w.codes),
                     reinterpret_cast<const __half*>(w.scales),
                     w.zeros,
                     quantChunks(p.cols, Bits),
                     w.scaleColumns,
                     __builtin_ctzll(uint64_t(sumUnit)),
                     w.groupSize < quantChunkCols(Bits) ? 0
                     : w.groupSize == p.cols           ? int(quantChunks(p.cols, Bits))
                                                       : int(w.groupSize / quantChunkCols(Bits)),
                     Bits == 4 ? 8.f : 128.f,
                     w.symmetric,
                     quantOddExponent(),
                     quantZeroOnTensorCores(w, T, batch),
                     quantZeroRowEnabled()};
  // The zero point on the tensor cores stages no sums (the split reserved none); the scale units stay sumUnit's.
  const auto a = detail::makeLaunch(p, s, params.chunks * halves, params.zeroMma ? 0 : int(sumUnit), partials, counters);
  cudaError_t e;
  if constexpr (Bits == 4 || T == ActivationType::Float16) {
    if (mma) {
      // v7d (quantDeepRing): int4 fp16 half chunks in 4 stages at batch 1-4, compiled for those batches only.
      if constexpr (Bits == 4 && T == ActivationType::Float16) {
        if (quantDeepRing(Bits, T, batch)) {
          using Deep = QuantMmaFormat<Bits, T, 2, kQuantDeepRingStages>;
          e = batch == 1   ? detail::launchPackedGemvAt<Deep, 1, T, kFolds>(params, a, s.sharedBytes, stream)
              : batch == 2 ? detail::launchPackedGemvAt<Deep, 2, T, kFolds>(params, a, s.sharedBytes, stream)
                           : detail::launchPackedGemvAt<Deep, 4, T, kFolds>(params, a, s.sharedBytes, stream);
          return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "quant_group_gemv launch");
        }
      }
      // Half chunks otherwise only from batch 8 (quantRingHalves): only those batches are compiled for them.
      if (halves == 2)
        e = batch <= 8
                ? detail::launchPackedGemvAt<QuantMmaFormat<Bits, T, 2>, 8, T, kFolds>(params, a, s.sharedBytes, stream)
                : detail::launchPackedGemvAt<QuantMmaFormat<Bits, T, 2>, 16, T, kFolds>(params, a, s.sharedBytes,
                                                                                         stream);
      else
        e = detail::launchPackedGemv<QuantMmaFormat<Bits, T, 1>, T, kFolds>(params, a, s.sharedBytes, stream);
      return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "quant_group_gemv launch");
    }
  }
  e = detail::launchPackedGemv<QuantFfmaFormat<Bits, T>, T, kFolds>(params, a, s.sharedBytes, stream);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "quant_group_gemv launch");
}

// Both type and width dispatch, for the kernels with or without the folds' code.
template <bool kFolds>
std::string launchAny(const GemvProblem& p, const QuantGroupGemvWeight& w, const GemvSplit& s, float* partials,
                      int* counters, cudaStream_t stream) {
  const bool f16 = p.type == ActivationType::Float16;
  if (w.bits == 4)
    return f16 ? launch<4, ActivationType::Float16, kFolds>(p, w, s, partials, counters, stream)
               : launch<4, ActivationType::BFloat16, kFolds>(p, w, s, partials, counters, stream);
  return f16 ? launch<8, ActivationType::Float16, kFolds>(p, w, s, partials, counters, stream)
             : launch<8, ActivationType::BFloat16, kFolds>(p, w, s, partials, counters, stream);
}

// Defined in quant_group_gemv_folded.cu: launchAny<true>.
std::string launchFolded(const GemvProblem& p, const QuantGroupGemvWeight& w, const GemvSplit& s, float* partials,
                         int* counters, cudaStream_t stream);

}  // namespace pareto::kernels::quant_group_gemv
