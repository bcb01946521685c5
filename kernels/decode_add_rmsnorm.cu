// decode_add_rmsnorm: residual += delta, then out = weight ⊙ rmsnorm(residual) (DecodeOps.h), rounding where
// transformers rounds: the sum to the dtype, the normalised row to the dtype, the product with the weight.
//
// One block per batch row: the row's sum of squares is the only thing its elements share, and one block can
// reduce it in shared memory with no second launch and no global atomics. A decode step has 1-64 rows, so the
// grid is small whatever the width; what the kernel costs is its latency, and the row (≤ 64 KB) stays in
// registers between the sum and the scaling so that it is read from memory once.
#include "DecodeOps.h"
#include "DecodeArithmetic.cuh"
#include "GemvDriver.cuh"
#include "ProgrammaticLaunch.cuh"

namespace pareto::kernels {
namespace {

using detail::aligned16;
using detail::pack8;
using detail::unpack8;

// V: 16-byte vectors (8 values) a thread holds; the block has ceil(hidden / 8 / V) threads, rounded to warps.
template <ActivationType T, int V>
__global__ void __launch_bounds__(1024) addRmsNormKernel(const AddRmsNormProblem p) {
  // The spans' totals of the sum of squares (DecodeArithmetic.cuh: the order the fused GEMVs use too).
  __shared__ float spanTotals[kDecodeMaxHidden / detail::kNormSpanValues];
  const int64_t vectors = p.hidden / 8;
  const int64_t row = blockIdx.x;
  uint4* residual = static_cast<uint4*>(p.residual) + row * vectors;
  // Plain loads, not __ldg: `out` may be the same buffer as `delta` (it is written only after the reduction).
  const uint4* delta = p.delta != nullptr ? static_cast<const uint4*>(p.delta) + row * vectors : nullptr;
  const uint4* weight = static_cast<const uint4*>(p.weight);
  uint4* out = static_cast<uint4*>(p.out) + row * vectors;
  detail::allowDependentLaunch();
  detail::waitForPreviousGrid();  // residual and delta come from the kernels before (ProgrammaticLaunch.cuh)

  // Thread t holds vectors t, t + blockDim, ...: a warp's 32 lanes hold one span (blockDim is a multiple of 32).
  uint4 r[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t v = threadIdx.x + int64_t(i) * blockDim.x;
    float x[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (v < vectors) {
      r[i] = residual[v];
      unpack8<T>(r[i], x);
      if (delta != nullptr) {
        float d[8];
        unpack8<T>(delta[v], d);
#pragma unroll
        for (int k = 0; k < 8; ++k) x[k] += d[k];
        r[i] = pack8<T>(x);  // h = x + attn, in the dtype
        residual[v] = r[i];
        unpack8<T>(r[i], x);
      }
    }
    const float span = detail::spanTotal(detail::vectorSquares(x));  // every lane of the warp takes part
    if (threadIdx.x % 32 == 0 && v < vectors) spanTotals[v / 32] = span;
  }
  __syncthreads();
  const float inv = detail::rmsInverse(spanTotals, int((vectors + 31) / 32), p.hidden, p.eps);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t v = threadIdx.x + int64_t(i) * blockDim.x;
    if (v >= vectors) continue;
    out[v] = detail::normed8<T>(r[i], inv, __ldg(weight + v));
  }
}

template <ActivationType T>
cudaError_t launch(const AddRmsNormProblem& p, cudaStream_t stream) {
  const int64_t vectors = p.hidden / 8;
  const int threads = int(vectors >= 1024 ? 1024 : (vectors + 31) / 32 * 32);
  const int64_t perThread = ceilDiv(vectors, threads);
  const dim3 grid{unsigned(p.batch)}, block{unsigned(threads)};
  if (perThread <= 1) return detail::launchKernel(addRmsNormKernel<T, 1>, grid, block, 0, stream, p);
  if (perThread <= 2) return detail::launchKernel(addRmsNormKernel<T, 2>, grid, block, 0, stream, p);
  return detail::launchKernel(addRmsNormKernel<T, 4>, grid, block, 0, stream, p);
}

}  // namespace

std::string runAddRmsNorm(const AddRmsNormProblem& p, CUstream_st* stream) {
  if (auto e = checkAddRmsNorm(p); !e.empty()) return e;
  if (p.residual == nullptr || p.weight == nullptr || p.out == nullptr) return "missing residual, weight or output";
  if (!aligned16(p.residual) || !aligned16(p.delta) || !aligned16(p.weight) || !aligned16(p.out))
    return "tensors must be 16-byte aligned (the kernel reads 16 bytes at a time)";
  (void)cudaGetLastError();  // a stale error of an unrelated call must not be reported as this launch's
  const cudaError_t e = p.type == ActivationType::Float16 ? launch<ActivationType::Float16>(p, stream)
                                                          : launch<ActivationType::BFloat16>(p, stream);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "decode_add_rmsnorm launch");
}

}  // namespace pareto::kernels
