// quant_group_gemv: y = x · Ŵᵀ for a weight quantized to int4 or int8 codes on uniform grids with one fp16
// scale (and, asymmetric, one uint8 zero) per group of g input columns or per output row (core/formats/
// QuantGroupWeight.h): Ŵ[r, c] = (q[r, c] − z) · s[r, c / g]. Kernel layout (GemvProblem.h):
//
//   chunk      256 columns at 4 bits, 128 at 8 bits: 128 bytes of codes per row; C = ceil(cols / chunk)
//   codes      [G][C][8 pieces][32 lanes][16 bytes]   lane l of row group g is row 32g + l; a lane's 128 bytes
//              of a chunk in the stored order (4 bits: column 2i in the low nibble of byte i; symmetric codes
//              biased by +8; 8 bits: one byte a column, symmetric as int8, asymmetric as uint8)
//   scales     fp16 [G][S][32 lanes]   S = scale columns, padded so that every chunk's groups exist (padding 0)
//   zeros      uint8 [G][S][32 lanes]  asymmetric only
//   padding    rows past `rows` and columns past `cols`: any codes, scale 0
//
// Bytes per weight are the stored format's (int4 g128 symmetric: 0.5 + 2/128 = 0.516).
//
// Dequantization without an integer-to-float conversion: one byte permute builds the fp32 number
// f = 0.5 + q/256 (4-bit q placed in the mantissa under a fixed exponent) or f = 1 + q/32768 (8-bit), exact,
// and the lane accumulates Σ f·x over a group; the group's Σ x (computed once per block, when x is staged)
// turns that into Σ (q − z)·x = 256·Σ f x − (128 + z)·Σ x (4 bits) or 32768·Σ f x − (32768 + z)·Σ x (8 bits).
// That is two instructions a weight (permute, FMA) instead of four (shift, mask, convert, FMA). From batch 4 on,
// 4-bit codes go to the tensor cores instead (int4UsesTensorCores; quant_group_gemv.cu says how the lane-per-row
// layout feeds m16n8k16 unchanged): the FFMA path's work grows with every batch row, an MMA covers four.
#pragma once

#include <string>

#include "GemvProblem.h"

struct CUstream_st;

namespace pareto::kernels {

struct QuantGroupGemvWeight {
  const void* codes = nullptr;
  const uint16_t* scales = nullptr;  // fp16 bits
  const uint8_t* zeros = nullptr;    // asymmetric only
  int bits = 4;                      // 4 or 8
  bool symmetric = true;
  int64_t groupSize = 0;             // columns per scale; cols for per-channel
  int64_t scaleColumns = 0;          // S above
};

inline int quantChunkCols(int bits) { return bits == 4 ? 256 : 128; }
inline int64_t quantChunks(int64_t cols, int bits) { return ceilDiv(cols, quantChunkCols(bits)); }
// Columns whose activations are summed together: a group, or a chunk when groups span chunks.
inline int64_t quantSumUnit(int64_t groupSize, int bits) {
  return groupSize < quantChunkCols(bits) ? groupSize : quantChunkCols(bits);
}
// S: one scale column per sum unit of the padded width, mapped back to the stored group of that unit.
inline int64_t quantScaleColumns(int64_t cols, int64_t groupSize, int bits) {
  const int64_t padded = quantChunks(cols, bits) * quantChunkCols(bits);
  return groupSize < quantChunkCols(bits) ? padded / groupSize : ceilDiv(cols, groupSize);
}

// How the 4-bit (tensor-core) kernel stages x in shared memory: planes of one 32-byte record per 8 columns (the
// A registers of the two MMAs of a code word, see quant_group_gemv.cu): one plane per pair of batch rows
// (4p + h, 4p + h + 2), h = 0, 1, for the rows a compiled batch has, and one plane of zeros for the lanes whose
// A fragment is zero. Each plane is padded by 8 words so that the planes a warp reads at once start in
// different shared-memory banks.
constexpr int int4StagePlanes(int compiledBatch) {
  return (compiledBatch <= 1 ? 1 : 2 * ((compiledBatch + 3) / 4)) + 1;
}
inline constexpr int kInt4StagePadWords = 8;
// 4-bit codes run on the tensor cores from batch 4 on (compiled batch 4, 8, 16); at batch 1-2 the FFMA path is
// faster (measured on the H200: bench/NOTES.md).
constexpr bool int4UsesTensorCores(int compiledBatch) { return compiledBatch >= 4; }

std::string checkQuantGroupGemv(const GemvProblem& p, const QuantGroupGemvWeight& w);
GemvSplit quantGroupGemvSplit(const GemvProblem& p, const QuantGroupGemvWeight& w, int multiprocessors);
std::string runQuantGroupGemv(const GemvProblem& p, const QuantGroupGemvWeight& w, const GemvSplit& s,
                              float* partials, int* counters, CUstream_st* stream);

}  // namespace pareto::kernels
