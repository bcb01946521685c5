// The 2:4 + int4 GEMV's formats and launch, compiled by two translation units: bitmask_int4_gemv.cu (the entry point
// and the plain launches) and bitmask_int4_gemv_folded.cu (the launches with the decode step's ops folded in,
// GemvProblem's input and accumulate): every kernel exists in both forms (GemvDriver.cuh: kFolds), and one file
// compiling both took twice as long as any other kernel file. See BitmaskInt4Gemv.h for the layout, GemvProblem.h
// for the work decomposition.
#pragma once

#include <string>

#include "BitmaskInt4Gemv.h"
#include "GemvDriver.cuh"
#include "TensorCoreOps.cuh"

namespace pareto::kernels::bitmask_int4_gemv {

template <ActivationType T>
struct BitmaskInt4Format {
  static constexpr int kChunkCols = 256;
  struct Params {
    const uint4* masks;
    const uint4* codes;
    const __half* scales;
    const uint8_t* zeros;
    int64_t chunks;
    int64_t scaleColumns;
    int wordsPerGroupShift;  // groups narrower than a chunk: log2(words a group); else -1
    int64_t chunksPerGroup;  // groups as wide as a chunk or wider
    bool symmetric;
  };

  // A lane's 8 mask words and 128 kept codes of one chunk (GemvDriver.cuh: `load` issues them, `compute` uses
  // them; scales and zeros are small and read cached in `compute`).
  struct Fragment {
    uint4 mask[2];
    uint4 code[4];
  };
  struct RowState {};

  __device__ static __forceinline__ Fragment load(const Params& w, int64_t group, int64_t chunk, int lane) {
    const int64_t base = group * w.chunks + chunk;
    Fragment f;
    f.mask[0] = detail::loadStreaming(w.masks + (base * 32 + lane) * 2);
    f.mask[1] = detail::loadStreaming(w.masks + (base * 32 + lane) * 2 + 1);
#pragma unroll
    for (int i = 0; i < 4; ++i) f.code[i] = detail::loadStreaming(w.codes + (base * 4 + i) * 32 + lane);
    return f;
  }

  __device__ static __forceinline__ RowState rowBegin(const Params&, int64_t) { return {}; }

  template <int B>
  __device__ static __forceinline__ void compute(const Params& w, const Fragment& f, int64_t group, int64_t chunk,
                                                 int lane, const float* xs, int64_t xStride, const float*, int64_t,
                                                 float (&acc)[B]) {
    const uint4 m0 = f.mask[0], m1 = f.mask[1];
    const uint4(&c)[4] = f.code;
    const uint32_t words[8] = {m0.x, m0.y, m0.z, m0.w, m1.x, m1.y, m1.z, m1.w};
    const uint32_t codeWords[16] = {c[0].x, c[0].y, c[0].z, c[0].w, c[1].x, c[1].y, c[1].z, c[1].w,
                                    c[2].x, c[2].y, c[2].z, c[2].w, c[3].x, c[3].y, c[3].z, c[3].w};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int64_t scaleColumn = w.wordsPerGroupShift >= 0
                                      ? chunk * (8 >> w.wordsPerGroupShift) + (k >> w.wordsPerGroupShift)
                                      : chunk / w.chunksPerGroup;
      const int64_t at = (group * w.scaleColumns + scaleColumn) * 32 + lane;
      const float scale = __half2float(__ldg(w.scales + at));
      const float bias = 0.5f + (w.symmetric ? 8.f : float(__ldg(w.zeros + at))) * (1.f / 256.f);
      // The word's 16 codes are two 32-bit words: kept value j in nibble j % 8 of codeWords[2k + j / 8].
      const uint32_t lo0 = codeWords[2 * k] & 0x0F0F0F0Fu, hi0 = (codeWords[2 * k] >> 4) & 0x0F0F0F0Fu;
      const uint32_t lo1 = codeWords[2 * k + 1] & 0x0F0F0F0Fu, hi1 = (codeWords[2 * k + 1] >> 4) & 0x0F0F0F0Fu;
      float wordAcc[B];
#pragma unroll
      for (int b = 0; b < B; ++b) wordAcc[b] = 0.f;
      uint32_t mask = words[k];
      const float* xw = xs + k * 32;
#pragma unroll
      for (int j = 15; j >= 0; --j) {
        const int col = 31 - __clz(mask);
        mask ^= 1u << col;
        const uint32_t src = j < 8 ? ((j % 2) ? hi0 : lo0) : ((j % 2) ? hi1 : lo1);
        const int byte = (j % 8) / 2;
        const float f = __uint_as_float(__byte_perm(src, 0x3F000000u, (7 << 12) | (byte << 8) | (4 << 4) | 4));
        const float q = f - bias;  // (q − z) / 256, exact
#pragma unroll
        for (int b = 0; b < B; ++b) wordAcc[b] = fmaf(q, xw[b * xStride + col], wordAcc[b]);
      }
#pragma unroll
      for (int b = 0; b < B; ++b) acc[b] = fmaf(256.f * scale, wordAcc[b], acc[b]);
    }
  }

