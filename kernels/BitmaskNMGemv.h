// bitmask_nm_gemv: y = x · Ŵᵀ for an N:M-sparse weight stored as bitmasks and kept values (the layout of
// core/formats/BitmaskNMWeight.h), re-laid out lane-interleaved for the kernel (GemvProblem.h):
//
//   chunk      8 mask words = 256 columns of one row; C = ceil(cols / 256) chunks per row
//   masks      uint32 [G][C][32 lanes][8]        lane l of row group g is row 32g + l; word k of a chunk covers
//                                                columns 256c + 32k ... +31, bit b ⇔ column 256c + 32k + b kept
//   values     16-bit [G][C][K][32 lanes][8]     K = 32·N/M kept values per word; a lane's 8·K values of a chunk
//                                                (word 0's K values in column order, then word 1's, ...) are cut
//                                                into K pieces of 8 (16 bytes), piece i of all 32 lanes adjacent
//   padding    rows past `rows`: any valid mask, values 0; words past cols/32: the lowest K bits set, values 0
//
// Bytes per weight are the stored format's: (K·2 + 4) / 32 = 1.125 for 50% fp16. Because every mask word has
// exactly K set bits, the kernel's walk over a word is a compile-time loop of K bit-scans (find the highest set
// bit, clear it), fully unrolled, with the value's place in the lane's registers known at compile time.
// Compiled for K ∈ {8, 16, 24} (25%, 50% and 75% density: 1:4, 2:8, 2:4, 4:8, 8:16, 16:32, 3:4, 12:16, ...).
#pragma once

#include <string>

#include "GemvProblem.h"

struct CUstream_st;

namespace pareto::kernels {

inline constexpr int kBitmaskChunkCols = 256;
inline constexpr int kBitmaskWordsPerChunk = kBitmaskChunkCols / 32;

struct BitmaskNMGemvWeight {
  const uint32_t* masks = nullptr;  // see above
  const void* values = nullptr;     // fp16 or bf16, the activation type
  int n = 0;
  int m = 0;
};

inline int64_t bitmaskChunks(int64_t cols) { return ceilDiv(cols, kBitmaskChunkCols); }
inline int bitmaskKeptPerWord(int n, int m) { return m > 0 ? 32 * n / m : 0; }

// "" when the kernel can run this problem, else why not (pattern, shape, alignment).
std::string checkBitmaskNMGemv(const GemvProblem& p, const BitmaskNMGemvWeight& w);
GemvSplit bitmaskNMGemvSplit(const GemvProblem& p, int multiprocessors);
// Runs on `stream`; partials/counters as GemvProblem.h describes. Returns "" or the CUDA error.
std::string runBitmaskNMGemv(const GemvProblem& p, const BitmaskNMGemvWeight& w, const GemvSplit& s,
                             float* partials, int* counters, CUstream_st* stream);

}  // namespace pareto::kernels
