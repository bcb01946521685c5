// spqr_gemv: y = x · Ŵᵀ for a SpQR weight (core/formats/SpqrWeight.h) in one kernel: the dense low-bit part
// (groups of 16 input columns, each with a quantized scale and an integer zero code; the scale codes decoded
// with fp16 second-level statistics shared by `scaleGroup` consecutive rows) and the fp16 outliers in CSR.
//   ŝ = base + scaleCode · step,   Ŵ[r, c] = (q[r, c] − z) · ŝ  (+ the outlier's addition at its position)
// Kernel layout (GemvProblem.h):
//
//   chunk      128 columns = 8 groups of 16; C = ceil(cols / 128); b = bits (2, 3 or 4)
//   codes      [G][C][b pieces][32 lanes][16 bytes]   a lane's 128 codes of a chunk as 4b little-endian 32-bit
//              words, the codes of columns 2p and 2p + 1 ("pair p") 16 bits apart in one word, so that the
//              tensor-core path turns a pair into two fp16 values with one shift and one LOP3:
//              spqrCodeBit(b, i, k) is where bit k of column i's code sits in the lane's 128b bits. Word w holds
//              pairs per·w .. per·w + per − 1 (per = 16 / b: 8, 5 or 4), pair per·w + j at bits [b·j, b·j + b)
//              (column 2p) and [16 + b·j, ...) (column 2p + 1); at 3 bits, 60 pairs fill bits 0-14 and 16-30 of
//              the 12 words and pair 60 + i takes bit 15 (column 2p) and bit 31 (2p + 1) of words 3i, 3i + 1,
//              3i + 2 for its code bits 0, 1, 2
//   stats      uint8 [G][C][32 lanes][8]   per group: scale code in the low nibble, zero code in the high one
//   second     fp16 pairs (base, step) [G][C·8][32 / scaleGroup]: the scale's second-level grid of the rows
//              32g + scaleGroup·j ... of one group
//   outliers   rowOffsets int32 [32·G + 1], columns uint16 [nnz], values fp16 [nnz]: CSR by row, columns
//              increasing; the value is what the outlier adds to the dense part at its position (the re-layout
//              sets the dense code there to the group's zero code, so that it is the outlier itself)
//   padding    rows past `rows`: codes 0, stats 0, no outliers; columns past `cols`: any codes (x is 0 there)
//
// Bytes per weight: b/8 + 1/16 (stats, one byte a group: 2 bits above the stored 3+3) + 4/(16·scaleGroup)
// + (2 + 2)·outliers/weights + 4/cols: 3-bit, 1% outliers ≈ 0.375 + 0.0625 + 0.016 + 0.04 = 0.49.
// The dense part uses the same fp32 trick as quant_group_gemv (QuantGroupGemv.h) with sums of x per group.
// Outliers: each lane adds its own row's, shared out over every warp of the row group; their x is read from
// global memory (L1/L2), since a row's outliers may fall in any block's slice.
#pragma once

#include <string>

#include "GemvProblem.h"

struct CUstream_st;

namespace pareto::kernels {

inline constexpr int kSpqrChunkCols = 128;
inline constexpr int kSpqrGroupCols = 16;

struct SpqrGemvWeight {
  const void* codes = nullptr;
  const uint8_t* stats = nullptr;
  const uint16_t* second = nullptr;      // fp16 bits, pairs (base, step)
  const int32_t* rowOffsets = nullptr;
  const uint16_t* outlierColumns = nullptr;
  const uint16_t* outlierValues = nullptr;  // fp16 bits
  int bits = 3;
  int scaleGroup = 16;                   // rows sharing one second-level grid (divides 32)
};

inline int64_t spqrChunks(int64_t cols) { return ceilDiv(cols, kSpqrChunkCols); }

// The code layout of a lane's chunk (above): bit `bit` of the code of column `column` (0..127) of the chunk, as a
// bit index into the lane's 16·bits bytes read as little-endian 32-bit words.
PARETO_HOST_DEVICE constexpr int spqrPairsPerWord(int bits) { return 16 / bits; }
PARETO_HOST_DEVICE constexpr int spqrCodeBit(int bits, int column, int bit) {
  const int pair = column / 2, high = column % 2, per = spqrPairsPerWord(bits);
  if (pair < per * 4 * bits) return 32 * (pair / per) + 16 * high + bits * (pair % per) + bit;
  return 32 * (3 * (pair - per * 4 * bits) + bit) + 15 + 16 * high;  // 3 bits: the words' spare bits
}

// The tensor-core path (spqr_gemv.cu: SpqrMmaFormat), through the shared-memory ring of GemvDriver.cuh, from
// batch kSpqrMmaMinBatch on, for second-level groups of at least kSpqrMmaMinScaleGroup rows (a chunk's grids then
// fit the slot's kSpqrSecondBytes). Each lane turns its row's codes of 32 columns into exact (q − z) values in a
// dense 32 × 32 tile of the warp in shared memory, which ldmatrix reads as A (two groups of 16 columns, one k-block
// each); each group's product is scaled by its rows' scales in fp32. Each block adds its columns' outliers after
// the chunks, with x from its staging. At batch 1 the FFMA path measured faster (2.74 against 3.61 ms a step),
// from batch 2 the ring (batch 2: 3.42 against 3.72; batch 16: 5.24 against ~40: bench/NOTES.md v6f-2).
// PARETO_SPQR_MMA=0 sends everything to the FFMA path, =1 to the tensor cores at every batch (A/B timing; read once).
bool spqrUsesTensorCores(int scaleGroup, int compiledBatch);
// Whether the tensor-core path begins its outlier searches before griddepcontrol.wait (spqr_gemv.cu, ringRowStart):
// on unless PARETO_SPQR_EARLY_SEARCH=0 (bench/NOTES.md "tenth session": −1.5 to −2% at batch 2-16; read once).
bool spqrEarlySearchEnabled();
inline constexpr int kSpqrMmaMinBatch = 2;
inline constexpr int kSpqrMmaMinScaleGroup = 8;
inline constexpr int kSpqrRingStages = 3;
inline constexpr int kSpqrStatBytes = 32 * 8;
inline constexpr int kSpqrSecondBytes = 8 * (32 / kSpqrMmaMinScaleGroup) * 4;
// A slot: the chunk's code pieces (bits · 512 bytes), the 32 lanes' statistics and the second-level grids.
inline constexpr int spqrSlotBytes(int bits) { return bits * 512 + kSpqrStatBytes + kSpqrSecondBytes; }
inline constexpr size_t spqrRingBytes(int bits) {
  return size_t(kRingWarpsPerBlock) * kSpqrRingStages * size_t(spqrSlotBytes(bits));
}
// x staged as 16-bit rows padded by this many values; the warps' dense tiles (32 rows padded to 80 bytes) after it.
inline constexpr int kSpqrStagePadHalves = 16;
inline constexpr int kSpqrTileBytes = 32 * 80;
inline constexpr size_t kSpqrTilesBytes = size_t(kRingWarpsPerBlock) * kSpqrTileBytes;

std::string checkSpqrGemv(const GemvProblem& p, const SpqrGemvWeight& w);
GemvSplit spqrGemvSplit(const GemvProblem& p, const SpqrGemvWeight& w, int multiprocessors);
std::string runSpqrGemv(const GemvProblem& p, const SpqrGemvWeight& w, const GemvSplit& s, float* partials,
                        int* counters, CUstream_st* stream);

}  // namespace pareto::kernels
