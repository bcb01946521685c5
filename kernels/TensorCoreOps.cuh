// The tensor-core instructions the ring GEMV formats share (QuantGroupFormats.cuh, bitmask_nm_gemv.cu,
// BitmaskInt4Formats.cuh, spqr_gemv.cu).
#pragma once

#include <cstdint>

#include "GemvProblem.h"

namespace pareto::kernels::detail {

// One m16n8k16 tensor-core product with fp32 accumulation: c += a · b (a: 4 registers of A, b: 2 of B).
template <ActivationType T>
__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  if constexpr (T == ActivationType::Float16)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One m16n8k32 product with a 2:4-sparse A (mma.sp, fp32 accumulation): c += a · b, where a0..a3 hold the kept
// pairs as the m16n8k16 A fragment does (a0: row g, compressed columns 2t, 2t + 1; a1: row g + 8; a2, a3: columns
// 2t + 8, 2t + 9), b0..b3 the dense B rows 2t + (0, 1) + 8i, and `metadata` (sparsity selector 0: lanes t = 0, 1
// of each quad) the kept columns' indices in their groups of 4: lane t holds compressed columns 8t .. 8t + 7 of
// row g in bits 0-15 and of row g + 8 in bits 16-31, two bits a value, the group's lower one first.
template <ActivationType T>
__device__ __forceinline__ void mmaSparse16832(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint32_t b0, uint32_t b1, uint32_t b2, uint32_t b3,
                                               uint32_t metadata) {
  if constexpr (T == ActivationType::Float16)
    asm("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, "
        "{%0,%1,%2,%3}, %12, 0x0;"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(b2), "r"(b3), "r"(metadata));
  else
    asm("mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, "
        "{%0,%1,%2,%3}, %12, 0x0;"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(b2), "r"(b3), "r"(metadata));
}

// (a & mask) | set in one LOP3 (the dequantizations' "code under an exponent"). With the constants as register
// operands ptxas cannot split it into two LOP3s of one immediate each, which it does with the C++ expression.
__device__ __forceinline__ uint32_t maskAndSet(uint32_t a, uint32_t mask, uint32_t set) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(mask), "r"(set));
  return d;
}

// ldmatrix.x4 over 512 contiguous bytes of shared memory at `address` + 16·lane (32 rows of 16 bytes): lane
// l = 4g + t gets bytes 4t..4t+3 of rows g, g + 8, g + 16 and g + 24 in r[0..3].
__device__ __forceinline__ void ldmatrixX4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The C fragments of a warp's 32 rows (two m-tiles) × Tiles batch tiles of 8 as the lane's row: row r = lane,
// batch b is tile (r / 16, b / 8), register 2·((r / 8) & 1) + b % 2 of lane 4·(r % 8) + (b % 8) / 2.
template <int B, int Tiles>
__device__ __forceinline__ void rowsOfFragments(const float (&c)[2][Tiles][4], int lane, float (&total)[B]) {
  const int m = lane >> 4, upper = (lane >> 3) & 1;
#pragma unroll
  for (int b = 0; b < B; ++b) {
    const int n = b / 8, source = 4 * (lane & 7) + (b % 8) / 2, reg = b % 2;
    const float v00 = __shfl_sync(0xFFFFFFFFu, c[0][n][reg], source);
    const float v01 = __shfl_sync(0xFFFFFFFFu, c[0][n][reg + 2], source);
    const float v10 = __shfl_sync(0xFFFFFFFFu, c[1][n][reg], source);
    const float v11 = __shfl_sync(0xFFFFFFFFu, c[1][n][reg + 2], source);
    total[b] = m == 0 ? (upper ? v01 : v00) : (upper ? v11 : v10);
  }
}

}  // namespace pareto::kernels::detail