  template <int B, ActivationType TT>
  __device__ static __forceinline__ void rowExtra(const Params&, const RowState&, int64_t, int, int,
                                                  const detail::InputReader<TT>&, float (&)[B]) {}
};

// (a − b) on each 16-bit half, exact here: both are integers below 2^11 (fp16) or 2^8 (bf16).
template <ActivationType T>
__device__ __forceinline__ uint32_t subtractPairs(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (T == ActivationType::Float16)
    asm("sub.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else
    asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// 2:4 + int4 on the sparse tensor cores (bitmaskInt4UsesTensorCores; mma.sp), through the shared-memory ring of
// GemvDriver.cuh, from the lane-interleaved layout as it is (the float64 reference reads the same codes, scales and
// zeros; the masks it reads are here the metadata computed from them at load time).
//
// Stream: the ring's chunk is half a layout chunk (128 columns: 64 kept codes a row = 2 code pieces of 16 bytes a
// lane, and 512 bytes of metadata). The 32 lanes copy the 2 code pieces and the metadata (evict-first) and the
// chunk's scale and zero columns with cp.async into a slot of the warp's ring.
//
// A fragment: in 2:4 the kept codes 2q and 2q + 1 of a row are its column group q, and they are byte q of the
// lane's code stream (low nibble first). ldmatrix.x4 over a 512-byte code piece (64 columns, groups 0-15) hands
// lane l = 4g + t bytes 4t .. 4t + 3 (groups 4t .. 4t + 3) of rows g, g + 8, g + 16, g + 24. A group's byte
// becomes the pair (q0 − z, q1 − z) by one PRMT (the byte and the byte shifted by 4 into the two halves), one LOP3
// (`& 0x000F000F | exponent`: 1024 + q in fp16, 128 + q in bf16) and one subtraction of (exponent + z), exact: the
// pair of kept values that m16n8k32 mma.sp takes as it is. The piece is two k-blocks of 32 columns: k-block kb's
// compressed columns 2t, 2t + 1 (group slot t) are group 4t + 2kb and its columns 2t + 8, 2t + 9 (slot t + 4)
// group 4t + 2kb + 1, so slot s < 4 is group 4s + 2kb and slot s + 4 group 4s + 2kb + 1 of the piece.
//
// Metadata: lane t = 0 of a quad holds slots 0-3, i.e. the groups 2kb, 4 + 2kb, 8 + 2kb, 12 + 2kb of the piece, lane
// t = 1 slots 4-7, the groups one higher. The words come computed from the masks at load time
// (bitmaskInt4MmaMetadata), in the order the lanes read them: one 16-byte shared load a piece and lane (its four
// MMAs' registers), where deriving them from the mask nibbles took ~50 instructions a piece.
//
// B (x, batch as N): k-block kb's dense rows 4s + (0..3) are the columns of its slot s's group, so lane t = 2u + h
// needs columns 16u + 8kb + 2h + (0, 1) + 4·lo + 32·hi (lo, hi ∈ {0, 1}) for its registers b(hi + 2lo). x is staged
// with each 64 columns' pairs in that order (StagedOrder), so a lane's B registers of a piece are two 16-byte
// loads a batch tile (k-block 0, then 1).
//
// So the MMA sums (q − z)·x exactly in fp32 over each scale group (a unit: a piece at 32 kept values a scale, else
// the chunk), and the scale of each of the lane's rows multiplies the unit's sum: acc += s · C.
//
// Accumulator C: lane (g, t) of tile (m, n) holds rows 16m + g (c0, c1) and 16m + g + 8 (c2, c3) for batch rows
// 8n + 2t and 8n + 2t + 1.
template <ActivationType T>
struct BitmaskInt4MmaFormat {
  static constexpr int kChunkCols = kBitmaskInt4MmaChunkCols;
  static constexpr int kRingStages = kBitmaskInt4RingStages;
  static constexpr int kSlotBytes = kBitmaskInt4SlotBytes;
  static constexpr int kPadHalves = kBitmaskInt4StagePadHalves;
  static constexpr uint32_t kExponent = T == ActivationType::Float16 ? 0x64006400u : 0x43004300u;
  struct Params {
    const uint4* metadata;  // [G][C][2 halves][32 vectors] (BitmaskInt4Gemv.h)
    const uint4* codes;
    const uint4* scales;
    const uint4* zeros;
    int64_t chunks;        // the layout's 256-column chunks a row (the ring's chunks are halves of them)
    int64_t scaleColumns;  // S (BitmaskInt4Gemv.h)
    int chunksPerScale;    // ring chunks a scale column (0: two scale columns a chunk, 32 kept values a scale)
    bool symmetric;
  };
  template <int B> static constexpr int kTiles = B > 8 ? 2 : 1;  // batch tiles of 8
  template <int B> struct Accumulator {
    float v[2][kTiles<B>][4];  // [m-tile][batch tile][register]
  };

  template <int B> __host__ __device__ static constexpr int64_t stagedWords(int64_t sliceCols) {
    return int64_t(B) * (sliceCols + kPadHalves) / 2;
  }
  // StagedOrder: columns col .. col + 7 are pairs 4c + j (c = (col mod 64) / 8, j = 0..3) of their 64 columns; pair
  // 16hi + 8u + 4kb + 2lo + h (c = 4hi + 2u + kb, j = 2lo + h) goes to word 4(2t + kb) + hi + 2lo, t = 2u + h, of
  // the 64 columns' 32 words.
  template <int B>
  __device__ static __forceinline__ void stage(uint32_t* xs, int64_t b, int64_t col, int64_t sliceCols,
                                               const uint4& v) {
    const int c = int(col & 63) >> 3;
    uint32_t* piece = xs + b * ((sliceCols + kPadHalves) / 2) + (col & ~int64_t(63)) / 2 +
                      (16 * ((c >> 1) & 1) + 4 * (c & 1) + (c >> 2));
    piece[0] = v.x, piece[8] = v.y, piece[2] = v.z, piece[10] = v.w;
  }

  __device__ static __forceinline__ void copyChunk(const Params& w, int64_t group, int64_t chunk, int lane,
                                                   uint32_t slot, uint64_t evictFirst) {
    const int64_t base = group * w.chunks + chunk / 2;
    const int half = int(chunk % 2);
    const uint4* codes = w.codes + (base * 4 + 2 * half) * 32 + lane;
    detail::copyAsyncEvictFirst(slot + lane * 16, codes, evictFirst);
    detail::copyAsyncEvictFirst(slot + 512 + lane * 16, codes + 32, evictFirst);
    // The half chunk's metadata: 512 contiguous bytes, a 16-byte vector a lane.
    detail::copyAsyncEvictFirst(slot + kBitmaskInt4CodeBytes + lane * 16, w.metadata + (base * 2 + half) * 32 + lane,
                                evictFirst);
    // Scale columns [G][S][32] (64 bytes a column of fp16, 32 of zeros); 2 consecutive columns a chunk at 32 kept
    // values a scale, else the one column holding the chunk's 64 kept values.
    const int columns = w.chunksPerScale == 0 ? 2 : 1;
    const int64_t column = w.chunksPerScale == 0 ? 2 * chunk : chunk / w.chunksPerScale;
    const int64_t at = group * w.scaleColumns + column;  // first column of the chunk
    const uint32_t scaleSlot = slot + kBitmaskInt4CodeBytes + kBitmaskInt4MetadataBytes;
    if (lane < 4 * columns) detail::copyAsync(scaleSlot + lane * 16, w.scales + at * 4 + lane);
    if (!w.symmetric && lane >= 8 && lane < 8 + 2 * columns)
      detail::copyAsync(scaleSlot + kBitmaskInt4ScaleBytes + (lane - 8) * 16, w.zeros + at * 2 + (lane - 8));
  }

  template <int B>
  __device__ static __forceinline__ void computeSlot(const Params& w, const uint8_t* slot, int64_t, int64_t,
                                                     int64_t localChunk, int lane, const uint32_t* xs,
                                                     int64_t sliceCols, const float*, int64_t, Accumulator<B>& acc) {
    constexpr int kN = kTiles<B>;
    const int g = lane >> 2, t = lane & 3;
    const int64_t rowWords = (sliceCols + kPadHalves) / 2;
    // The lane's B rows (batch g and 8 + g) in the staging at its 8 words of the chunk's first piece; null: zeros.
    const uint32_t* xRow[kN];
#pragma unroll
    for (int n = 0; n < kN; ++n)
      xRow[n] = 8 * n + g < B ? xs + (8 * n + g) * rowWords + localChunk * (kChunkCols / 2) + 8 * t : nullptr;
    // The metadata registers of the lane's MMAs (lanes t and t + 2 read the same; only t = 0, 1 are used):
    // [piece] = {(kb 0, m 0), (0, 1), (1, 0), (1, 1)}. The 8 lanes of a quarter-warp read 4 distinct vectors 32
    // bytes apart: no bank conflict.
    uint4 metadata[2];
#pragma unroll
    for (int p = 0; p < 2; ++p)
      metadata[p] = *reinterpret_cast<const uint4*>(slot + kBitmaskInt4CodeBytes + ((g * 2 + (t & 1)) * 2 + p) * 16);
    const uint8_t* scaleSlot = slot + kBitmaskInt4CodeBytes + kBitmaskInt4MetadataBytes;
    const bool twoUnits = w.chunksPerScale == 0;
    const uint32_t slotAddress = detail::sharedAddressOf(slot);
    float c[2][2][kN][4];  // [chain: k-block][m-tile][batch tile][register], the unit's sums
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < kN; ++n)
#pragma unroll
          for (int i = 0; i < 4; ++i) c[h][m][n][i] = 0.f;
    const auto applyUnit = [&](int unit) {
      const __half* scales = reinterpret_cast<const __half*>(scaleSlot) + unit * 32;
      float s[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) s[j] = __half2float(scales[g + 8 * j]);
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < kN; ++n) {
          float* a = acc.v[m][n];
          const float* c0 = c[0][m][n];
          const float* c1 = c[1][m][n];
          a[0] = fmaf(s[2 * m], c0[0] + c1[0], a[0]);
          a[1] = fmaf(s[2 * m], c0[1] + c1[1], a[1]);
          a[2] = fmaf(s[2 * m + 1], c0[2] + c1[2], a[2]);
          a[3] = fmaf(s[2 * m + 1], c0[3] + c1[3], a[3]);
#pragma unroll
          for (int i = 0; i < 4; ++i) c[0][m][n][i] = c[1][m][n][i] = 0.f;
        }
    };
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      // exponent + z of the lane's four rows, twice (the unit of this piece: column p at 32 kept values a scale).
      uint32_t zero[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t z = w.symmetric ? 8u : uint32_t(scaleSlot[kBitmaskInt4ScaleBytes + (twoUnits ? p : 0) * 32 + g + 8 * j]);
        zero[j] = kExponent | (z * 0x00010001u);
      }
      uint32_t r[4];
      detail::ldmatrixX4(r, slotAddress + p * 512 + lane * 16);
      uint4 xb[kN][2];
#pragma unroll
      for (int n = 0; n < kN; ++n)
#pragma unroll
        for (int kb = 0; kb < 2; ++kb)
          xb[n][kb] = xRow[n] ? *reinterpret_cast<const uint4*>(xRow[n] + p * 32 + 4 * kb) : make_uint4(0, 0, 0, 0);
      uint32_t shifted[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) shifted[j] = r[j] >> 4;
#pragma unroll
      for (int kb = 0; kb < 2; ++kb) {
        // pair[j][h]: group 4t + 2kb + h of row g + 8j as (q0 − z, q1 − z).
        uint32_t pair[4][2];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            // Byte i of r (low nibble: the first kept code) into the low half, byte i of r >> 4 into the high one.
            const int i = 2 * kb + h;
            const uint32_t raw = __byte_perm(r[j], shifted[j], uint32_t(i | i << 4 | (4 + i) << 8 | (4 + i) << 12));
            pair[j][h] = subtractPairs<T>(detail::maskAndSet(raw, 0x000F000Fu, kExponent), zero[j]);
          }
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          const uint32_t e = kb == 0 ? (m == 0 ? metadata[p].x : metadata[p].y)
                                     : (m == 0 ? metadata[p].z : metadata[p].w);
#pragma unroll
          for (int n = 0; n < kN; ++n)
            detail::mmaSparse16832<T>(c[kb][m][n], pair[2 * m][0], pair[2 * m + 1][0], pair[2 * m][1],
                                      pair[2 * m + 1][1], xb[n][kb].x, xb[n][kb].y, xb[n][kb].z, xb[n][kb].w, e);
        }
      }
      if (twoUnits) applyUnit(p);
      else if (p == 1) applyUnit(0);
    }
  }

  template <int B>
  __device__ static __forceinline__ void finish(const Accumulator<B>& acc, int lane, float (&total)[B]) {
    detail::rowsOfFragments<B, kTiles<B>>(acc.v, lane, total);
  }
};

