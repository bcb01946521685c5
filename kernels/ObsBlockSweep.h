// obs_block_sweep: one lazy block of the OBS sweep that SparseGPT and GPTQ share (core/compress/ObsSweep.h) in one
// launch, for the column rules that are plain data: a given keep mask, an N:M mask chosen as the sweep reaches each
// group, or a quantization grid (fixed, or chosen at each group's first column).
//
// Why a kernel: column by column in ATen a block costs ~10 launches a column, so a 14336-column module is ~150 k
// launches and the solver's pace is the launch rate, not the GPU. Within a lazy block the rows are independent
// (a row's error only moves along its own row), so one thread sweeps one row through all of the block's columns.
//
// Layout: every matrix is float32, row-major with the given row stride (in elements). The block, the errors and
// the losses are updated in place; the pointers of the whole-matrix tensors (keep, pruned, codes) point at the
// block's first column.
#pragma once

#include <cstdint>
#include <string>

struct CUstream_st;

namespace pareto::kernels {

inline constexpr int kObsBlockMaxWidth = 128;  // the block and U's block live in shared memory
inline constexpr int kObsMaxGroupM = 32;       // an N:M group's keep bits fit a 32-bit word

enum class ObsRule : int {
  GivenMask = 0,  // fixed = keep ? value : 0 (SparseGPT unstructured: the mask was chosen for the block)
  NMMask = 1,     // at each group of M columns, the N largest of value² / U_jj² are kept (SparseGPT N:M)
  Quantize = 2,   // fixed = dequantize(quantize(value)); pruned weights take the zero point (GPTQ)
};

struct ObsBlockSweepProblem {
  int64_t rows = 0;
  int width = 0;            // the block's columns, 1..kObsBlockMaxWidth
  int64_t start = 0;        // the block's first column in W (for the group of a column)
  ObsRule rule = ObsRule::GivenMask;

  float* block = nullptr;        // [rows, width], stride width: the current values in, the fixed values out
  const float* hinv = nullptr;   // U's diagonal block [width, width] at (start, start), row stride hinvStride
  int64_t hinvStride = 0;
  float* errors = nullptr;       // [width, rows] (transposed): error / U_jj of each column, written
  float* losses = nullptr;       // [rows]: += Σ (error / U_jj)² over the block

  // GivenMask reads, NMMask writes: bool (one byte) [rows, width] at the block, row stride keepStride.
  uint8_t* keep = nullptr;
  int64_t keepStride = 0;
  int n = 0, m = 0;              // NMMask

  // Quantize: grids [rows or 1, groups], row stride gridStride (0: one grid for every row); a group is
  // groupSize consecutive columns of W. dynamicGroups: each group's grid is chosen from the current values of
  // its columns (pruned ones as 0) when the sweep reaches its first column, which must lie in this block with
  // the whole group (start % groupSize == 0 and width % groupSize == 0, checked).
  float* scales = nullptr;
  float* zeros = nullptr;
  int64_t gridStride = 0;
  int64_t groupSize = 0;
  bool dynamicGroups = false;
  bool symmetric = true;
  float qmin = 0, qmax = 0;
  float* codes = nullptr;        // [rows, width] at the block, row stride codesStride: the codes, written
  int64_t codesStride = 0;
  const uint8_t* pruned = nullptr;  // optional bool [rows, width] at the block, row stride prunedStride
  int64_t prunedStride = 0;
  int* overflow = nullptr;       // set to 1 where a dynamic grid's scale exceeds the fp16 range
};

// The shapes and rules the kernel takes: "" or why not.
inline std::string checkObsBlockSweep(const ObsBlockSweepProblem& p) {
  if (p.rows < 1) return "no rows";
  if (p.width < 1 || p.width > kObsBlockMaxWidth)
    return "block width " + std::to_string(p.width) + " is outside 1.." + std::to_string(kObsBlockMaxWidth);
  if (p.rule == ObsRule::NMMask &&
      (p.m < 1 || p.m > kObsMaxGroupM || p.n < 0 || p.n > p.m || p.width % p.m != 0 || p.start % p.m != 0))
    return "N:M groups must be whole inside the block and M at most " + std::to_string(kObsMaxGroupM);
  if (p.rule == ObsRule::Quantize) {
    if (p.groupSize < 1) return "group size must be positive";
    if (p.dynamicGroups && (p.groupSize > p.width || p.width % p.groupSize != 0 || p.start % p.groupSize != 0))
      return "a dynamic group must lie whole inside the block";
    if (p.scales == nullptr || p.zeros == nullptr || p.codes == nullptr) return "missing grids or codes";
    if (p.dynamicGroups && p.overflow == nullptr) return "missing the overflow flag";
  }
  if ((p.rule == ObsRule::GivenMask || p.rule == ObsRule::NMMask) && p.keep == nullptr) return "missing keep mask";
  if (p.block == nullptr || p.hinv == nullptr || p.errors == nullptr || p.losses == nullptr)
    return "missing block, U, errors or losses";
  return {};
}

// "" on success, else the check's message or the CUDA error.
std::string runObsBlockSweep(const ObsBlockSweepProblem& p, CUstream_st* stream);

}  // namespace pareto::kernels
