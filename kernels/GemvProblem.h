// What every packed-weight GEMV kernel computes, and the host-side pieces they share. Plain C++ (no CUDA types,
// no LibTorch) so that the CPU references and the LibTorch wrappers in core include it too.
//
//   y[b, r] = Σ_c x[b, c] · Ŵ[r, c]      b < batch ≤ 16, r < rows, c < cols
//
// x and y are row-major fp16 or bf16 ([batch, cols] and [batch, rows]), Ŵ is the packed weight's dequantized
// value, and the sum is accumulated in fp32 (the references in float64).
//
// All kernels share one work decomposition, chosen for batch-1 decode, where the whole cost is streaming the
// weight once: one warp lane owns one output row, a warp owns 32 consecutive rows ("row group") and walks a run
// of column chunks of them, and the warps of a block (and, when there are few row groups, several blocks: the
// "splits") share the columns of one row group. Because the 32 lanes of a warp always work on the same columns,
// every activation read of a warp falls in one 128-byte span of shared memory (a single wavefront, no bank
// conflicts) however irregular the weight is, which is what lets the bitmask kernel gather x at the kept
// columns for free. The price is that the packed weight must be re-laid out once at load time so that the 32
// lanes' bytes of a chunk are adjacent ("lane-interleaved": 16 bytes of lane 0, 16 of lane 1, ...), turning each
// load instruction of the warp into one 512-byte contiguous transaction. The re-layout keeps every byte count
// of the stored format (see each kernel's header); rows are padded to a multiple of 32 and columns to a whole
// chunk with entries that contribute exactly 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

// The few helpers the kernels and the host share (compiled for both by nvcc; plain inline C++ elsewhere).
#if defined(__CUDACC__)
#define PARETO_HOST_DEVICE __host__ __device__
#else
#define PARETO_HOST_DEVICE
#endif

