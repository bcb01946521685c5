// quant_group_gemv (see QuantGroupGemv.h for the layout and the dequantization, GemvProblem.h for the work
// decomposition).
#include "GemvDriver.cuh"
#include "QuantGroupGemv.h"

namespace pareto::kernels {
namespace {

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
                                                  const typename detail::Act<TT>::type*, int64_t, int,
                                                  float (&)[B]) {}
};

__device__ __forceinline__ uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// The FFMA path (8-bit codes, and 4-bit codes at batch 1-2): one byte permute builds the fp32 number
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

// One m16n8k16 tensor-core product with fp32 accumulation: c += a · b (a: 4 registers of A, b: 2 of B).
template <ActivationType T>
__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  if constexpr (T == ActivationType::Float16)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 4-bit codes on the tensor cores, in the lane-per-row layout as it is (no fragment-ordered re-layout).
//
// Why from batch 4 only (int4UsesTensorCores): on the FFMA pipe every batch row adds its own FMAs and shared
// loads for each weight, while one MMA pass covers four batch rows, so from batch 4 this path is faster
// (batch 8: 8.70 against 12.55 ms a step on the H200). At batch 1 it is slower (2.84 against 2.29 ms) although it
// issues ~1060 instructions a 256-column chunk against ~1290: neither kernel is issue-bound there, and each
// warp's chain of latencies (weights, decode, MMA accumulator, shared loads) is what sets the time
// (bench/NOTES.md, v5).
//
// How the lane-per-row data maps onto m16n8k16 (A 16×16 row-major, B 16×8 column-major, C 16×8): lane
// l = 4·g + t (g = l/4, t = l%4) supplies B[k][n] for n = g and k ∈ {2t, 2t+1, 2t+8, 2t+9}. Let those be four
// weights of the lane's own row, 4g + t, at four columns shared by all lanes:
//     B[k][n] = W[4n + t(k)][col(k)],   t(k) = (k mod 8) / 2.
// Then C[m][n] = Σ_k A[m][k]·B[k][n] mixes four rows; A makes it block-diagonal: A[m][k] = x[b(m)][col(k)] when
// m mod 4 = t(k), else 0, so that C[m][n] = Σ x[b][col]·W[4n + m mod 4][col] with b = m / 4: every C entry is
// one (batch row, weight row) pair, 32 rows × 4 batch rows an MMA. Only the lanes with g mod 4 = t hold a
// non-zero A fragment (g < 4 at batch 1: lanes 0, 5, 10, 15); the others keep zero registers.
//
// The codes of a word (columns c..c+7, column 2i in the low nibble of byte i) become fp16 pairs without a
// conversion: (q & 0x000F000F) | 0x6400 in each half is 1024 + code, for the columns (c, c+4); q >> 4, >> 8,
// >> 12 give (c+1, c+5), (c+2, c+6), (c+3, c+7). bf16 uses 0x4300 = 128. So the first MMA of a word multiplies
// (c, c+4 | c+2, c+6) and the second (c+1, c+5 | c+3, c+7).
// The products of exact small integers and fp16/bf16 x are exact in the fp32 accumulator; the bias comes off
// at the end of each unit with its Σ x: Σ (q − z)·x = C − (bias + z)·Σ x.
//
// x is staged as the A registers themselves (QuantGroupGemv.h: int4StagePlanes): a 32-byte record per 8 columns
// holds the 4 registers of each of the word's two MMAs, so a lane loads them with two LDS.128 and nothing moves
// them (with x staged in column order, building the 4 consecutive registers an MMA takes, zeros included, cost
// more register moves than the FFMA path's whole arithmetic). The lanes with a zero A fragment read a plane of
// zeros instead of being predicated off.
template <ActivationType T>
struct Int4MmaFormat : QuantCodeStream {
  static constexpr int kChunkCols = 256;
  static constexpr uint32_t kExponent = T == ActivationType::Float16 ? 0x64006400u : 0x43004300u;
  static constexpr float kBias = T == ActivationType::Float16 ? 1024.f : 128.f;

  // Batch rows 4p..4p+3 are MMA pass p. Entry [p][i] is C fragment register i: (batch 4p + g/4, row 8t + g%4),
  // (…, row 8t + 4 + g%4), (batch 4p + g/4 + 2, row 8t + g%4), (…, row 8t + 4 + g%4).
  template <int B> struct Accumulator {
    float v[(B + 3) / 4][4];
  };

  template <int B> static constexpr int kPlanes = int4StagePlanes(B);
  template <int B> __host__ __device__ static constexpr int64_t stagedWords(int64_t sliceCols) {
    return kPlanes<B> * (sliceCols + kInt4StagePadWords);
  }

