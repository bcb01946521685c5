// bitmask_nm_gemv (see BitmaskNMGemv.h for the layout and GemvProblem.h for the work decomposition).
#include "BitmaskNMGemv.h"
#include "GemvDriver.cuh"

namespace pareto::kernels {
namespace {

template <int K, ActivationType T>
struct BitmaskFormat {
  static constexpr int kChunkCols = kBitmaskChunkCols;
  static constexpr int kPieces = K;  // 8 words · K values · 2 bytes / 16 bytes
  struct Params {
    const uint4* masks;
    const uint4* values;
    int64_t chunks;
  };

  template <int B>
  __device__ static __forceinline__ void accumulate(const Params& w, int64_t group, int64_t chunk, int lane,
                                                    const float* xs, int64_t xStride, const float*, int64_t,
                                                    float (&acc)[B]) {
    using A = detail::Act<T>;
    const int64_t base = group * w.chunks + chunk;
    // Issue every load of the chunk before the first use: 2 + K independent 16-byte loads in flight per lane.
    const uint4 m0 = detail::loadStreaming(w.masks + (base * 32 + lane) * 2);
    const uint4 m1 = detail::loadStreaming(w.masks + (base * 32 + lane) * 2 + 1);
    uint4 v[kPieces];
#pragma unroll
    for (int i = 0; i < kPieces; ++i) v[i] = detail::loadStreaming(w.values + (base * kPieces + i) * 32 + lane);
    const uint32_t words[8] = {m0.x, m0.y, m0.z, m0.w, m1.x, m1.y, m1.z, m1.w};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      uint32_t mask = words[k];
      const float* xw = xs + k * 32;
      // Highest set bit first, so value j of the word runs from K-1 down to 0: its register is a constant.
#pragma unroll
      for (int j = K - 1; j >= 0; --j) {
        const int col = 31 - __clz(mask);
        mask ^= 1u << col;
        const int idx = k * K + j;            // compile-time after unrolling
        const uint4& piece = v[idx / 8];
        const int word = (idx % 8) / 2;
        const uint32_t bits = word == 0 ? piece.x : word == 1 ? piece.y : word == 2 ? piece.z : piece.w;
        const float value = (idx % 2 == 0) ? A::lowToFloat(bits) : A::highToFloat(bits);
#pragma unroll
        for (int b = 0; b < B; ++b) acc[b] = fmaf(value, xw[b * xStride + col], acc[b]);
      }
    }
  }

  template <int B, ActivationType TT>
  __device__ static __forceinline__ void rowExtra(const Params&, int64_t, int, int,
                                                  const typename detail::Act<TT>::type*, int64_t, float (&)[B]) {}
};

template <int K, ActivationType T>
std::string launch(const GemvProblem& p, const BitmaskNMGemvWeight& w, const GemvSplit& s, float* partials,
                   int* counters, cudaStream_t stream) {
  using F = BitmaskFormat<K, T>;
  typename F::Params params{reinterpret_cast<const uint4*>(w.masks), static_cast<const uint4*>(w.values),
                            bitmaskChunks(p.cols)};
  const auto a = detail::makeLaunch(p, s, params.chunks, 0, partials, counters);
  const cudaError_t e = detail::launchPackedGemv<F, T>(params, a, s.sharedBytes, stream);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "bitmask_nm_gemv launch");
}

template <int K>
std::string launchTyped(const GemvProblem& p, const BitmaskNMGemvWeight& w, const GemvSplit& s, float* partials,
                        int* counters, cudaStream_t stream) {
  return p.type == ActivationType::Float16 ? launch<K, ActivationType::Float16>(p, w, s, partials, counters, stream)
                                           : launch<K, ActivationType::BFloat16>(p, w, s, partials, counters, stream);
}

}  // namespace



std::string runBitmaskNMGemv(const GemvProblem& p, const BitmaskNMGemvWeight& w, const GemvSplit& s,
                             float* partials, int* counters, CUstream_st* stream) {
  if (auto e = checkBitmaskNMGemv(p, w); !e.empty()) return e;
  switch (bitmaskKeptPerWord(w.n, w.m)) {
    case 8: return launchTyped<8>(p, w, s, partials, counters, stream);
    case 16: return launchTyped<16>(p, w, s, partials, counters, stream);
    default: return launchTyped<24>(p, w, s, partials, counters, stream);
  }
}

}  // namespace pareto::kernels