template <ActivationType T, bool kFolds>
std::string launch(const GemvProblem& p, const BitmaskInt4GemvWeight& w, const GemvSplit& s, float* partials,
                   int* counters, cudaStream_t stream) {
  const int64_t chunks = ceilDiv(p.cols, 256);
  if (bitmaskInt4UsesTensorCores(w.n, w.m, w.groupSize, p.cols)) {
    using M = BitmaskInt4MmaFormat<T>;
    const bool perRow = w.groupSize == p.cols / 2;
    const int chunksPerScale = perRow ? int(ceilDiv(p.cols, kBitmaskInt4MmaChunkCols)) : int(w.groupSize / 64);
    const typename M::Params params{reinterpret_cast<const uint4*>(w.metadata),
                                    static_cast<const uint4*>(w.codes),
                                    reinterpret_cast<const uint4*>(w.scales),
                                    reinterpret_cast<const uint4*>(w.zeros),
                                    chunks,
                                    w.scaleColumns,
                                    chunksPerScale,
                                    w.symmetric};
    // The split (bitmaskInt4GemvSplit) counts the ring's 128-column chunks and sized the shared memory for them.
    const auto a = detail::makeLaunch(p, s, ceilDiv(p.cols, kBitmaskInt4MmaChunkCols), 0, partials, counters);
    cudaError_t e;
    switch (bitmaskInt4MmaBatch(p.batch)) {
      case 2: e = detail::launchPackedGemvAt<M, 2, T, kFolds>(params, a, s.sharedBytes, stream); break;
      case 4: e = detail::launchPackedGemvAt<M, 4, T, kFolds>(params, a, s.sharedBytes, stream); break;
      case 8: e = detail::launchPackedGemvAt<M, 8, T, kFolds>(params, a, s.sharedBytes, stream); break;
      default: e = detail::launchPackedGemvAt<M, 16, T, kFolds>(params, a, s.sharedBytes, stream);
    }
    return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "bitmask_int4_gemv launch");
  }
  using F = BitmaskInt4Format<T>;
  int shift = -1;
  int64_t chunksPerGroup = 1;
  if (w.groupSize == p.cols / 2) {
    chunksPerGroup = chunks;
  } else if (w.groupSize < 128) {
    shift = __builtin_ctzll(uint64_t(w.groupSize / 16));
  } else {
    chunksPerGroup = w.groupSize / 128;
  }
  typename F::Params params{reinterpret_cast<const uint4*>(w.masks),
                            static_cast<const uint4*>(w.codes),
                            reinterpret_cast<const __half*>(w.scales),
                            w.zeros,
                            chunks,
                            w.scaleColumns,
                            shift,
                            chunksPerGroup,
                            w.symmetric};
  const auto a = detail::makeLaunch(p, s, chunks, 0, partials, counters);
  const cudaError_t e = detail::launchPackedGemv<F, T, kFolds>(params, a, s.sharedBytes, stream);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "bitmask_int4_gemv launch");
}

template <bool kFolds>
std::string launchAny(const GemvProblem& p, const BitmaskInt4GemvWeight& w, const GemvSplit& s, float* partials,
                      int* counters, cudaStream_t stream) {
  return p.type == ActivationType::Float16
             ? launch<ActivationType::Float16, kFolds>(p, w, s, partials, counters, stream)
             : launch<ActivationType::BFloat16, kFolds>(p, w, s, partials, counters, stream);
}

// Defined in bitmask_int4_gemv_folded.cu: launchAny<true>.
std::string launchFolded(const GemvProblem& p, const BitmaskInt4GemvWeight& w, const GemvSplit& s, float* partials,
                         int* counters, cudaStream_t stream);

}  // namespace pareto::kernels::bitmask_int4_gemv
