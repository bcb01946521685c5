// Byte-permute selectors that expand the two kept values of a 2:4 column group (one 32-bit word of two 16-bit
// values, the first kept value in the low half) into the group's 4 columns, for the dense tensor-core path of
// 2:4 + int4 at batch 1 (bitmask_int4_gemv.cu: BitmaskInt4ExpandFormat; the other 2:4 paths use mma.sp).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace pareto::kernels::detail {

__host__ __device__ constexpr uint32_t halfSelector(int byteLow) {
  return uint32_t(byteLow) | uint32_t(byteLow + 1) << 4;
}
inline constexpr uint32_t kZeroHalf = 0x44u;  // byte 0 of the second operand (0) twice

// Selectors for the group's mask nibble n: .x gives columns 0-1, .y columns 2-3 (`__byte_perm(pair, 0, sel)`).
// Column 0 is the first value if bit 0 is set; column 1 the second if bits 0 and 1 are set, the first if only
// bit 1; column 2 the first if bits 2 and 3 are set, the second if only bit 2; column 3 the second if bit 3 is
// set. Nibbles without exactly two bits occur only in padding, whose x is 0.
__device__ __forceinline__ uint2 nibbleSelectors(int n) {
  const bool b0 = n & 1, b1 = n & 2, b2 = n & 4, b3 = n & 8;
  const uint32_t c0 = b0 ? halfSelector(0) : kZeroHalf;
  const uint32_t c1 = b1 ? halfSelector(b0 ? 2 : 0) : kZeroHalf;
  const uint32_t c2 = b2 ? halfSelector(b3 ? 0 : 2) : kZeroHalf;
  const uint32_t c3 = b3 ? halfSelector(2) : kZeroHalf;
  return make_uint2(c0 | c1 << 8, c2 | c3 << 8);
}

}  // namespace pareto::kernels::detail
