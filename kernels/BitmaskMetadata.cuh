// The sparse tensor cores' metadata (mma.sp, TensorCoreOps.cuh) of 2:4 column groups from the bitmask layout's
// mask nibbles, for the 2:4 ring of bitmask_nm_gemv.cu (2:4 + int4 has them computed at load time:
// bitmaskInt4MmaMetadata).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace pareto::kernels::detail {

// (a & c) | (b & ~c) for every bit: one LOP3 (the constant as a register operand).
__device__ __forceinline__ uint32_t selectBits(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xE4;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Each nibble of `mask` (a group of 4 columns, bit i: column i kept) becomes the group's metadata: the lower kept
// column's index in bits 0-1, the higher one's in bits 2-3. With the bits b0..b3 of a nibble, that is
// p0 = b0 ? 0 : b1 ? 1 : 2 and p1 = b3 ? 3 : b2 ? 2 : 1, i.e. bit 0 = ~b0 & b1, bit 1 = ~(b0 | b1),
// bit 2 = ~b2 | b3, bit 3 = b2 | b3: four LOP3-able functions of the nibble and its neighbours one bit up or down,
// five instructions for 8 groups. Exact for the nibbles of two set bits (every group of a 2:4 row); the padding's
// nibbles (0000, 1111) give index pairs (2, 1) and (0, 3), which mma.sp accepts, over values and x that are 0.
__device__ __forceinline__ uint32_t sparseMetadata(uint32_t mask) {
  const uint32_t down = mask >> 1, up = mask << 1;
  uint32_t low, high;
  // bits 0 and 2 from (mask, down): c ? (~a | b) : (~a & b) with c = bit 2 of each nibble.
  asm("lop3.b32 %0, %1, %2, %3, 0x8E;" : "=r"(low) : "r"(mask), "r"(down), "r"(0x44444444u));
  // bits 1 and 3 from (mask, up): c ? (a | b) : ~(a | b) with c = bit 3 of each nibble.
  asm("lop3.b32 %0, %1, %2, %3, 0xA9;" : "=r"(high) : "r"(mask), "r"(up), "r"(0x88888888u));
  return selectBits(low, high, 0x55555555u);
}

}  // namespace pareto::kernels::detail
