// quant_group_gemv (see QuantGroupGemv.h for the layout and the dequantization, GemvProblem.h for the work
// decomposition).
#include "GemvDriver.cuh"
#include "QuantGroupGemv.h"

namespace pareto::kernels {
namespace {

// f = 0.5 + q/256 for the 4-bit code in byte k of `w` (byte k ≤ 15): bytes [0, 0, q, 0x3F].
__device__ __forceinline__ float nibbleFloat(uint32_t w, int k) {
  return __uint_as_float(__byte_perm(w, 0x3F000000u, (7 << 12) | (k << 8) | (4 << 4) | 4));
}
// f = 1 + q/32768 for the 8-bit code in byte k of `w`: bytes [0, q, 0x80, 0x3F].
__device__ __forceinline__ float byteFloat(uint32_t w, int k) {
  return __uint_as_float(__byte_perm(w, 0x3F800000u, (7 << 12) | (6 << 8) | (k << 4) | 4));
}

template <int Bits, ActivationType T>
struct QuantFormat {
  static constexpr int kChunkCols = Bits == 4 ? 256 : 128;
  static constexpr int kSubBlocks = kChunkCols / 32;
  static constexpr float kScale = Bits == 4 ? 256.f : 32768.f;   // Σ q x = kScale · (Σ f x − kBias · Σ x)
  static constexpr float kBias = Bits == 4 ? 0.5f : 1.f;
  struct Params {
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

  template <int B>
  __device__ static __forceinline__ void compute(const Params& w, const Fragment& fragment, int64_t group,
                                                 int64_t chunk, int lane, const float* xs, int64_t xStride,
                                                 const float* xsum, int64_t sumStride, float (&acc)[B]) {
    const uint4(&piece)[8] = fragment.piece;
    float unitAcc[B];
#pragma unroll
    for (int b = 0; b < B; ++b) unitAcc[b] = 0.f;
#pragma unroll
    for (int sb = 0; sb < kSubBlocks; ++sb) {
      // 32 columns: one piece at 4 bits, two at 8.
#pragma unroll
      for (int wi = 0; wi < 32 * Bits / 32; ++wi) {
        const uint4& pc = piece[(sb * 32 * Bits / 8 + wi * 4) / 16];
        const int within = ((sb * 32 * Bits / 8 + wi * 4) % 16) / 4;
        uint32_t word = within == 0 ? pc.x : within == 1 ? pc.y : within == 2 ? pc.z : pc.w;
        const int col = sb * 32 + wi * (32 / Bits);
        if constexpr (Bits == 4) {
          const uint32_t lo = word & 0x0F0F0F0Fu, hi = (word >> 4) & 0x0F0F0F0Fu;
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
          if (w.symmetric) word ^= 0x80808080u;  // int8 q → q + 128, so every code reads as unsigned
          const float f[4] = {byteFloat(word, 0), byteFloat(word, 1), byteFloat(word, 2), byteFloat(word, 3)};
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
        const int64_t scaleColumn = w.chunksPerGroup == 0 ? chunk * (kChunkCols >> w.unitShift) + unitInChunk
                                                          : chunk / w.chunksPerGroup;
        const int64_t at = (group * w.scaleColumns + scaleColumn) * 32 + lane;
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

  template <int B, ActivationType TT>
  __device__ static __forceinline__ void rowExtra(const Params&, const RowState&, int64_t, int, int,
                                                  const typename detail::Act<TT>::type*, int64_t, int,
                                                  float (&)[B]) {}
};

template <int Bits, ActivationType T>
std::string launch(const GemvProblem& p, const QuantGroupGemvWeight& w, const GemvSplit& s, float* partials,
                   int* counters, cudaStream_t stream) {
  using F = QuantFormat<Bits, T>;
  typename F::Params params{static_cast<const uint4*>(w.codes),
                            reinterpret_cast<const __half*>(w.scales),
                            w.zeros,
                            quantChunks(p.cols, Bits),
                            w.scaleColumns,
                            __builtin_ctzll(uint64_t(quantSumUnit(w.groupSize, Bits))),
                            w.groupSize < F::kChunkCols ? 0
                            : w.groupSize == p.cols     ? int(quantChunks(p.cols, Bits))
                                                        : int(w.groupSize / F::kChunkCols),
                            Bits == 4 ? 8.f : 128.f,
                            w.symmetric};
  const auto a = detail::makeLaunch(p, s, params.chunks, int(quantSumUnit(w.groupSize, Bits)), partials, counters);
  const cudaError_t e = detail::launchPackedGemv<F, T>(params, a, s.sharedBytes, stream);
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
