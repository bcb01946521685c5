// bitmask_int4_gemv: y = x · Ŵᵀ for a 50%-dense N:M weight (2:4, 4:8, 8:16, 16:32) whose kept values are
// quantized to 4-bit codes (core/compress "prune then quantize": the bitmask of core/formats/BitmaskNMWeight.h
// plus a QuantGroupWeight over the kept values, groups counted in kept values). Kernel layout (GemvProblem.h):
//
//   chunk      8 mask words = 256 columns = 128 kept values of one row; C = ceil(cols / 256)
//   masks      uint32 [G][C][32 lanes][8]    as bitmask_nm_gemv (BitmaskNMGemv.h)
//   codes      [G][C][4 pieces][32 lanes][16 bytes]   a lane's 128 kept codes of the chunk in column order, two a
//              byte (kept value 2i in the low nibble of byte i), symmetric codes biased by +8
//   scales     fp16 [G][S][32 lanes]   one per group of `groupSize` kept values (S padded so every chunk's
//              groups exist); zeros uint8 [G][S][32] when asymmetric
//
// Bytes per weight: masks 1/8 + codes 0.5 · 1/2 + scales 2 / (2g) (g kept values a scale):
// 2:4 + int4 g128 = 0.125 + 0.25 + 0.0078 = 0.383.
// Each kept value: bit-scan for its column (as bitmask_nm_gemv), one byte permute for f = 0.5 + q/256 (as
// quant_group_gemv), one subtraction of 0.5 + z/256 (exact: (q − z)/256), one FMA per batch row.
#pragma once

#include <string>

#include "GemvProblem.h"

struct CUstream_st;

namespace pareto::kernels {

struct BitmaskInt4GemvWeight {
  const uint32_t* masks = nullptr;
  const void* codes = nullptr;
  const uint16_t* scales = nullptr;  // fp16 bits
  const uint8_t* zeros = nullptr;    // asymmetric only
  bool symmetric = true;
  int64_t groupSize = 0;             // kept values per scale; cols/2 for per-channel
  int64_t scaleColumns = 0;          // S above
};

// S for a weight of `cols` columns (cols/2 kept per row) with groups of `groupSize` kept values.
inline int64_t bitmaskInt4ScaleColumns(int64_t cols, int64_t groupSize) {
  if (groupSize == cols / 2) return 1;  // per row
  return groupSize < 128 ? ceilDiv(cols, 256) * 128 / groupSize : cols / 2 / groupSize;
}

std::string checkBitmaskInt4Gemv(const GemvProblem& p, const BitmaskInt4GemvWeight& w);
GemvSplit bitmaskInt4GemvSplit(const GemvProblem& p, int multiprocessors);
std::string runBitmaskInt4Gemv(const GemvProblem& p, const BitmaskInt4GemvWeight& w, const GemvSplit& s,
                               float* partials, int* counters, CUstream_st* stream);

}  // namespace pareto::kernels
