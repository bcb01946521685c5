// spqr_gemv (see SpqrGemv.h for the layout, GemvProblem.h for the work decomposition).
#include "GemvDriver.cuh"
#include "SpqrGemv.h"

namespace pareto::kernels {
namespace {

template <int Bits, ActivationType T>
struct SpqrFormat {
  static constexpr int kChunkCols = kSpqrChunkCols;
  static constexpr int kWords = 4 * Bits;  // 128 codes · Bits bits / 32
  struct Params {
    const uint4* codes;
    const uint2* stats;
    const __half2* second;
    const int32_t* rowOffsets;
    const uint16_t* outlierColumns;
    const __half* outlierValues;
    int64_t chunks;
    int scaleGroupShift;
    int secondPerGroup;  // 32 / scaleGroup
  };

  // f = 0.5 + q/256 for the code at bit `offset` of the lane's stream (q placed at bits 16.. under exponent
  // 0x3F, as in quant_group_gemv); `offset` is a compile-time constant after unrolling.
  __device__ static __forceinline__ float codeFloat(const uint32_t (&s)[kWords], int offset) {
    const int wi = offset / 32, sh = offset % 32;
    uint32_t t;
    if (sh <= 16) {
      t = s[wi] << (16 - sh);
    } else {
      const uint32_t next = wi + 1 < kWords ? s[wi + 1] : 0u;
      t = __funnelshift_r(s[wi], next, sh - 16);
    }
    return __uint_as_float((t & (((1u << Bits) - 1u) << 16)) | 0x3F000000u);
  }

  // A lane's code bit stream and statistics of one chunk (GemvDriver.cuh: `load` issues them, `compute` uses
  // them); the second-level grids are small and shared by 32/scaleGroup lanes, so `compute` reads them cached.
  struct Fragment {
    uint4 code[Bits];
    uint2 stats;
  };
  // The row's outlier range [begin, end): read before x is staged, so that the outlier loads after the chunks
  // start from known indices instead of waiting one more memory latency for them.
  struct RowState {
    int32_t begin, end;
  };

  __device__ static __forceinline__ Fragment load(const Params& w, int64_t group, int64_t chunk, int lane) {
    const int64_t base = group * w.chunks + chunk;
    Fragment f;
#pragma unroll
    for (int i = 0; i < Bits; ++i) f.code[i] = detail::loadStreaming(w.codes + (base * Bits + i) * 32 + lane);
    f.stats = detail::loadStreaming(w.stats + base * 32 + lane);
    return f;
  }

  // `row` < 32·G: rowOffsets has an entry for every padded row and one more (padded rows: no outliers).
  __device__ static __forceinline__ RowState rowBegin(const Params& w, int64_t row) {
    return {__ldg(w.rowOffsets + row), __ldg(w.rowOffsets + row + 1)};
  }

  template <int B>
  __device__ static __forceinline__ void compute(const Params& w, const Fragment& f, int64_t group, int64_t chunk,
                                                 int lane, const float* xs, int64_t xStride, const float* xsum,
                                                 int64_t sumStride, float (&acc)[B]) {
    const int64_t base = group * w.chunks + chunk;
    uint32_t s[kWords];
#pragma unroll
    for (int i = 0; i < Bits; ++i) {
      s[4 * i] = f.code[i].x; s[4 * i + 1] = f.code[i].y; s[4 * i + 2] = f.code[i].z; s[4 * i + 3] = f.code[i].w;
    }
    const uint2 st = f.stats;
#pragma unroll
    for (int g = 0; g < 8; ++g) {
      float sum[B];
#pragma unroll
      for (int b = 0; b < B; ++b) sum[b] = 0.f;
#pragma unroll
      for (int i = 0; i < 16; i += 4) {
        const int col = g * 16 + i;
        const float f0 = codeFloat(s, Bits * col), f1 = codeFloat(s, Bits * (col + 1));
        const float f2 = codeFloat(s, Bits * (col + 2)), f3 = codeFloat(s, Bits * (col + 3));
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const float4 x = *reinterpret_cast<const float4*>(xs + b * xStride + col);
          sum[b] = fmaf(f0, x.x, fmaf(f1, x.y, fmaf(f2, x.z, fmaf(f3, x.w, sum[b]))));
        }
      }
      const uint32_t statByte = ((g < 4 ? st.x : st.y) >> (8 * (g % 4))) & 0xFFu;
      const __half2 grid = __ldg(w.second + (base * 8 + g) * w.secondPerGroup + (lane >> w.scaleGroupShift));
      const float scale = fmaf(float(statByte & 0xFu), __high2float(grid), __low2float(grid));
      const float offset = 128.f + float(statByte >> 4);
#pragma unroll
      for (int b = 0; b < B; ++b)
        acc[b] = fmaf(scale, fmaf(256.f, sum[b], -offset * xsum[b * sumStride + g]), acc[b]);
    }
  }

