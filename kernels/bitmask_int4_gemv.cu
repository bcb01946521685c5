// bitmask_int4_gemv (see BitmaskInt4Gemv.h for the layout, GemvProblem.h for the work decomposition).
#include "BitmaskInt4Gemv.h"
#include "GemvDriver.cuh"

namespace pareto::kernels {
namespace {

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
                                                  const typename detail::Act<TT>::type*, int64_t, int,
                                                  float (&)[B]) {}
};

template <ActivationType T>
std::string launch(const GemvProblem& p, const BitmaskInt4GemvWeight& w, const GemvSplit& s, float* partials,
                   int* counters, cudaStream_t stream) {
  using F = BitmaskInt4Format<T>;
  const int64_t chunks = ceilDiv(p.cols, 256);
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
  const cudaError_t e = detail::launchPackedGemv<F, T>(params, a, s.sharedBytes, stream);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "bitmask_int4_gemv launch");
}

}  // namespace



std::string runBitmaskInt4Gemv(const GemvProblem& p, const BitmaskInt4GemvWeight& w, const GemvSplit& s,
                               float* partials, int* counters, CUstream_st* stream) {
  if (auto e = checkBitmaskInt4Gemv(p, w); !e.empty()) return e;
  return p.type == ActivationType::Float16
             ? launch<ActivationType::Float16>(p, w, s, partials, counters, stream)
             : launch<ActivationType::BFloat16>(p, w, s, partials, counters, stream);
}

}  // namespace pareto::kernels