  // Row b = 4p + h (+ 2) of x, columns col..col+7 → record words (h rows even, h + 2 rows odd):
  // [x(0,4), x'(0,4), x(2,6), x'(2,6), x(1,5), x'(1,5), x(3,7), x'(3,7)] of plane 2p + h (x' = row + 2, zero
  // when the compiled batch has no such row). Row 0 also clears the zero plane's record.
  template <int B>
  __device__ static __forceinline__ void stage(uint32_t* xs, int64_t b, int64_t col, int64_t sliceCols,
                                               const uint4& v) {
    const uint32_t w04 = __byte_perm(v.x, v.z, 0x5410), w26 = __byte_perm(v.y, v.w, 0x5410);
    const uint32_t w15 = __byte_perm(v.x, v.z, 0x7632), w37 = __byte_perm(v.y, v.w, 0x7632);
    const int64_t planeWords = sliceCols + kInt4StagePadWords;
    const int within = int(b % 4);
    uint32_t* record = xs + (2 * (b / 4) + (within & 1)) * planeWords + col;
    if (within >= 2) {
      record[1] = w04, record[3] = w26, record[5] = w15, record[7] = w37;
    } else if (b + 2 < B) {
      record[0] = w04, record[2] = w26, record[4] = w15, record[6] = w37;
    } else {
      reinterpret_cast<uint4*>(record)[0] = make_uint4(w04, 0u, w26, 0u);
      reinterpret_cast<uint4*>(record)[1] = make_uint4(w15, 0u, w37, 0u);
    }
    if (b == 0) {
      uint4* zeros = reinterpret_cast<uint4*>(xs + (kPlanes<B> - 1) * planeWords + col);
      zeros[0] = zeros[1] = make_uint4(0u, 0u, 0u, 0u);
    }
  }

  template <int B>
  __device__ static __forceinline__ void compute(const Params& w, const Fragment& fragment, int64_t group,
                                                 int64_t chunk, int lane, const uint32_t* xs, int64_t xStride,
                                                 const float* xsum, int64_t sumStride, Accumulator<B>& acc) {
    constexpr int kPasses = (B + 3) / 4;
    const int g = lane >> 2, t = lane & 3;
    const bool feeds = (g & 3) == t;  // the lanes whose A fragment is not zero
    const int bLow = g >> 2;          // batch row (within a pass) of A rows g; bLow + 2 for rows g + 8
    const uint32_t* records[kPasses];
#pragma unroll
    for (int p = 0; p < kPasses; ++p)
      records[p] = xs + (feeds && 4 * p + bLow < B ? 2 * p + bLow : kPlanes<B> - 1) *
                            (xStride + kInt4StagePadWords);
    // Two accumulators (first and second MMA of each word) so that consecutive MMAs do not wait on each other.
    float c0[kPasses][4], c1[kPasses][4];
#pragma unroll
    for (int p = 0; p < kPasses; ++p)
#pragma unroll
      for (int i = 0; i < 4; ++i) c0[p][i] = c1[p][i] = 0.f;
#pragma unroll
    for (int piece = 0; piece < 8; ++piece) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t q = word(fragment.piece[piece], j);
        const uint32_t w04 = (q & 0x000F000Fu) | kExponent, w15 = ((q >> 4) & 0x000F000Fu) | kExponent;
        const uint32_t w26 = ((q >> 8) & 0x000F000Fu) | kExponent, w37 = ((q >> 12) & 0x000F000Fu) | kExponent;
        const int col = piece * 32 + j * 8;
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
          const uint4 a0 = *reinterpret_cast<const uint4*>(records[p] + col);
          const uint4 a1 = *reinterpret_cast<const uint4*>(records[p] + col + 4);
          mma16816<T>(c0[p], a0.x, a0.y, a0.z, a0.w, w04, w26);
          mma16816<T>(c1[p], a1.x, a1.y, a1.z, a1.w, w15, w37);
        }
      }
      // End of a sum unit (a group, or the chunk when groups are wider): apply its scales and zeros to the
      // lane's two rows, 8t + g%4 and 8t + 4 + g%4.
      if ((((piece + 1) * 32) & ((1 << w.unitShift) - 1)) == 0) {
        const int unitInChunk = (((piece + 1) * 32) >> w.unitShift) - 1;
        const int64_t at = (group * w.scaleColumns + scaleColumn(w, chunk, kChunkCols, (piece + 1) * 32)) * 32 +
                           8 * t + (g & 3);
        const float s0 = __half2float(__ldg(w.scales + at)), s1 = __half2float(__ldg(w.scales + at + 4));
        const float o0 = kBias + (w.symmetric ? w.symmetricZero : float(__ldg(w.zeros + at)));
        const float o1 = kBias + (w.symmetric ? w.symmetricZero : float(__ldg(w.zeros + at + 4)));
#pragma unroll
        for (int p = 0; p < kPasses; ++p) {
          const int bA = 4 * p + bLow, bB = bA + 2;
          const float sumA = bA < B ? xsum[bA * sumStride + unitInChunk] : 0.f;
          const float sumB = bB < B ? xsum[bB * sumStride + unitInChunk] : 0.f;
          acc.v[p][0] = fmaf(s0, fmaf(-o0, sumA, c0[p][0] + c1[p][0]), acc.v[p][0]);
          acc.v[p][1] = fmaf(s1, fmaf(-o1, sumA, c0[p][1] + c1[p][1]), acc.v[p][1]);
          acc.v[p][2] = fmaf(s0, fmaf(-o0, sumB, c0[p][2] + c1[p][2]), acc.v[p][2]);
          acc.v[p][3] = fmaf(s1, fmaf(-o1, sumB, c0[p][3] + c1[p][3]), acc.v[p][3]);
#pragma unroll
          for (int i = 0; i < 4; ++i) c0[p][i] = c1[p][i] = 0.f;
        }
      }
    }
  }

  // Row r = lane, batch b: C entry of lane 4·(4·(b%4 & 1) + r%4) + r/8, register (b%4 ≥ 2 ? 2 : 0) + (r/4)%2.
  template <int B>
  __device__ static __forceinline__ void finish(const Accumulator<B>& acc, int lane, float (&total)[B]) {
    const bool second = (lane >> 2) & 1;
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const int p = b / 4, within = b % 4, reg = within >= 2 ? 2 : 0;
      const int source = 4 * (4 * (within & 1) + (lane & 3)) + (lane >> 3);
      const float even = __shfl_sync(0xFFFFFFFFu, acc.v[p][reg], source);
      const float odd = __shfl_sync(0xFFFFFFFFu, acc.v[p][reg + 1], source);
      total[b] = second ? odd : even;
    }
  }
};

