// decode_add_rmsnorm: residual += delta, then out = weight ⊙ rmsnorm(residual) (DecodeOps.h), rounding where
// transformers rounds: the sum to the dtype, the normalised row to the dtype, the product with the weight.
//
// One block per batch row: the row's sum of squares is the only thing its elements share, and one block can
// reduce it in shared memory with no second launch and no global atomics. A decode step has 1-64 rows, so the
// grid is small whatever the width; what the kernel costs is its latency, and the row (≤ 64 KB) stays in
// registers between the sum and the scaling so that it is read from memory once.
#include "DecodeOps.h"
#include "GemvDriver.cuh"
#include "ProgrammaticLaunch.cuh"

namespace pareto::kernels {
namespace {

using detail::Act;
using detail::aligned16;
using detail::blockSum;
using detail::bitsOf;
using detail::unpack8;


// Two values rounded to the dtype, packed as they lie in memory (the first in the low half).
template <ActivationType T>
__device__ __forceinline__ uint32_t packPair(float lo, float hi) {
  return bitsOf(Act<T>::fromFloat(lo)) | (bitsOf(Act<T>::fromFloat(hi)) << 16);
}

template <ActivationType T>
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  return make_uint4(packPair<T>(f[0], f[1]), packPair<T>(f[2], f[3]), packPair<T>(f[4], f[5]),
                    packPair<T>(f[6], f[7]));
}

// V: 16-byte vectors (8 values) a thread holds; the block has ceil(hidden / 8 / V) threads, rounded to warps.
template <ActivationType T, int V>
__global__ void __launch_bounds__(1024) addRmsNormKernel(const AddRmsNormProblem p) {
  __shared__ float warpTotals[32];
  const int64_t vectors = p.hidden / 8;
  const int64_t row = blockIdx.x;
  uint4* residual = static_cast<uint4*>(p.residual) + row * vectors;
  // Plain loads, not __ldg: `out` may be the same buffer as `delta` (it is written only after the reduction).
  const uint4* delta = p.delta != nullptr ? static_cast<const uint4*>(p.delta) + row * vectors : nullptr;
  const uint4* weight = static_cast<const uint4*>(p.weight);
  uint4* out = static_cast<uint4*>(p.out) + row * vectors;
  detail::allowDependentLaunch();
  detail::waitForPreviousGrid();  // residual and delta come from the kernels before (ProgrammaticLaunch.cuh)

  uint4 r[V];
  float squares = 0.f;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t v = threadIdx.x + int64_t(i) * blockDim.x;
    if (v >= vectors) continue;
    r[i] = residual[v];
    float x[8];
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
#pragma unroll
    for (int k = 0; k < 8; ++k) squares = fmaf(x[k], x[k], squares);
  }
  // var + eps then 1/sqrt, both correctly rounded in fp32 (no rsqrtf approximation), as torch.rsqrt on the CPU.
  const float inv = 1.f / sqrtf(blockSum(squares, warpTotals) / float(p.hidden) + p.eps);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int64_t v = threadIdx.x + int64_t(i) * blockDim.x;
    if (v >= vectors) continue;
    float x[8], w[8];
    unpack8<T>(r[i], x);
    unpack8<T>(__ldg(weight + v), w);
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] *= inv;
    const uint4 normed = pack8<T>(x);  // xf.to(dtype)
    unpack8<T>(normed, x);
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] *= w[k];
    out[v] = pack8<T>(x);
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
