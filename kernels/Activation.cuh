// The 16-bit activation types the kernels take, and reading them: conversions to and from fp32, the bits of a
// value, 8 values of a 16-byte vector.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "GemvProblem.h"

namespace pareto::kernels::detail {

template <ActivationType T> struct Act;
template <> struct Act<ActivationType::Float16> {
  using type = __half;
  static __device__ __forceinline__ float toFloat(type v) { return __half2float(v); }
  static __device__ __forceinline__ type fromFloat(float v) { return __float2half_rn(v); }
  // The low / high 16 bits of a 32-bit word of packed values.
  static __device__ __forceinline__ float lowToFloat(uint32_t w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xFFFFu)));
  }
  static __device__ __forceinline__ float highToFloat(uint32_t w) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
  }
};
template <> struct Act<ActivationType::BFloat16> {
  using type = __nv_bfloat16;
  static __device__ __forceinline__ float toFloat(type v) { return __bfloat162float(v); }
  static __device__ __forceinline__ type fromFloat(float v) { return __float2bfloat16_rn(v); }
  // bf16 is the top half of an fp32: placing the bits is the whole conversion (one shift or one mask).
  static __device__ __forceinline__ float lowToFloat(uint32_t w) { return __uint_as_float(w << 16); }
  static __device__ __forceinline__ float highToFloat(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }
};

// The bits of one value as they lie in memory.
__device__ __forceinline__ uint32_t bitsOf(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ uint32_t bitsOf(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }

// The 8 values of a 16-byte vector (the first in the low half of the first word) as fp32.
template <ActivationType T>
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    f[2 * k] = Act<T>::lowToFloat(w[k]);
    f[2 * k + 1] = Act<T>::highToFloat(w[k]);
  }
}

}  // namespace pareto::kernels::detail
