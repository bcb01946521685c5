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
// That is two instructions a weight (permute, FMA) instead of four (shift, mask, convert, FMA): the FFMA path,
// now only for 8-bit codes at batch 1-2 and with bf16 activations. Everything else runs on the tensor cores
// (quantUsesTensorCores; QuantGroupFormats.cuh says how ldmatrix turns the lane-per-row layout into m16n8k16
// fragments without a new layout).
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

// The tensor-core path (QuantGroupFormats.cuh: QuantMmaFormat): 4-bit codes at every batch 1-16 in fp16 and bf16,
// 8-bit codes in fp16 from batch 2 on. At batch 1 the 8-bit FFMA path is faster on the H200 (2.36 against 2.87 ms
// a Llama-3.1-8B step, bench/NOTES.md v6c: at 1 byte a weight its 16 warps a multiprocessor with two chunks in
// registers each already keep ~70% of copy bandwidth busy); from batch 2 its per-batch-row FMAs lose (3.19 against
// the ring's 2.87 ms at batch 2). 8-bit codes with bf16 activations stay on the FFMA path: 128 + an 8-bit code is
// not exact in bf16's 8 significant bits, so the exponent trick does not apply. PARETO_QUANT_MMA=0 in the
// environment sends everything to the FFMA path, =1 8-bit fp16 codes to the tensor cores at every batch (for A/B
// timing; read once).
bool quantUsesTensorCores(int bits, ActivationType type, int compiledBatch);
// 4-bit codes with fp16 activations on the tensor cores read odd columns under a second exponent
// (QuantGroupFormats.cuh: kOddExponent); PARETO_QUANT_ODD=0 turns it off (for A/B timing; read once).
bool quantOddExponent();
// Its weight stream: each warp a ring of kQuantRingStages shared-memory slots of one chunk's codes (4 KB),
// scales (up to 8 sum units × 32 rows × fp16) and zeros (8 × 32 × uint8), filled by cp.async. Two stages for
// 8 warps a block (v6c) in the shared memory v6b gave 4 stages for 4 warps: twice the warps a multiprocessor,
// the same bytes in flight.
inline constexpr int kQuantRingStages = 2;
inline constexpr int kQuantCodeBytes = 4096;
inline constexpr int kQuantScaleBytes = 512;
inline constexpr int kQuantSlotBytes = kQuantCodeBytes + kQuantScaleBytes + 256;
inline constexpr size_t kQuantRingBytes = size_t(kRingWarpsPerBlock) * kQuantRingStages * kQuantSlotBytes;
// From quantHalvesMinBatch the ring's chunk is half a layout chunk (4 pieces: 2 KB of codes, up to 4 sum units of
// scales and zeros) in 3 stages: the same 4 KB a warp in flight while one slot is computed, in 25% less shared
// memory, which goes to the staged x (16-32 bytes a column at batch 8-16). With whole chunks x left room for only
// 3 chunks a split at batch 16 (6 at 8), so the long shapes ran 2-3 waves of short splits (bench/NOTES.md v6g).
// 4-bit codes from batch 8 (−4% at 8, −16% at 16 on the H200); 8-bit codes from 16 (−8%; at 8 halves measured
// 17% slower: twice the sum units, 64 columns each, for the same bytes, where whole chunks already fit one wave).
// PARETO_QUANT_HALVES=0 keeps whole chunks at every batch (A/B timing; read once). The kernel compiles halves for
// batch 8 and 16 only.
constexpr int quantHalvesMinBatch(int bits) { return bits == 4 ? 8 : 16; }
inline constexpr int kQuantHalfRingStages = 3;
inline constexpr int kQuantHalfCodeBytes = kQuantCodeBytes / 2;
inline constexpr int kQuantHalfScaleBytes = kQuantScaleBytes / 2;
inline constexpr int kQuantHalfSlotBytes = kQuantHalfCodeBytes + kQuantHalfScaleBytes + 128;
// v7d, PARETO_QUANT_DEEP_RING=1 (off; quantDeepRing): 4-bit codes with fp16 activations at batch 1-4 on half chunks
// too, in 4 stages: 3 half chunks (6 KB) a warp in flight while one is computed, where whole chunks in 2 stages keep
// 1 (4 KB), in the same shared memory (4 × 2.2 KB against 2 × 4.4 KB a warp). At batch 1 the int4 ring streams at
// 3.65 TB/s on the H200 (its four GEMVs fitted as a fixed cost and a rate), about what 16 warps of 4 KB in flight
// give a multiprocessor at ~2.3 µs of loaded latency; x is small there (8-32 KB), so the stages cost nothing else.
inline constexpr int kQuantDeepRingStages = 4;
inline constexpr int kQuantDeepRingMaxBatch = 4;
bool quantDeepRing(int bits, ActivationType type, int compiledBatch);
// Ring chunks a layout chunk on the tensor-core path: 1 or 2.
int quantRingHalves(int bits, ActivationType type, int compiledBatch);
// Stages of the ring: kQuantRingStages for whole chunks, kQuantHalfRingStages for halves, kQuantDeepRingStages (v7d).
int quantRingStages(int bits, ActivationType type, int compiledBatch);
inline size_t quantRingBytes(int halves, int stages) {
  return size_t(kRingWarpsPerBlock) * size_t(stages) * size_t(halves == 1 ? kQuantSlotBytes : kQuantHalfSlotBytes);
}
// The tensor-core path's sum unit: a group, or the ring's chunk when groups are wider.
inline int64_t quantRingSumUnit(int64_t groupSize, int bits, int halves) {
  const int64_t unit = quantSumUnit(groupSize, bits), chunk = quantChunkCols(bits) / halves;
  return unit < chunk ? unit : chunk;
}
// Whether the tensor-core path subtracts the zero point on the tensor cores (QuantGroupFormats.cuh kZeroMma), so that
// x is staged without per-unit sums: 4-bit codes, fp16, the odd columns under exponent 64, 128-column units (int4
// g128), unless PARETO_QUANT_ZERO_MMA=0; 8-bit codes on the tensor cores whose unit is the ring's chunk (int8 per
// channel), unless PARETO_QUANT_ZERO_MMA_8=0 (read once).
bool quantZeroOnTensorCores(const QuantGroupGemvWeight& w, ActivationType type, int compiledBatch);
// Whether that zero point's terms every row shares (the bias, Σ x) are taken once a batch tile rather than a row
// tile (QuantGroupFormats.cuh kZeroRow): on unless PARETO_QUANT_ZERO_ROW=0 (bench/NOTES.md "tenth session": int4 −3% at
// batch 1, −1% at 8, −4 to −7% at 16; read once).
bool quantZeroRowEnabled();
// The shapes it can take, whatever the switch says.
bool quantZeroMmaApplies(const QuantGroupGemvWeight& w, ActivationType type, int compiledBatch);
// The fp16 bits of its A operands for a zero z: −(1024 + z) for the even columns (read as 1024 + q) and −(64 + z)
// for the odd ones (read in place under exponent 64 as 64 + q): 1024 + z steps by 1 from 0x6400, 64 + z by 1/16 from
// 0x5400, so both are exact for z ≤ 63 (4-bit zeros are ≤ 15).
PARETO_HOST_DEVICE constexpr uint32_t quantZeroEvenBits(uint32_t z) { return 0xE400u + z; }
PARETO_HOST_DEVICE constexpr uint32_t quantZeroOddBits(uint32_t z) { return 0xD400u + 16u * z; }

// x is staged as 16-bit rows padded by this many values, so that the rows a warp's B-fragment loads touch at
// once start in different banks (4 bits: 2 rows × 64 bytes a quarter-warp; 8 bits: 4 rows × 32 bytes a half).
constexpr int quantStagePadHalves(int bits) { return bits == 4 ? 32 : 16; }

std::string checkQuantGroupGemv(const GemvProblem& p, const QuantGroupGemvWeight& w);
GemvSplit quantGroupGemvSplit(const GemvProblem& p, const QuantGroupGemvWeight& w, int multiprocessors);
std::string runQuantGroupGemv(const GemvProblem& p, const QuantGroupGemvWeight& w, const GemvSplit& s,
                              float* partials, int* counters, CUstream_st* stream);

}  // namespace pareto::kernels
