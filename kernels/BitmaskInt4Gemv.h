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
//   metadata   uint32 [G][C][2 halves][16 (g, t)][2 pieces][2 k-blocks][2 m-tiles]   the tensor-core path's
//              (bitmaskInt4UsesTensorCores) sparse-MMA metadata, computed from the masks at load time
//              (bitmaskInt4MmaMetadata), in place of the masks: the same 1/8 byte a weight
//
// Bytes per weight: masks 1/8 + codes 0.5 · 1/2 + scales 2 / (2g) (g kept values a scale):
// 2:4 + int4 g128 = 0.125 + 0.25 + 0.0078 = 0.383.
// Each kept value: bit-scan for its column (as bitmask_nm_gemv), one byte permute for f = 0.5 + q/256 (as
// quant_group_gemv), one subtraction of 0.5 + z/256 (exact: (q − z)/256), one FMA per batch row.
#pragma once

#include <algorithm>
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
  int n = 0, m = 0;                  // the N:M pattern (0: unknown, the FFMA path)
  const uint32_t* metadata = nullptr;  // the tensor-core path reads this instead of masks (layout above)
};

// The tensor-core path's metadata from the masks in the kernel layout above ([G][C][32][8] words, `rowGroups` ·
// `chunks` · 256 of them) into `metadata` (as many words). Word ((g · 2 + t) · 2 + p) · 4 + kb · 2 + m of a half
// chunk is the mma.sp metadata register that lanes 4g + t and 4g + t + 2 hand the MMA of piece p (64 columns),
// k-block kb and m-tile m (BitmaskInt4Formats.cuh): bits 0-15 for row 16m + g, bits 16-31 for row 16m + g + 8,
// 4 bits a group slot i = 0..3, which is the piece's column group 4i + 2kb + t; a group's 4 bits are the index of
// its lower kept column and, in bits 2-3, of its higher one. Computing it here rather than from the mask nibbles
// in the kernel takes ~100 instructions a 128-column chunk and lane out of the kernel's loop (bench/NOTES.md
// v6o), where they were a third of its instructions. A nibble of two set bits gives its two columns; the
// padding's 0000 and 1111 give (2, 1) and (0, 3), over zero values and zero x.
void bitmaskInt4MmaMetadata(const uint32_t* masks, int64_t rowGroups, int64_t chunks, uint32_t* metadata);

// S for a weight of `cols` columns (cols/2 kept per row) with groups of `groupSize` kept values.
inline int64_t bitmaskInt4ScaleColumns(int64_t cols, int64_t groupSize) {
  if (groupSize == cols / 2) return 1;  // per row
  return groupSize < 128 ? ceilDiv(cols, 256) * 128 / groupSize : cols / 2 / groupSize;
}

// The tensor-core path (BitmaskInt4Formats.cuh) for 2:4 with groups of a multiple of 32 kept values (or whole rows):
// as for bitmask 2:4 (BitmaskNMGemv.h), a 2:4 group's two kept codes are one byte of the lane's code stream, so
// ldmatrix over the lane-interleaved codes hands each lane whole groups, which it dequantizes into the kept pairs
// of the sparse A operand (mma.sp, BitmaskInt4MmaFormat). 16:32 and the other 50% patterns, and groups of 16
// kept values (two scales inside one MMA's k range), stay on the FFMA path. Every batch: on the H200 the tensor
// cores measured faster from batch 1 (a Llama-3.1-8B step 2.46 against 2.79 ms at batch 1, 2.86 against 10.71 at
// batch 8: bench/NOTES.md v6e). PARETO_BITMASK_INT4_MMA=0 in the environment sends everything to the FFMA path
// (for A/B timing; read once).
bool bitmaskInt4UsesTensorCores(int n, int m, int64_t groupSize, int64_t cols);
// The batch the tensor-core kernel is compiled for: batch 1 runs the batch-2 kernel with the second row of x
// staged as zeros. Its own batch-1 instantiation measured 29% slower than the batch-2 one runs two rows (2.57
// against 1.99 ms a Llama-3.1-8B step: ptxas scheduled it with 80 registers against 96, bench/NOTES.md v6h), and
// the second row costs one more 16-byte x load a piece and lane.
inline int bitmaskInt4MmaBatch(int batch) { return std::max(2, compiledBatch(batch)); }
// Its weight stream: each warp a ring of kBitmaskInt4RingStages slots of one 128-column chunk (half a layout
// chunk): 2 code pieces of 512 bytes, the half chunk's 512 bytes of metadata, up to 2 scale columns (64 bytes
// each) and their zeros (32 bytes each), filled by cp.async.
inline constexpr int kBitmaskInt4MmaChunkCols = 128;
inline constexpr int kBitmaskInt4RingStages = 4;
inline constexpr int kBitmaskInt4CodeBytes = 2 * 512;
inline constexpr int kBitmaskInt4MetadataBytes = 32 * 16;
inline constexpr int kBitmaskInt4ScaleBytes = 2 * 64;
inline constexpr int kBitmaskInt4SlotBytes = kBitmaskInt4CodeBytes + kBitmaskInt4MetadataBytes + kBitmaskInt4ScaleBytes + 2 * 32;
inline constexpr size_t kBitmaskInt4RingBytes =
    size_t(kRingWarpsPerBlock) * kBitmaskInt4RingStages * kBitmaskInt4SlotBytes;
// x is staged as 16-bit rows padded by this many values: a quarter-warp's 16-byte B-fragment loads (lanes t = 0-3
// of two batch rows, 32 bytes apart within a row) then fall in 8 different 4-bank slots.
inline constexpr int kBitmaskInt4StagePadHalves = 8;

std::string checkBitmaskInt4Gemv(const GemvProblem& p, const BitmaskInt4GemvWeight& w);
GemvSplit bitmaskInt4GemvSplit(const GemvProblem& p, const BitmaskInt4GemvWeight& w, int multiprocessors);
std::string runBitmaskInt4Gemv(const GemvProblem& p, const BitmaskInt4GemvWeight& w, const GemvSplit& s,
                               float* partials, int* counters, CUstream_st* stream);

}  // namespace pareto::kernels