  // The lane's outliers begin + part, begin + part + parts, ... in that order (as before), kU at a time: the
  // column and value loads of kU outliers are issued together, then their x loads, then the FMAs, so a batch of
  // kU outliers costs two dependent memory latencies instead of 2·kU. x rows past `batch` are not read (the
  // compiled B may exceed the batch; x has exactly `batch` rows) and contribute 0 to lanes nobody writes out.
  template <int B, ActivationType TT>
  __device__ static __forceinline__ void rowExtra(const Params& w, const RowState& r, int64_t, int part, int parts,
                                                  const typename detail::Act<TT>::type* x, int64_t cols, int batch,
                                                  float (&acc)[B]) {
    using A = detail::Act<TT>;
    constexpr int kU = B <= 2 ? 8 : B <= 8 ? 4 : 2;
    for (int32_t i = r.begin + part; i < r.end; i += kU * parts) {
      int32_t column[kU];
      float value[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int32_t j = i + u * parts;
        const bool live = j < r.end;
        column[u] = live ? int32_t(__ldg(w.outlierColumns + j)) : 0;
        value[u] = live ? __half2float(__ldg(w.outlierValues + j)) : 0.f;
      }
      float xv[kU][B];
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int b = 0; b < B; ++b)
          xv[u][b] = b < batch && i + u * parts < r.end ? A::toFloat(x[b * cols + column[u]]) : 0.f;
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (i + u * parts < r.end)
#pragma unroll
          for (int b = 0; b < B; ++b) acc[b] = fmaf(value[u], xv[u][b], acc[b]);
    }
  }
};

template <int Bits, ActivationType T>
std::string launch(const GemvProblem& p, const SpqrGemvWeight& w, const GemvSplit& s, float* partials,
                   int* counters, cudaStream_t stream) {
  using F = SpqrFormat<Bits, T>;
  typename F::Params params{static_cast<const uint4*>(w.codes),
                            reinterpret_cast<const uint2*>(w.stats),
                            reinterpret_cast<const __half2*>(w.second),
                            w.rowOffsets,
                            w.outlierColumns,
                            reinterpret_cast<const __half*>(w.outlierValues),
                            spqrChunks(p.cols),
                            __builtin_ctz(unsigned(w.scaleGroup)),
                            32 / w.scaleGroup};
  const auto a = detail::makeLaunch(p, s, params.chunks, kSpqrGroupCols, partials, counters);
  const cudaError_t e = detail::launchPackedGemv<F, T>(params, a, s.sharedBytes, stream);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "spqr_gemv launch");
}

template <int Bits>
std::string launchTyped(const GemvProblem& p, const SpqrGemvWeight& w, const GemvSplit& s, float* partials,
                        int* counters, cudaStream_t stream) {
  return p.type == ActivationType::Float16
             ? launch<Bits, ActivationType::Float16>(p, w, s, partials, counters, stream)
             : launch<Bits, ActivationType::BFloat16>(p, w, s, partials, counters, stream);
}

}  // namespace



std::string runSpqrGemv(const GemvProblem& p, const SpqrGemvWeight& w, const GemvSplit& s, float* partials,
                        int* counters, CUstream_st* stream) {
  if (auto e = checkSpqrGemv(p, w); !e.empty()) return e;
  switch (w.bits) {
    case 2: return launchTyped<2>(p, w, s, partials, counters, stream);
    case 3: return launchTyped<3>(p, w, s, partials, counters, stream);
    default: return launchTyped<4>(p, w, s, partials, counters, stream);
  }
}

}  // namespace pareto::kernels