template <int Bits, ActivationType T>
std::string launch(const GemvProblem& p, const QuantGroupGemvWeight& w, const GemvSplit& s, float* partials,
                   int* counters, cudaStream_t stream) {
  QuantParams params{static_cast<const uint4*>(w.codes),
                     reinterpret_cast<const __half*>(w.scales),
                     w.zeros,
                     quantChunks(p.cols, Bits),
                     w.scaleColumns,
                     __builtin_ctzll(uint64_t(quantSumUnit(w.groupSize, Bits))),
                     w.groupSize < quantChunkCols(Bits) ? 0
                     : w.groupSize == p.cols           ? int(quantChunks(p.cols, Bits))
                                                       : int(w.groupSize / quantChunkCols(Bits)),
                     Bits == 4 ? 8.f : 128.f,
                     w.symmetric};
  const auto a = detail::makeLaunch(p, s, params.chunks, int(quantSumUnit(w.groupSize, Bits)), partials, counters);
  cudaError_t e;
  if constexpr (Bits == 8) {
    e = detail::launchPackedGemv<QuantFfmaFormat<8, T>, T>(params, a, s.sharedBytes, stream);
  } else {
    // The split (quantGroupGemvSplit) sized the staging for the same choice: int4UsesTensorCores.
    using Ffma = QuantFfmaFormat<4, T>;
    using Mma = Int4MmaFormat<T>;
    switch (compiledBatch(p.batch)) {
      case 1: e = detail::launchPackedGemvAt<Ffma, 1, T>(params, a, s.sharedBytes, stream); break;
      case 2: e = detail::launchPackedGemvAt<Ffma, 2, T>(params, a, s.sharedBytes, stream); break;
      case 4: e = detail::launchPackedGemvAt<Mma, 4, T>(params, a, s.sharedBytes, stream); break;
      case 8: e = detail::launchPackedGemvAt<Mma, 8, T>(params, a, s.sharedBytes, stream); break;
      default: e = detail::launchPackedGemvAt<Mma, 16, T>(params, a, s.sharedBytes, stream); break;
    }
    static_assert(!int4UsesTensorCores(2) && int4UsesTensorCores(4), "the switch above follows int4UsesTensorCores");
  }
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "quant_group_gemv launch");
}

}  // namespace



std::string runQuantGroupGemv(const GemvProblem& p, const QuantGroupGemvWeight& w, const GemvSplit& s,
                              float* partials, int* counters, CUstream_st* stream) {
  if (auto e = checkQuantGroupGemv(p, w); !e.empty()) return e;
  const bool f16 = p.type == ActivationType::Float16;
  if (w.bits == 4)
    return f16 ? launch<4, ActivationType::Float16>(p, w, s, partials, counters, stream)
               : launch<4, ActivationType::BFloat16>(p, w, s, partials, counters, stream);
  return f16 ? launch<8, ActivationType::Float16>(p, w, s, partials, counters, stream)
             : launch<8, ActivationType::BFloat16>(p, w, s, partials, counters, stream);
}

}  // namespace pareto::kernels