namespace pareto::kernels {

enum class ActivationType { Float16, BFloat16 };

inline constexpr int kRowsPerGroup = 32;   // one warp, one lane per row
inline constexpr int kWarpsPerBlock = 4;   // warps of a block split the columns of one row group
// Blocks of 128 threads a multiprocessor holds at once for a compiled batch: the kernels are compiled for at
// most 65536 / (blocks · 128) registers a thread (__launch_bounds__ in GemvDriver.cuh: 128 at batch 1, 168 at
// 2-4, 255 at 8-16; each warp keeps two chunks of weights in registers), so that many always fit, and the split
// policy sizes its grids to one wave of them. At batch 1 that is 16 warps a multiprocessor.
constexpr int residentBlocks(int compiledBatch) { return compiledBatch <= 1 ? 4 : compiledBatch <= 4 ? 3 : 2; }
// Kernels that stream their weight through a shared-memory ring (GemvDriver.cuh: ringGemvKernel) run blocks of
// kRingWarpsPerBlock warps, one row group each over the same columns (x staged once for 256 rows), sized for
// 2 blocks a multiprocessor: 16 warps, the ring (8 warps × stages × slot) taking most of a block's share of the
// 228 KB. (v6b ran 4 warps of 4 stages: 8 warps a multiprocessor, and Nsight Compute showed each warp's
// instruction chain, not memory, setting the time: bench/NOTES.md v6c.)
inline constexpr int kRingWarpsPerBlock = 8;
inline constexpr int kRingResidentBlocks = 2;
// The largest batch whose ring split deals row groups out evenly (chooseRingSplit, ringBalancedBlocks): 2:4 and
// SpQR's gate+up 7-9% faster at batch 2-8, qkv at batch 16 2-11% slower (bench/NOTES.md "v6w, v6x and v6y
// measured"). The int4 rings pass kRingBalanceMaxBatchInt4: their warps' chains set the time, so a block holding
// fewer row groups ends no sooner, and from batch 4 the extra stagings of x cost 1-5%.
inline constexpr int kRingBalanceMaxBatch = 8;
inline constexpr int kRingBalanceMaxBatchInt4 = 2;
// Splits whose partial sums the last block of a row group loads together when it combines them (GemvDriver.cuh
// sumSplitPartials; B floats a split and lane): the combine takes ceil(splits / this) L2 round trips. Narrow (the
// kernels through v6y): 8-32 floats in flight. Wide (splitCombineWideEnabled): 16-32, the same at batch 16, for the
// shapes that split 4-16 ways at batch 2-8; 64 made ptxas spill in the ring kernels at batch 8 and 16
// (bench/NOTES.md "v6z").
PARETO_HOST_DEVICE constexpr int splitCombineUnroll(int compiledBatch, bool wide) {
  return wide ? (compiledBatch >= 16 ? 2 : compiledBatch >= 8 ? 4 : compiledBatch >= 4 ? 8 : 16)
              : (compiledBatch >= 8 ? 2 : compiledBatch >= 4 ? 4 : 8);
}
// Dynamic shared memory a ring kernel's block may use: half of the multiprocessor's 228 KB, less the 1 KB the
// runtime reserves a block and 8 KB of headroom for static shared memory.
inline constexpr size_t kRingMaxSharedBytes = 228 * 1024 / 2 - 1024 - 8 * 1024;
inline constexpr int kMaxBatch = 16;
// Shared memory a block may use for staged activations (Hopper allows 227 KB a block; staying well below
// leaves room for two blocks a multiprocessor).
inline constexpr size_t kMaxStagedBytes = 96 * 1024;

// Kernels are compiled for batch 1, 2, 4, 8 and 16; a batch runs in the smallest that holds it (the extra rows
// of x are staged as zeros).
inline int compiledBatch(int batch) { return batch <= 1 ? 1 : batch <= 2 ? 2 : batch <= 4 ? 4 : batch <= 8 ? 8 : 16; }

// What x is made of, computed while it is staged (the decode step's small ops folded into the GEMV that consumes
// their output, DecodeArithmetic.cuh: the same arithmetic, so the same bits as the op's own kernel).
enum class GemvInput {
  Plain,    // x [batch, cols] as it is
  RmsNorm,  // x = normWeight ⊙ rmsnorm(input): input [batch, cols] (the residual stream), normWeight [cols]
  SiluMul,  // x = silu(gate) ⊙ up: input [batch, 2·cols] = [gate | up]
};
inline constexpr int64_t kGemvMaxNormCols = 16384;  // RmsNorm: the spans' totals a block keeps in shared memory

// Where the kernels of a PARETO_GEMV_TIMELINE build stamp their blocks (GemvTimeline.cuh; bench/gemv_kernels
// timeline): one record a block, taken in the order the blocks end.
struct GemvTimelineRecord {
  uint64_t y;           // the launch's output pointer: which GEMV of the step
  uint32_t block, sm;   // blockIdx.x + gridDim.x · blockIdx.y, %smid
  uint64_t start, released, staged, end;  // %globaltimer, ns
  uint64_t clocks[4];   // clock64 of the multiprocessor at the same four points (a finer timer, per SM)
};
static_assert(sizeof(GemvTimelineRecord) == 80, "records are read back as an array");
struct GemvTimelineBuffer {
  GemvTimelineRecord* records = nullptr;  // none: nothing recorded
  unsigned* count = nullptr;
  unsigned capacity = 0;
};

struct GemvProblem {
  int64_t rows = 0;
  int64_t cols = 0;
  int batch = 1;
  ActivationType type = ActivationType::Float16;
  const void* x = nullptr;  // the input: [batch, cols], or [batch, 2·cols] for SiluMul
  void* y = nullptr;        // [batch, rows]
  GemvInput input = GemvInput::Plain;
  const void* normWeight = nullptr;  // RmsNorm: [cols]
  float eps = 0.f;                   // RmsNorm
  // y += x · Ŵᵀ instead of y = x · Ŵᵀ: the product rounded to the dtype, then the sum (the residual add that
  // follows the o and down projections, as decode_add_rmsnorm adds them).
  bool accumulate = false;
#ifdef PARETO_GEMV_TIMELINE
  GemvTimelineBuffer timeline;  // only in the timeline build of bench/gemv_kernels
#endif
};
// Whether the split combine loads its partial sums with the wide unroll (splitCombineUnroll):
// on unless PARETO_SPLIT_COMBINE_WIDE=0 (bench/NOTES.md "v6z": −1% at batch 8 on the H200; read once).
bool splitCombineWideEnabled();
// Whether the kernels may take an RmsNorm input's statistic from their staging of x where the slice is the whole
// row (GemvDriver.cuh normInStagingRound): on unless PARETO_NORM_ONE_ROUND=0 (the A/B).
bool normInStagingEnabled();
// Whether a problem folds work into the GEMV (an input other than Plain, or accumulate).
inline bool foldsWork(const GemvProblem& p) { return p.input != GemvInput::Plain || p.accumulate; }

// How a launch splits the columns of each row group across blocks. Blocks of one row group write fp32 partial
// sums to `partials` and the last one to finish adds them up (a counter per row group, left at 0 afterwards so
// that the same counters serve the next launch, CUDA-graph replays included).
struct GemvSplit {
  int splits = 1;           // blocks per row group
  int64_t chunksPerSplit = 0;
  int64_t sliceCols = 0;    // columns of x a block stages in shared memory (chunksPerSplit · chunk columns)
  size_t sharedBytes = 0;   // dynamic shared memory of a block
  // Ring kernels: the warps of a block that share one row group's split (1, 2, 4 or 8), each taking a contiguous
  // part of its chunks, their sums added in shared memory; the block holds kRingWarpsPerBlock / ringGroupWarps
  // row groups. 1: a warp a row group, every warp all chunks of the split.
  int ringGroupWarps = 1;
  // Ring kernels, > 0: the row groups dealt out evenly over this many blocks a split (ringBalancedBlocks), each
  // holding floor or ceil of groups / ringBlocks of them; 0: blocks of kRingWarpsPerBlock / ringGroupWarps each.
  int64_t ringBlocks = 0;
};

inline int64_t rowGroups(int64_t rows) { return (rows + kRowsPerGroup - 1) / kRowsPerGroup; }
inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Chooses the splits for `chunks` column chunks of `chunkCols` columns: as many blocks as fill every
// multiprocessor once (residentBlocks(batch) each; at batch 1, 16 warps with up to two chunks of weight loads in
// flight each) without spilling into a second wave, every warp of a full split at least one chunk, no split at
// all when the row groups alone fill the machine, and the staged activations within `maxSharedBytes`.
// `batch` is the compiled batch. `sumUnitCols` > 0 adds one float per unit and batch row for per-unit sums.
// x is staged as one fp32 per column and batch row unless `stagedBytesPerColumn` (> 0, for all batch rows
// together) and `stagedFixedBytes` say otherwise (the tensor-core int4 kernel stages fragment-ordered planes).
// `blocksPerMultiprocessor` > 0 replaces residentBlocks(batch) (the ring kernels: kRingResidentBlocks).
// `chunksPerSplit` > 0: splits of that many chunks instead (the format's measured preference), where they fit.
GemvSplit chooseGemvSplit(int64_t rows, int64_t chunks, int64_t chunkCols, int batch, int sumUnitCols,
                          int multiprocessors, size_t maxSharedBytes, size_t stagedBytesPerColumn = 0,
                          size_t stagedFixedBytes = 0, int blocksPerMultiprocessor = 0, int64_t chunksPerSplit = 0);

// The split of the ring kernels (GemvDriver.cuh: ringGemvKernel), whose blocks take kRingWarpsPerBlock row groups
// each and whose warps walk every chunk of their split. Each warp's chunks are a serial chain (Nsight Compute,
// NOTES v6c: the kernels are bound by the warps' instruction latency, not by DRAM), so the split minimises
// waves × (chunks a warp + 2), the 2 standing for a block's fixed cost (staging x, combining the splits), over
// the splits whose staged x (`stagedBytesPerColumn` for all batch rows, `sumUnitCols` sums, plus
// `stagedFixedBytes`: padding and the rings) fits in `maxSharedBytes`; a wave is kRingResidentBlocks blocks a
// multiprocessor (one a multiprocessor, leaving room for the next kernel's blocks, measured slower twice:
// bench/NOTES.md "one ring block a multiprocessor"); ties go to fewer splits; a warp gets at least `minChunksPerWarp`
// chunks where there are that many (its fixed cost is about 2 chunks' worth; the 2:4 ring, whose chunks are
// shorter, measured 2-3% faster at batch 8-16 with 4, int4 7% slower at batch 1: bench/NOTES.md v6d).
// `maxGroupWarps` > 1 (default ringMaxGroupWarps()) also weighs blocks whose warps share a row group
// (GemvSplit::ringGroupWarps up to it): a warp then walks a part of the split, the block stages the whole split's
// x. The cost also counts, in chunks of a warp's chain, the global combine of a split GEMV (2, and 1/8 a split for
// its partial sums), each staging round of x past the first (1/2: 1024 vectors of 8 columns a round) and a chunk
// less for warps sharing a row group; weights fitted to `gemv_kernels sweep`, which timed every split of the
// Llama-3.1-8B shapes (bench/NOTES.md "the split sweep"). Up to `balanceMaxBatch`, the row groups are dealt out
// evenly where ringBalancedBlocks says so.
GemvSplit chooseRingSplit(int64_t rows, int64_t chunks, int64_t chunkCols, int batch, int sumUnitCols,
                          int multiprocessors, size_t maxSharedBytes, size_t stagedBytesPerColumn,
                          size_t stagedFixedBytes, int64_t minChunksPerWarp = 2, int maxGroupWarps = 0,
                          int balanceMaxBatch = kRingBalanceMaxBatch);

// What one warp of a ring block does (GemvDriver.cuh ringGemvKernel, with GemvSplit::ringGroupWarps =
// 2^groupShift): the row group `group` (≥ the row groups of the problem: an idle warp of the last block) and, of
// its split's `splitChunks` chunks, `count` from `first` on: the part floor(splitChunks · part / warps) ..
// floor(splitChunks · (part + 1) / warps) of consecutive warps `part` = 0, 1, ... of the row group. A split's
// chunks fit the staging in shared memory, so 32 bits.
struct RingWarpWork {
  int64_t group;
  int part, first, count;
};
// `blocks` > 0 (GemvSplit::ringBlocks): block b holds the row groups from b·floor(G / blocks) + min(b, G mod blocks)
// on, one more than floor(G / blocks) for the first G mod blocks blocks; a warp past them gets group G (idle).
PARETO_HOST_DEVICE inline RingWarpWork ringWarpWork(int64_t block, int warp, int groupShift, int splitChunks,
                                                    int64_t groups = 0, int64_t blocks = 0) {
  RingWarpWork w;
  w.part = warp & ((1 << groupShift) - 1);
  if (blocks > 0) {
    const int64_t per = groups / blocks, extra = groups % blocks, local = warp >> groupShift;
    const int64_t held = per + (block < extra ? 1 : 0);
    w.group = local < held ? block * per + (block < extra ? block : extra) + local : groups;
  } else {
    w.group = block * (kRingWarpsPerBlock >> groupShift) + (warp >> groupShift);
  }
  w.first = (splitChunks * w.part) >> groupShift;
  w.count = ((splitChunks * (w.part + 1)) >> groupShift) - w.first;
  return w;
}

// The blocks a split for row groups dealt out evenly (GemvSplit::ringBlocks), or 0 to keep the uniform blocks of
// kRingWarpsPerBlock / groupWarps row groups: where those fill more than one block place but less than 90% of two
// on every multiprocessor (`wave` = kRingResidentBlocks · multiprocessors blocks), as many blocks as the wave holds,
// so that no multiprocessor need hold two full blocks while another holds one (Llama-3.1-8B's gate+up: 224 blocks of
// 4 row groups on 132 multiprocessors, 92 with two). Every block then holds at most as many row groups as a uniform
// one.
int64_t ringBalancedBlocks(int64_t groups, int groupWarps, int splits, int64_t wave);
// Whether chooseRingSplit deals the row groups out evenly (up to its balanceMaxBatch): on unless
// PARETO_RING_BALANCED=0 (bench/NOTES.md "v6w, v6x and v6y measured"; read once).
bool ringBalancedEnabled();

// Whether a ring GEMV whose grid has no more blocks than the device has multiprocessors reserves over half of a
// multiprocessor's shared memory (GemvDriver.cuh spreadSharedBytes), so that the hardware cannot place two of its
// blocks on one multiprocessor while others hold none: PARETO_RING_SPREAD=1 (off by default; read once).
bool ringSpreadEnabled();

// The most warps of a ring block the ring split lets share one row group: kRingWarpsPerBlock, or 1 (every warp its
// own row group, as the ring kernels ran through v6m) with PARETO_RING_GROUP_WARPS=0 in the environment. Sharing
// replaces the global combine of many small splits (int4 g128 at batch 1: qkv and o 8 splits of 2 chunks a warp,
// down 14 of 4) by a sum in shared memory (bench/NOTES.md "warps of a ring block sharing a row group": int4 batch 1
// 2.09x -> 2.27x of cuBLAS on the H200).
int ringMaxGroupWarps();

// A split imposed on chooseGemvSplit and chooseRingSplit in place of their cost model, for `gemv_kernels sweep`,
// which times every split a shape can take against the policy's choice. Process-wide, none by default (the library
// never sets one). Taken only where the policy could take it too: the staged x and the rings fit the shared memory,
// every warp gets at least one chunk (a ring warp of a shared row group: its part), and warps share row groups only
// where the format lets them (maxGroupWarps); otherwise the policy chooses as if nothing were forced.
struct GemvSplitForce {
  int64_t chunksPerSplit = 0;
  int groupWarps = 1;     // ring kernels
  bool balanced = false;  // ring kernels: the row groups dealt out where ringBalancedBlocks deals them (any batch)
};
void forceGemvSplit(const GemvSplitForce* force);  // nullptr: the policy's own choice again
// Whether `s` is the forced split (a sweep's check that the force was taken).
bool isForcedSplit(const GemvSplit& s, const GemvSplitForce& force);

// Workspace a launch needs: `partials` floats [splits, batch, rows padded to 32] (only when splits > 1) and one
// int counter per row group that must be zero before the first launch (the kernels leave it zero).
size_t gemvPartialFloats(const GemvProblem& p, const GemvSplit& s);

// "" when the common part of a problem is launchable, else what is wrong (shapes, batch, pointers).
std::string checkGemvProblem(const GemvProblem& p);

}  // namespace pareto::kernels
