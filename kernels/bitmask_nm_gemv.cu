// bitmask_nm_gemv (see BitmaskNMGemv.h for the layout and GemvProblem.h for the work decomposition).
#include <type_traits>

#include "BitmaskNMGemv.h"
#include "GemvDriver.cuh"

namespace pareto::kernels {
namespace {

// The driver's chunk (GemvDriver.cuh) is a part of the layout's 256-column chunk: kWords consecutive mask words
// of it (4 at K ≤ 16, 2 at K = 24), i.e. kWords of the lane's 8 mask words and kWords·K/8 of its K value pieces
// (word k's K values are values k·K ... k·K + K − 1 of the chunk, so words h·kWords ... are pieces
// h·kPieces ..., kWords·K being a multiple of 8). A whole chunk in registers is 2 + K uint4 (72 registers at
// K = 16, 104 at K = 24); the driver's double buffer holds two fragments, which at K = 16 would leave room for
// two blocks a multiprocessor and at K = 24 would not fit at all. Parts are 1 + K/2 uint4 (K ≤ 16: 4.6 KB a warp
// at K = 16) or 0.5 + 6 uint4 (K = 24: 3.3 KB), so two fit in the 128 registers of 4 blocks a multiprocessor
// (GemvProblem.h: kResidentBlocks). The layout is unchanged and the words are walked in the same order (chunk
// c = parts kParts·c ... kParts·c + kParts − 1), so the sums are accumulated in the same order.
template <int K, ActivationType T>
struct BitmaskFormat {
  static constexpr int kWords = K <= 16 ? 4 : 2;                      // mask words of a part
  static constexpr int kParts = kBitmaskWordsPerChunk / kWords;       // parts of a layout chunk
  static constexpr int kChunkCols = kBitmaskChunkCols / kParts;       // the driver's chunk: one part
  static constexpr int kPieces = kWords * K / 8;                      // kWords · K values · 2 bytes / 16 bytes
  static_assert(kWords * K % 8 == 0, "a part's values must be whole 16-byte pieces");
  struct Params {
    const uint4* masks;
    const uint4* values;
    int64_t chunks;  // the layout's 256-column chunks per row (the driver counts parts: kParts · chunks)
  };
  using MaskVector = std::conditional_t<kWords == 4, uint4, uint2>;
  struct Fragment {
    MaskVector mask;       // the part's kWords mask words
    uint4 value[kPieces];  // its kWords·K kept values
  };
  struct RowState {};

  __device__ static __forceinline__ Fragment load(const Params& w, int64_t group, int64_t part, int lane) {
    const int64_t base = group * w.chunks + part / kParts;
    const int h = int(part % kParts);
    Fragment f;
    // The lane's 8 mask words of the chunk are 32 contiguous bytes: kParts vectors of kWords words.
    f.mask = detail::loadStreaming(reinterpret_cast<const MaskVector*>(w.masks + (base * 32 + lane) * 2) + h);
#pragma unroll
    for (int i = 0; i < kPieces; ++i)
      f.value[i] = detail::loadStreaming(w.values + (base * K + h * kPieces + i) * 32 + lane);
    return f;
  }

  __device__ static __forceinline__ RowState rowBegin(const Params&, int64_t) { return {}; }

  template <int B>
  __device__ static __forceinline__ void compute(const Params&, const Fragment& f, int64_t, int64_t, int,
                                                 const float* xs, int64_t xStride, const float*, int64_t,
                                                 float (&acc)[B]) {
    using A = detail::Act<T>;
    uint32_t words[kWords];
    if constexpr (kWords == 4) {
      words[0] = f.mask.x; words[1] = f.mask.y; words[2] = f.mask.z; words[3] = f.mask.w;
    } else {
      words[0] = f.mask.x; words[1] = f.mask.y;
    }
#pragma unroll
    for (int k = 0; k < kWords; ++k) {
      uint32_t mask = words[k];
      const float* xw = xs + k * 32;
      // Highest set bit first, so value j of the word runs from K-1 down to 0: its register is a constant.
#pragma unroll
      for (int j = K - 1; j >= 0; --j) {
        const int col = 31 - __clz(mask);
        mask ^= 1u << col;
        const int idx = k * K + j;            // compile-time after unrolling
        const uint4& piece = f.value[idx / 8];
        const int word = (idx % 8) / 2;
        const uint32_t bits = word == 0 ? piece.x : word == 1 ? piece.y : word == 2 ? piece.z : piece.w;
        const float value = (idx % 2 == 0) ? A::lowToFloat(bits) : A::highToFloat(bits);
#pragma unroll
        for (int b = 0; b < B; ++b) acc[b] = fmaf(value, xw[b * xStride + col], acc[b]);
      }
    }
  }

  template <int B, ActivationType TT>
  __device__ static __forceinline__ void rowExtra(const Params&, const RowState&, int64_t, int, int,
                                                  const typename detail::Act<TT>::type*, int64_t, int,
                                                  float (&)[B]) {}
};

template <int K, ActivationType T>
std::string launch(const GemvProblem& p, const BitmaskNMGemvWeight& w, const GemvSplit& s, float* partials,
                   int* counters, cudaStream_t stream) {
  using F = BitmaskFormat<K, T>;
  typename F::Params params{reinterpret_cast<const uint4*>(w.masks), static_cast<const uint4*>(w.values),
                            bitmaskChunks(p.cols)};
  // The split counts the layout's 256-column chunks; the kernel walks parts of them (see BitmaskFormat): the
  // same slices of columns, kParts times as many chunks of 1/kParts the width.
  GemvSplit parts = s;
  parts.chunksPerSplit = F::kParts * s.chunksPerSplit;
  const auto a = detail::makeLaunch(p, parts, F::kParts * params.chunks, 0, partials, counters);
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
