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

// The tensor-core paths (bitmask_nm_gemv.cu), through the shared-memory ring of GemvDriver.cuh:
// - BitmaskMmaFormat for patterns that keep exactly two of every four columns (2:4), from batch 4 on: the two kept
//   values of each group of 4 columns are a whole 32-bit word of the lane's value stream, so ldmatrix over the
//   lane-interleaved values hands each lane the words of its sparse A fragment (mma.sp), and the group's mask
//   nibble becomes its metadata in registers. Batch 1 and 2 stay on the FFMA path, where it measured faster on the H200
//   (batch 1: 2.24 against 3.28 ms a Llama-3.1-8B step, batch 2: 2.62 against 3.12; from batch 4 the ring wins,
//   2.88 against 4.34: bench/NOTES.md v6d).
// - BitmaskScatterMmaFormat for the other patterns of 16 kept values a word (16:32, 8:16, 4:8), from batch
//   kBitmaskScatterMinBatch on: a word's kept values may lie anywhere in it, so each lane scatters its row's
//   values into a zeroed dense 32 × 32 tile of the warp in shared memory, which ldmatrix then reads as A. At
//   batch 1-4 the FFMA path measured as fast or faster (batch 4: 4.33 against 4.39 ms a step; batch 8: 7.40
//   against 5.13; batch 16: 14.03 against 6.44: bench/NOTES.md v6f).
// PARETO_BITMASK_MMA=0 in the environment sends everything to the FFMA path, =1 every pattern the tensor cores
// take to them at every batch (for A/B timing; read once).
bool bitmaskUsesTensorCores(int n, int m, int compiledBatch);
// Its weight stream: each warp a ring of kBitmaskRingStages shared-memory slots of one 128-column chunk (half a
// layout chunk): 8 value pieces of 512 bytes and the 32 lanes' 4 mask words, filled by cp.async.
inline constexpr int kBitmaskMmaChunkCols = 128;
inline constexpr int kBitmaskRingStages = 2;
inline constexpr int kBitmaskValueBytes = 8 * 512;
inline constexpr int kBitmaskSlotBytes = kBitmaskValueBytes + 32 * 16;
inline constexpr size_t kBitmaskRingBytes = size_t(kRingWarpsPerBlock) * kBitmaskRingStages * kBitmaskSlotBytes;
// The scatter path's tile: a warp's 32 rows × 32 columns of 16-bit values, each row padded to 80 bytes so that
// the 8 rows an ldmatrix matrix reads start in distinct 16-byte bank slots. Placed after the staged x.
inline constexpr int kBitmaskScatterTileBytes = 32 * 80;
inline constexpr size_t kBitmaskScatterTilesBytes = size_t(kRingWarpsPerBlock) * kBitmaskScatterTileBytes;
inline constexpr int kBitmaskScatterMinBatch = 8;
// The FFMA path at batch 1 (2:4 and the other N:M): a row of at most 16 layout chunks (4096 columns) runs fastest
// in splits of 6 chunks, 3 a row, where the wave-filling default takes 1, 2 or 4 (`gemv_kernels sweep` on an H100,
// bench/NOTES.md "the split sweep": 2:4 qkv 12.1 → 11.8 µs, o 10.0 → 9.0, gate+up 45.2 → 44.1; 16:32 the same;
// longer rows, down's 56 chunks, keep the default).
inline constexpr int64_t kBitmaskFfmaShortRowChunks = 16;
inline constexpr int64_t kBitmaskFfmaChunksPerSplit = 6;
// The least chunks a warp of its split (chooseRingSplit): 3, not the default 2. v6d measured 4 better than 2 (qkv
// −8%, o −5% at batch 8) when a warp had its row group to itself; with warps sharing row groups and the refitted
// cost (chooseRingSplit), the sweep puts 3 ahead of 4 (bench/NOTES.md "the split sweep": batch 16 o 18.4 → 14.3 µs
// at 6 × 2, qkv 18.8 → 17.4 at 5 × 2; batch 8 o 11.5 → 11.2), each split timed alone, the step not yet.
inline constexpr int64_t kBitmaskRingMinChunksPerWarp = 3;
// x is staged as 16-bit rows padded by this many values, so that the 4 batch rows a quarter-warp's B-fragment
// loads touch at once (32 bytes each) start in different banks.
inline constexpr int kBitmaskStagePadHalves = 16;
// The 2:4 path's staged rows are padded by 64 bytes: a quarter-warp's 16-byte B loads (lanes t = 0-3 of two batch
// rows, 64 contiguous bytes each) then cover all 32 banks once.
inline constexpr int kBitmaskSparseStagePadHalves = 32;

// "" when the kernel can run this problem, else why not (pattern, shape, alignment).
std::string checkBitmaskNMGemv(const GemvProblem& p, const BitmaskNMGemvWeight& w);
GemvSplit bitmaskNMGemvSplit(const GemvProblem& p, const BitmaskNMGemvWeight& w, int multiprocessors);
// Runs on `stream`; partials/counters as GemvProblem.h describes. Returns "" or the CUDA error.
std::string runBitmaskNMGemv(const GemvProblem& p, const BitmaskNMGemvWeight& w, const GemvSplit& s,
                             float* partials, int* counters, CUstream_st* stream);

}  // namespace pareto::kernels
