// The arithmetic of the decode step's small ops, shared by their own kernels (decode_add_rmsnorm.cu,
// decode_silu_mul.cu) and by the GEMVs that do the same work while they stage x or store y (GemvDriver.cuh:
// GemvProblem's input and accumulate). One definition, so that a fused GEMV's y equals the two launches' bit for
// bit and the decode step may take either path.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "Activation.cuh"
#include "GemvProblem.h"

namespace pareto::kernels::detail {

// The RMSNorm's sum of squares in one order whoever computes it: the row is cut into spans of 256 values (32
// vectors of 8); the lane holding a vector squares and adds its 8 values in order, the span's 32 lanes add up by
// butterfly (every lane ends with the same bits: each step adds the same two numbers in either order), and the
// spans' totals are added in ascending order. A lane past the row's end holds 0.
__device__ __forceinline__ float vectorSquares(const float (&x)[8]) {
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s = fmaf(x[k], x[k], s);
  return s;
}
__device__ __forceinline__ float spanTotal(float lanePart) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) lanePart += __shfl_xor_sync(0xFFFFFFFFu, lanePart, off);
  return lanePart;
}
inline constexpr int kNormSpanValues = 256;
// var + eps then 1/sqrt, both correctly rounded in fp32 (no rsqrtf approximation), as torch.rsqrt on the CPU.
__device__ __forceinline__ float rmsInverse(const float* spanTotals, int spans, int64_t hidden, float eps) {
  float total = 0.f;
  for (int s = 0; s < spans; ++s) total += spanTotals[s];
  return 1.f / sqrtf(total / float(hidden) + eps);
}

// Two values rounded to the dtype, packed as they lie in memory (the first in the low half).
template <ActivationType T>
__device__ __forceinline__ uint32_t packPair(float lo, float hi) {
  using A = Act<T>;
  return uint32_t(bitsOf(A::fromFloat(lo))) | (uint32_t(bitsOf(A::fromFloat(hi))) << 16);
}
template <ActivationType T>
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  return make_uint4(packPair<T>(f[0], f[1]), packPair<T>(f[2], f[3]), packPair<T>(f[4], f[5]),
                    packPair<T>(f[6], f[7]));
}

// weight ⊙ (x · inv), rounding where transformers rounds: the normalised value to the dtype, then the product.
template <ActivationType T>
__device__ __forceinline__ float normedValue(float x, float inv, float weight) {
  using A = Act<T>;
  return A::toFloat(A::fromFloat(A::toFloat(A::fromFloat(x * inv)) * weight));
}
template <ActivationType T>
__device__ __forceinline__ uint4 normed8(const uint4& x, float inv, const uint4& weight) {
  float v[8], w[8];
  unpack8<T>(x, v);
  unpack8<T>(weight, w);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] *= inv;
  const uint4 rounded = pack8<T>(v);  // xf.to(dtype)
  unpack8<T>(rounded, v);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] *= w[k];
  return pack8<T>(v);
}

// silu(gate) · up: x / (1 + exp(-x)) with the precise expf and a correctly rounded division, as ATen's silu
// computes it in fp32 for 16-bit inputs; silu rounded to the dtype, then the product rounded (act_fn(gate) * up).
template <ActivationType T>
__device__ __forceinline__ float siluMulValue(float gate, float up) {
  using A = Act<T>;
  const float silu = A::toFloat(A::fromFloat(gate / (1.f + expf(-gate))));
  return A::toFloat(A::fromFloat(silu * up));
}
template <ActivationType T>
__device__ __forceinline__ uint32_t siluMulPair(uint32_t gate, uint32_t up) {
  using A = Act<T>;
  return packPair<T>(siluMulValue<T>(A::lowToFloat(gate), A::lowToFloat(up)),
                     siluMulValue<T>(A::highToFloat(gate), A::highToFloat(up)));
}
template <ActivationType T>
__device__ __forceinline__ uint4 siluMul8(const uint4& gate, const uint4& up) {
  return make_uint4(siluMulPair<T>(gate.x, up.x), siluMulPair<T>(gate.y, up.y), siluMulPair<T>(gate.z, up.z),
                    siluMulPair<T>(gate.w, up.w));
}

// residual + delta with delta first rounded to the dtype (the GEMV's own output), the sum rounded: h = x + attn.
template <ActivationType T>
__device__ __forceinline__ typename Act<T>::type residualAdd(typename Act<T>::type residual, float delta) {
  using A = Act<T>;
  return A::fromFloat(A::toFloat(residual) + A::toFloat(A::fromFloat(delta)));
}

}  // namespace pareto::kernels::detail
