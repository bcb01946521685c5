// The launch skeleton shared by the packed-weight GEMV kernels (see GemvProblem.h for the decomposition):
// issue the weight loads of each warp's first two chunks, stage the block's slice of x in shared memory as fp32
// while they are in flight, let each warp walk its chunks through the format's `load` / `compute` with a
// register double buffer (the next chunk's weights in flight while the current one is computed), reduce the
// warps of the block, and combine the splits of a row group. The decode step's small ops ride along
// (GemvProblem's input and accumulate): an RMSNorm or SiLU·mul computed while x is staged, a residual add while y
// is stored.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "Activation.cuh"
#include "DecodeArithmetic.cuh"
#include "GemvProblem.h"
#include "GemvTimeline.cuh"
#include "ProgrammaticLaunch.cuh"

namespace pareto::kernels::detail {

// The block's total of `v`, in every thread (`warpTotals`: one float of shared memory a warp). Contains a
// __syncthreads, so every thread of the block must call it.
__device__ __forceinline__ float blockSum(float v, float* warpTotals) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
  if (threadIdx.x % 32 == 0) warpTotals[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.f;
  const int warps = (blockDim.x + 31) / 32;
  for (int w = 0; w < warps; ++w) total += warpTotals[w];
  return total;
}

// Host: whether a pointer allows the kernels' 16-byte loads and stores.
inline bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// The weight is read exactly once per launch: stream it past L1 and mark it evict-first in L2 (ld.global.cs) so
// that it does not push the activations, scales and the other weights of the same graph out of the caches.
__device__ __forceinline__ uint4 loadStreaming(const uint4* p) { return __ldcs(p); }
__device__ __forceinline__ uint2 loadStreaming(const uint2* p) { return __ldcs(p); }

// Shared-memory ring (formats with kRingStages, see the concept below): cp.async copies global memory to shared
// memory without passing through registers, so a warp can have several chunks of weight in flight while it
// holds none of them in registers. The weight copies carry an L2 evict-first policy (the weight is read once
// a launch; the activations, scales and the next kernels' data should stay), the small per-group data the
// default policy.
__device__ __forceinline__ uint64_t evictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ void copyAsyncEvictFirst(uint32_t sharedAddress, const void* global, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(sharedAddress), "l"(global),
               "l"(policy)
               : "memory");
}
__device__ __forceinline__ void copyAsync(uint32_t sharedAddress, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sharedAddress), "l"(global) : "memory");
}
__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most `Pending` of this thread's committed copy groups are still in flight.
template <int Pending>
__device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}
__device__ __forceinline__ uint32_t sharedAddressOf(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

struct GemvLaunch {
  int64_t rows = 0, cols = 0;
  int batch = 1;
  int splits = 1;
  int ringGroupWarps = 1;   // GemvSplit::ringGroupWarps
  int64_t ringBlocks = 0;   // GemvSplit::ringBlocks
  int64_t totalChunks = 0, chunksPerSplit = 0, sliceCols = 0;
  int sumUnit = 0;          // columns per activation sum (0: none)
  const void* x = nullptr;
  void* y = nullptr;
  float* partials = nullptr;
  int* counters = nullptr;
  GemvInput input = GemvInput::Plain;  // GemvProblem's fused work
  const void* normWeight = nullptr;
  float eps = 0.f;
  bool accumulate = false;
  bool normInStaging = true;  // RmsNorm: the one-round form allowed (normInStagingRound; normInStagingEnabled)
  bool wideCombine = false;   // the split combine's wide unroll (splitCombineUnroll; splitCombineWideEnabled)
#ifdef PARETO_GEMV_TIMELINE
  GemvTimelineBuffer timeline;
#endif
};

// RmsNorm inputs: each block computes every batch row's 1/rms itself from the whole input row (8 KB a row at
// 4096 columns, read from L2 while its first weight chunks are in flight), so no block waits for another and
// the norm needs no launch of its own. The spans' totals (DecodeArithmetic.cuh) go to shared memory.
inline constexpr int kGemvMaxNormSpans = int(kGemvMaxNormCols / kNormSpanValues);
template <int B> struct NormShared {
  float spans[B][kGemvMaxNormSpans];
  float inverse[B];
};
// Every thread of the block calls it (it contains __syncthreads); a no-op unless the input is RmsNorm.
template <int B, ActivationType T>
__device__ __forceinline__ void computeNormInverses(const GemvLaunch& a, NormShared<B>& norm, int lane) {
  if (a.input != GemvInput::RmsNorm) return;
  const int spans = int((a.cols + kNormSpanValues - 1) / kNormSpanValues);
  const int64_t rowVectors = a.cols / 8;
  const int warps = int(blockDim.x / 32), warp = int(threadIdx.x / 32);
  const int pairs = a.batch * spans;  // (batch row, span), a warp each, kUnroll of them in flight together
  const uint4* x = static_cast<const uint4*>(a.x);
  constexpr int kUnroll = 4;  // as the fused staging: 16 registers in flight
  for (int p0 = warp; p0 < pairs; p0 += warps * kUnroll) {  // warp-uniform: the spans' shuffles need all lanes
    uint4 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int p = p0 + u * warps, b = p / spans;
      const int64_t v = int64_t(p % spans) * 32 + lane;
      raw[u] = p < pairs && v < rowVectors ? __ldg(x + b * rowVectors + v) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int p = p0 + u * warps;
      float f[8];
      unpack8<T>(raw[u], f);
      const float total = spanTotal(vectorSquares(f));
      if (p < pairs && lane == 0) norm.spans[p / spans][p % spans] = total;
    }
  }
  __syncthreads();
  if (int(threadIdx.x) < a.batch)
    norm.inverse[threadIdx.x] = rmsInverse(norm.spans[threadIdx.x], spans, a.cols, a.eps);
  __syncthreads();
}

// Whether a block takes its RmsNorm's statistic from the staging's own loads instead of computeNormInverses'
// separate pass over the row: where its slice is the whole row (col0 0) and one round of the fused staging (2
// vectors a thread) loads it, every vector of x the norm needs is already in the block's registers, and the span
// totals come out the same (a warp's 32 consecutive vectors are one span of one row when the slice is a multiple
// of 256 columns), so the L2 round trip of the separate pass and one of its block barriers go. Block-uniform.
template <int B>
__device__ __forceinline__ bool normInStagingRound(const GemvLaunch& a, int64_t col0) {
  return a.normInStaging && a.input == GemvInput::RmsNorm && col0 == 0 && a.sliceCols >= a.cols &&
         a.sliceCols % kNormSpanValues == 0 && int64_t(B) * a.sliceCols / 8 <= int64_t(blockDim.x) * 2;
}

// How a block reads x (GemvLaunch's input): `first`/`second`/`combine` the 8 values at columns c .. c + 7 of
// batch row b (c < cols) for the staging, `at` one value (SpQR's outliers, read outside the staging). Both give x
// as the op it replaces rounds it. The fields are copies (no reference to the kernel's parameters, which would
// put them in local memory).
template <ActivationType T>
struct InputReader {
  using A = Act<T>;
  using V = typename A::type;
  const V* x;
  const V* normWeight;  // RmsNorm
  int64_t cols;
  int batch;
  GemvInput input;
  const float* inverse;  // RmsNorm: 1/rms of each batch row (computeNormInverses), in shared memory

  __device__ __forceinline__ InputReader(const GemvLaunch& a, const float* inv)
      : x(static_cast<const V*>(a.x)), normWeight(static_cast<const V*>(a.normWeight)), cols(a.cols),
        batch(a.batch), input(a.input), inverse(inv) {}

  // The input's 16-byte vector and, for the fused inputs, its partner (the norm weight, the up half): loaded
  // together, combined later, so that the staging keeps all its loads in flight at once.
  __device__ __forceinline__ uint4 first(int b, int64_t c) const {
    const int64_t stride = input == GemvInput::SiluMul ? 2 * cols : cols;
    return __ldg(reinterpret_cast<const uint4*>(x + b * stride + c));
  }
  __device__ __forceinline__ uint4 second(int b, int64_t c) const {
    if (input == GemvInput::RmsNorm) return __ldg(reinterpret_cast<const uint4*>(normWeight + c));
    return __ldg(reinterpret_cast<const uint4*>(x + b * 2 * cols + cols + c));
  }
  __device__ __forceinline__ uint4 combine(int b, const uint4& v, const uint4& partner) const {
    if (input == GemvInput::RmsNorm) return normed8<T>(v, inverse[b], partner);
    return siluMul8<T>(v, partner);
  }
  __device__ __forceinline__ float at(int b, int64_t c) const {
    switch (input) {
      case GemvInput::RmsNorm:
        return normedValue<T>(A::toFloat(x[b * cols + c]), inverse[b], A::toFloat(normWeight[c]));
      case GemvInput::SiluMul:
        return siluMulValue<T>(A::toFloat(x[b * 2 * cols + c]), A::toFloat(x[b * 2 * cols + cols + c]));
      default:
        return A::toFloat(x[b * cols + c]);
    }
  }
};

// Format concept (a struct with):
//   static constexpr int kChunkCols;
//   struct Params;                       (device pointers and sizes of the re-laid-out weight)
//   struct Fragment;                     the streaming weight words of one chunk for one lane, in registers (a
//                                        plain struct of uint4/uint2 arrays: int4 `uint4 piece[8]`, ...)
//   __device__ static Fragment load(const Params&, int64_t group, int64_t chunk, int lane);
//     only the chunk's streaming weight loads (loadStreaming), nothing that uses their values, so that the
//     loads stay in flight while the caller does other work until `compute` consumes the fragment.
//   template <int B> __device__ static void compute(const Params&, const Fragment&, int64_t group,
//        int64_t chunk, int lane, const float* xs, int64_t xStride, const float* xsum, int64_t sumStride,
//        float (&acc)[B]);
//     everything else of the chunk: the small, cached per-group loads (scales, zeros, statistics),
//     dequantization and the FMAs. xs points at the chunk's first column of batch row 0 (row b at
//     xs + b·xStride), xsum likewise for the per-unit activation sums.
//   struct RowState;  __device__ static RowState rowBegin(const Params&, int64_t row);
//     loads for the work outside the chunks that do not depend on x (SpQR: the row's outlier range), issued
//     before the staging like the first chunks; an empty struct for most formats.
//   template <int B, ActivationType T> __device__ static void rowExtra(const Params&, const RowState&,
//        int64_t row, int part, int parts, const InputReader<T>& x, float (&acc)[B]);
//     work outside the chunks (SpQR's outliers), shared out over `parts` warps, reading x with x.at(b, column);
//     x has x.batch rows (rows past it must not be read); a no-op for most formats.
// Optional parts of the concept (the defaults are what the FFMA formats use):
//   template <int B> static constexpr int64_t stagedWords(int64_t sliceCols);  and
//   template <int B> __device__ static void stage(uint32_t* xs, int64_t b, int64_t col, int64_t sliceCols,
//                                                 const uint4& v);
//     x is staged in shared memory in the format's own layout (stagedWords 32-bit words) instead of fp32 rows:
//     `stage` stores the 8 values v of batch row b < B at columns col..col+7 of the slice (the driver calls it
//     once for every 8 columns of every compiled batch row, with zeros past `batch` and past the last column).
//     `compute` then gets `const uint32_t* xs` = the staging + chunk · kChunkCols words, and xStride = sliceCols.
//   template <int B> struct Accumulator;  and
//   template <int B> __device__ static void finish(const Accumulator<B>&, int lane, float (&total)[B]);
//     a warp-wide accumulator in the format's own layout (a tensor-core C fragment) instead of one float per
//     batch row of the lane's row; `finish` (all 32 lanes, after the last chunk) turns it into the lane's row.
//     rowExtra is applied to `total`, after finish.
//   static constexpr int kRingStages, kSlotBytes;  and
//   __device__ static void copyChunk(const Params&, int64_t group, int64_t chunk, int lane, uint32_t slot,
//                                    uint64_t evictFirst);
//   template <int B> __device__ static void computeSlot(const Params&, const uint8_t* slot, int64_t group,
//        int64_t chunk, int64_t localChunk, int lane, const uint32_t* xs, int64_t sliceCols, const float* xsum,
//        int64_t sumStride, Accumulator<B>&);
//     the shared-memory ring instead of `load` / `compute`, run by ringGemvKernel: each warp owns kRingStages
//     slots of kSlotBytes (after the staging), `copyChunk` issues the chunk's cp.async copies into a slot (the
//     warp's 32 lanes together; a lane may read what another lane copied, so the kernel waits and
//     __syncwarp()s before computeSlot), and the first kRingStages chunks of every warp are in flight before x
//     is staged. Needs the custom staging and accumulator parts above; `Fragment`, `load` and `rowExtra` are
//     unused (RingRowExtraOf has the ring's own, optional).
template <class F, int B, class = void> struct StagingOf {
  using type = float;
  static constexpr bool kCustom = false;
  __host__ __device__ static constexpr int64_t words(int64_t sliceCols) { return B * sliceCols; }
};
template <class F, int B>
struct StagingOf<F, B, std::void_t<decltype(F::template stagedWords<B>(int64_t(0)))>> {
  using type = uint32_t;
  static constexpr bool kCustom = true;
  __host__ __device__ static constexpr int64_t words(int64_t sliceCols) { return F::template stagedWords<B>(sliceCols); }
};

template <class F, int B, class = void> struct AccumulatorOf {
  using type = float[B];
  static constexpr bool kCustom = false;
};
template <class F, int B>
struct AccumulatorOf<F, B, std::void_t<typename F::template Accumulator<B>>> {
  using type = typename F::template Accumulator<B>;
  static constexpr bool kCustom = true;
};

template <class F, class = void> struct RingOf {
  static constexpr bool kRing = false;
  static constexpr int kStages = 0;
  static constexpr int kSlotBytes = 0;
};
template <class F>
struct RingOf<F, std::void_t<decltype(F::kRingStages)>> {
  static constexpr bool kRing = true;
  static constexpr int kStages = F::kRingStages;
  static constexpr int kSlotBytes = F::kSlotBytes;
};
// Optional: `__device__ static void prepareBlock()`, run by every thread of a ring block beside the staging of x
// (before its barrier), for the format's own static shared memory (the bitmask format's selector table).
template <class F, class = void> struct PrepareOf {
  __device__ static void run() {}
};
template <class F>
struct PrepareOf<F, std::void_t<decltype(F::prepareBlock())>> {
  __device__ static void run() { F::prepareBlock(); }
};
// Optional for ring formats: `static constexpr bool kRingRowExtra = true;` and
//   template <int B, ActivationType T> __device__ static void ringRowExtra(const Params&, Accumulator<B>&,
//        int64_t row, int64_t col0, int64_t sliceCols, const uint32_t* xs, float (&total)[B]);
// work of the lane's row outside the chunks (SpQR's outliers) restricted to the block's columns col0 ..
// col0 + sliceCols, with the staged x; called after `finish` by every active warp.
template <class F, class = void> struct RingRowExtraOf {
  static constexpr bool kHas = false;
};
template <class F>
struct RingRowExtraOf<F, std::void_t<decltype(F::kRingRowExtra)>> {
  static constexpr bool kHas = F::kRingRowExtra;
};
// Optional for ring formats: `struct RowStart;` and
//   __device__ static void ringRowStart(const Params&, RowStart&, int64_t row, int64_t col0, int64_t sliceCols,
//        int chunks);
//   template <int B> __device__ static void ringRowAdopt(Accumulator<B>&, const RowStart&);
// work on the lane's row that reads only the weight, done before griddepcontrol.wait by the warp that stores the row
// group's split (SpQR: the searches for its outliers in the block's columns), then handed to the accumulator; `chunks`
// is the warp's chunk count. An empty struct and no code for the other formats.
struct NoRowStart {};
template <class F, class = void> struct RingRowStartOf {
  static constexpr bool kHas = false;
  using type = NoRowStart;
};
template <class F>
struct RingRowStartOf<F, std::void_t<typename F::RowStart>> {
  static constexpr bool kHas = true;
  using type = typename F::RowStart;
};
// Optional: `static constexpr bool kFolds = false;` for a format whose kernels take no folded work (GemvLaunch's
// input and accumulate; the runtime does those ops beside them). A format that takes it has every kernel compiled
// twice (the kernels' kFolds): with the folds' code for the launches that fold, and without it (no norm static
// shared memory, no fused staging, no accumulating store) for the plain ones, which measured faster without.
template <class F, class = void> struct FoldsOf {
  static constexpr bool kFolds = true;
};
template <class F>
struct FoldsOf<F, std::void_t<decltype(F::kFolds)>> {
  static constexpr bool kFolds = F::kFolds;
};
struct NoNormShared {
  float inverse[1];
};
template <bool kFolds, int B>
using NormSharedOf = std::conditional_t<kFolds, NormShared<B>, NoNormShared>;

// The block's reader of x: for a kernel without folds always the plain one, a constant the fused branches fold on.
template <bool kFolds, int B, ActivationType T>
__device__ __forceinline__ InputReader<T> readerOf(const GemvLaunch& a, NormSharedOf<kFolds, B>& norm, int lane,
                                                   int64_t col0) {
  if constexpr (kFolds) {
    if (!normInStagingRound<B>(a, col0)) computeNormInverses<B, T>(a, norm, lane);  // else the staging does it
    return InputReader<T>(a, norm.inverse);
  } else {
    InputReader<T> in(a, norm.inverse);
    in.input = GemvInput::Plain;
    return in;
  }
}
// Whether a launch folds work into the kernel (the kernels' kFolds it needs).
inline bool launchFolds(const GemvLaunch& a) { return a.input != GemvInput::Plain || a.accumulate; }
// Byte offset of the ring in the dynamic shared memory: after the staged x and the unit sums, 16-byte aligned
// (the host reserves 16 bytes of slack for the rounding).
__host__ __device__ constexpr int64_t ringOffsetBytes(int64_t stagedWords, int64_t sumFloats) {
  return (4 * (stagedWords + sumFloats) + 15) / 16 * 16;
}

// The minimum blocks a multiprocessor in __launch_bounds__ caps the registers (batch 1: 128, so 4 blocks = 16
// warps fit: the double buffer costs 2 fragments of registers, ptxas would otherwise take ~132 for int4 and 3
// blocks) and matches residentBlocks(), which the split policy (chooseGemvSplit) sizes its grid for.
// Stages x[:, slice] in shared memory for all batch rows the compiled B has (zero past the last column and for
// batch rows past `batch`, so padded weight entries and unused batch lanes contribute exactly 0), in fp32 rows or
// the format's own layout, and per-unit sums for the quantized formats. Each thread takes 8 consecutive columns
// with one 16-byte load; the loop is unrolled so that a thread's loads are all in flight together (a
// load-then-store loop costs one memory latency per iteration, which for a 3072-column slice at batch 8 was most
// of the kernel). A unit (≤ 256 columns, dividing the slice) is unit/8 consecutive threads of one warp, so its
// sum is a shuffle reduction. Every thread of the block calls it; the caller synchronises after it.
// kNormHere (normInStagingRound): the loop runs once, and between its loads and their use the block computes
// its rows' 1/rms from the loaded x into `norm` (which `in` reads), with computeNormInverses' arithmetic.
template <class Format, int B, ActivationType T, bool kFused, bool kNormHere = false>
__device__ __forceinline__ void stageSliceAs(const GemvLaunch& a, const InputReader<T>& in, int64_t col0,
                                             typename StagingOf<Format, B>::type* xs, float* xsum, int lane,
                                             NormShared<B>* norm = nullptr) {
  static_assert(!kNormHere || kFused, "the norm is a fused input");
  using Staging = StagingOf<Format, B>;
  const int64_t vectors = int64_t(B) * a.sliceCols / 8;
  const int slice = int(a.sliceCols);  // a slice fits in shared memory (kMaxStagedBytes), so B · slice fits 32 bits
  // A fused input loads two vectors for each it stages (the input and its partner): half the unroll keeps the
  // registers in flight, and so the pressure next to the weight fragments already loaded, where the plain one
  // has them (the batch-1 FFMA kernels are at their 128-register cap).
  constexpr int kUnroll = kFused ? 2 : 4;
  // The loop condition is the warp's (base − lane: its first thread), not the thread's: the unit sums below
  // shuffle with all 32 lanes, so a warp must never be split between iterating and leaving. (With fewer
  // vectors than threads, e.g. 80 = 5 chunks of 128 columns at batch 1, lanes 16-31 of warp 2 would leave
  // while lanes 0-15 shuffle: undefined behaviour. v2's splits never made such slices; v3's do, and the
  // QuantGroup kernel test stalled on the H200 until this loop was made warp-uniform.) Past `vectors` the
  // guards below load zeros and skip the stores; a unit lies wholly inside or outside `vectors`.
  // kNormHere: exactly one round, for every thread (its barriers), whatever `vectors` is.
  for (int64_t base = threadIdx.x; kNormHere ? base == threadIdx.x : base - lane < vectors;
       base += int64_t(blockDim.x) * kUnroll) {
    uint4 raw[kUnroll], partner[kUnroll];
    bool live[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = base + int64_t(u) * blockDim.x;
      const int b = int(v) * 8 / slice, i = int(v) * 8 % slice;  // 32-bit: a 64-bit division is ~40 instructions
      const int64_t c = col0 + i;
      live[u] = v < vectors && b < a.batch && c < a.cols;
      raw[u] = live[u] ? in.first(b, c) : make_uint4(0, 0, 0, 0);
      if constexpr (kFused) partner[u] = live[u] ? in.second(b, c) : make_uint4(0, 0, 0, 0);
    }
    if constexpr (kNormHere) {
      // Vector v of the slice is vector v % (slice / 8) of row v / (slice / 8); a warp's 32 (a span, as
      // computeNormInverses reads them: lane j the span's vector j) give the span's total to its lane 0.
      const int spans = int((a.cols + kNormSpanValues - 1) / kNormSpanValues);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t v = base + int64_t(u) * blockDim.x;
        float f[8];
        unpack8<T>(raw[u], f);
        const float total = spanTotal(vectorSquares(f));
        const int b = int(v) * 8 / slice, span = int(v) * 8 % slice / kNormSpanValues;
        if (lane == 0 && v < vectors && b < a.batch && span < spans) norm->spans[b][span] = total;
      }
      __syncthreads();
      if (int(threadIdx.x) < a.batch)
        norm->inverse[threadIdx.x] = rmsInverse(norm->spans[threadIdx.x], spans, a.cols, a.eps);
      __syncthreads();
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = base + int64_t(u) * blockDim.x;
      if constexpr (kFused)
        if (live[u]) raw[u] = in.combine(int(v) * 8 / slice, raw[u], partner[u]);
      float f[8];
      unpack8<T>(raw[u], f);
      if (v < vectors) {
        if constexpr (Staging::kCustom) {
          Format::template stage<B>(xs, int(v) * 8 / slice, int(v) * 8 % slice, slice, raw[u]);
        } else {
          float4* dst = reinterpret_cast<float4*>(xs + v * 8);
          dst[0] = make_float4(f[0], f[1], f[2], f[3]);
          dst[1] = make_float4(f[4], f[5], f[6], f[7]);
        }
      }
      if (a.sumUnit > 0) {  // uniform across the block: every thread of a warp takes part in the shuffles
        float sum = ((f[0] + f[1]) + (f[2] + f[3])) + ((f[4] + f[5]) + (f[6] + f[7]));
        const int threadsPerUnit = a.sumUnit / 8;
        for (int off = threadsPerUnit / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, off);
        if (v < vectors && lane % threadsPerUnit == 0) xsum[v * 8 / a.sumUnit] = sum;
      }
    }
  }
}
template <class Format, int B, ActivationType T, bool kFolds>
__device__ __forceinline__ void stageSlice(const GemvLaunch& a, const InputReader<T>& in, int64_t col0,
                                           typename StagingOf<Format, B>::type* xs, float* xsum, int lane,
                                           NormSharedOf<kFolds, B>& norm) {
  if constexpr (!kFolds) {
    stageSliceAs<Format, B, T, false>(a, in, col0, xs, xsum, lane);
  } else {
    if (a.input == GemvInput::Plain) stageSliceAs<Format, B, T, false>(a, in, col0, xs, xsum, lane);
    else if (normInStagingRound<B>(a, col0)) stageSliceAs<Format, B, T, true, true>(a, in, col0, xs, xsum, lane, &norm);
    else stageSliceAs<Format, B, T, true>(a, in, col0, xs, xsum, lane);
  }
}

// The counter of a split row group; true for the last block to arrive. An atomic add with acquire-release
// semantics at GPU scope: the release publishes the partial sums the warp stored before it (ordered by the
// __syncwarp in front of it), the acquire of the last arrival sees every earlier block's (each add continues the
// release sequence of the ones before). Two __threadfence()s (v6b) cost a sequentially consistent fence each;
// a release add in every block with an acquire fence in the last one alone (v6i) measured 1-2% slower than this
// at every batch (bench/NOTES.md v6i).
__device__ __forceinline__ bool arriveLast(int* counter, int splits) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(old) : "l"(counter) : "memory");
  return old == splits - 1;
}

// The last block's sum of a row's split partials, in ascending split order (the same bits whatever kUnroll):
// kUnroll splits' loads are issued together, so the sum takes ceil(splits / kUnroll) L2 round trips.
template <int B, int kUnroll>
__device__ __forceinline__ void sumSplitPartials(const GemvLaunch& a, int64_t row, int64_t paddedRows,
                                                 float (&sum)[B]) {
#pragma unroll
  for (int b = 0; b < B; ++b) sum[b] = 0.f;
#pragma unroll kUnroll
  for (int s = 0; s < a.splits; ++s)
#pragma unroll
    for (int b = 0; b < B; ++b)
      if (b < a.batch) sum[b] += __ldcg(&a.partials[(int64_t(s) * a.batch + b) * paddedRows + row]);
}

// Stores the row group's y (`total`, the lane's row), or, when several blocks (splits) share the row group's
// columns, publishes this block's partial sums and lets the last block to arrive add them all up (arriveLast).
// One warp a row group, all 32 lanes; `lastBlock` is a shared flag of that warp. Partials are
// [split][batch][paddedRows].
template <int B, ActivationType T, bool kFolds>
__device__ __forceinline__ void storeOrCombineSplits(const GemvLaunch& a, const float (&total)[B], int64_t group,
                                                     int split, int64_t paddedRows, int lane, bool& lastBlock) {
  using A = Act<T>;
  auto* y = static_cast<typename A::type*>(a.y);
  const int64_t row = group * kRowsPerGroup + lane;
  // y = the product, or y += it (GemvLaunch::accumulate: y is the residual stream, read and written by this lane).
  const bool accumulate = kFolds && a.accumulate;
  const auto store = [&](int b, float v) {
    typename A::type* at = y + int64_t(b) * a.rows + row;
    *at = accumulate ? residualAdd<T>(*at, v) : A::fromFloat(v);
  };
  if (a.splits == 1) {
    if (row < a.rows)
#pragma unroll
      for (int b = 0; b < B; ++b)
        if (b < a.batch) store(b, total[b]);
    return;
  }
#pragma unroll
  for (int b = 0; b < B; ++b)
    if (b < a.batch) a.partials[(int64_t(split) * a.batch + b) * paddedRows + row] = total[b];
  __syncwarp();
  if (lane == 0) lastBlock = arriveLast(&a.counters[group], a.splits);
  __syncwarp();
  if (!lastBlock) return;
  if (row < a.rows) {
    // Every batch row's partials are loaded before the first store to y (which the compiler must assume may
    // alias them): a loop over b with the store inside cost one L2 latency per batch row.
    float sum[B];
    if (a.wideCombine)
      sumSplitPartials<B, splitCombineUnroll(B, true)>(a, row, paddedRows, sum);
    else
      sumSplitPartials<B, splitCombineUnroll(B, false)>(a, row, paddedRows, sum);
#pragma unroll
    for (int b = 0; b < B; ++b)
      if (b < a.batch) store(b, sum[b]);
  }
  if (lane == 0) a.counters[group] = 0;  // ready for the next launch (and the next graph replay)
}

template <class Format, int B, ActivationType T, bool kFolds>
__global__ void __launch_bounds__(kRowsPerGroup * kWarpsPerBlock, residentBlocks(B))
    packedGemvKernel(const typename Format::Params w, const GemvLaunch a) {
  static_assert(!kFolds || FoldsOf<Format>::kFolds, "a format without folds has only plain kernels");
  using A = Act<T>;
  using Fragment = typename Format::Fragment;
  extern __shared__ float shared[];
  __shared__ float warpSums[kWarpsPerBlock][B][kRowsPerGroup];
  __shared__ NormSharedOf<kFolds, B> norm;
  __shared__ bool lastBlock;

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t group = blockIdx.x;
  const int split = blockIdx.y;
  const int64_t chunk0 = int64_t(split) * a.chunksPerSplit;
  const int64_t chunkEnd = min(chunk0 + a.chunksPerSplit, a.totalChunks);
  const int64_t col0 = chunk0 * Format::kChunkCols;
  const int64_t row = group * kRowsPerGroup + lane;
  BlockTimeline timeline;
  timeline.begin();
  detail::allowDependentLaunch();  // the next kernel may start its own weight loads once all blocks run

  // The warp's chunks are first, first + kWarpsPerBlock, ... below chunkEnd: the same for all 32 lanes (no
  // divergence), possibly none in a short last split or when the split has fewer chunks than warps. A warp
  // without chunks still runs the staging (its shuffles) and every __syncthreads below.
  constexpr int kStride = kWarpsPerBlock;
  const int64_t first = chunk0 + warp;

  // Issue the weight loads of the warp's first two chunks now, before x is staged: they do not depend on x, so
  // their memory latency overlaps the staging loads, the stores to shared memory and the barrier, instead of
  // following them. A warp of at most two chunks has its whole share of the weight in flight from the start.
  using Staging = StagingOf<Format, B>;
  const int64_t units = a.sumUnit > 0 ? a.sliceCols / a.sumUnit : 0;
  Fragment f0, f1;
  if (first < chunkEnd) f0 = Format::load(w, group, first, lane);
  if (first + kStride < chunkEnd) f1 = Format::load(w, group, first + kStride, lane);
  const typename Format::RowState rowState = Format::rowBegin(w, row);
  // Everything above reads only this launch's weight; x, y, the partials and the counters belong to the
  // kernels before and after this one (ProgrammaticLaunch.cuh).
  detail::waitForPreviousGrid();
  timeline.release();

  using Staged = typename Staging::type;
  Staged* xs = reinterpret_cast<Staged*>(shared);
  float* xsum = shared + Staging::words(a.sliceCols);
  const InputReader<T> in = readerOf<kFolds, B, T>(a, norm, lane, col0);
  stageSlice<Format, B, T, kFolds>(a, in, col0, xs, xsum, lane, norm);
  __syncthreads();
  timeline.stage();

  using Accumulator = AccumulatorOf<Format, B>;
  typename Accumulator::type acc{};
  const int64_t unitsPerChunk = a.sumUnit > 0 ? Format::kChunkCols / a.sumUnit : 0;
  const auto computeChunk = [&](const Fragment& f, int64_t c) {
    const int64_t local = c - chunk0;
    Format::template compute<B>(w, f, group, c, lane, xs + local * Format::kChunkCols, a.sliceCols,
                                xsum + local * unitsPerChunk, units, acc);
  };
  // Register double buffer, unrolled by two so that each buffer keeps its own registers: f0 holds chunk c and
  // f1 chunk c + kStride (both loads already issued). As soon as a buffer's chunk is computed, the buffer is
  // refilled with the chunk two steps ahead, which then stays in flight during the other buffer's compute. (A
  // rolled loop with `current = next` would copy registers whose loads are still outstanding, and the copy
  // waits for them: the prefetch would be gone.) Chunks are computed in the same order as before (c ascending),
  // so the sums are accumulated in the same order.
  for (int64_t c = first; c < chunkEnd; c += 2 * kStride) {
    computeChunk(f0, c);
    if (c + 2 * kStride < chunkEnd) f0 = Format::load(w, group, c + 2 * kStride, lane);
    if (c + kStride >= chunkEnd) break;
    computeChunk(f1, c + kStride);
    if (c + 3 * kStride < chunkEnd) f1 = Format::load(w, group, c + 3 * kStride, lane);
  }
  float rowSum[B];
  if constexpr (Accumulator::kCustom) {
    Format::template finish<B>(acc, lane, rowSum);
  } else {
#pragma unroll
    for (int b = 0; b < B; ++b) rowSum[b] = acc[b];
  }
  Format::template rowExtra<B, T>(w, rowState, row, split * kWarpsPerBlock + warp, a.splits * kWarpsPerBlock, in,
                                  rowSum);

#pragma unroll
  for (int b = 0; b < B; ++b) warpSums[warp][b][lane] = rowSum[b];
  __syncthreads();
  if (warp != 0) return;
  float total[B];
#pragma unroll
  for (int b = 0; b < B; ++b) {
    total[b] = 0.f;
#pragma unroll
    for (int v = 0; v < kWarpsPerBlock; ++v) total[b] += warpSums[v][b][lane];
  }
  storeOrCombineSplits<B, T, kFolds>(a, total, group, split, int64_t(gridDim.x) * kRowsPerGroup, lane, lastBlock);
#ifdef PARETO_GEMV_TIMELINE
  timeline.end(a.timeline, a.y);
#endif
}

// The kernel of the ring formats (RingOf): the kRingWarpsPerBlock (8) warps of a block take kRingWarpsPerBlock /
// ringGroupWarps consecutive row groups over the same columns (a split), so x is staged once for all of them. With
// ringGroupWarps = 1 every warp walks all chunks of the split through its own shared-memory ring; with more, the
// ringGroupWarps warps of a row group (consecutive warps) each walk a contiguous part of them, and their sums are
// added in shared memory, in part order, before the row group's split is stored or combined. Grid: (ceil(row
// groups / row groups a block), splits). One warp a row group combines its splits (storeOrCombineSplits, one
// counter a row group).
template <class Format, int B, ActivationType T, bool kFolds>
__global__ void __launch_bounds__(kRowsPerGroup * kRingWarpsPerBlock, kRingResidentBlocks)
    ringGemvKernel(const typename Format::Params w, const GemvLaunch a) {
  static_assert(!kFolds || FoldsOf<Format>::kFolds, "a format without folds has only plain kernels");
  using A = Act<T>;
  using Ring = RingOf<Format>;
  using Staging = StagingOf<Format, B>;
  static_assert(Ring::kRing && Staging::kCustom && AccumulatorOf<Format, B>::kCustom, "a ring format");
  // The parts' sums meet in the first bytes of each warp's ring (free once its last chunk is computed).
  static_assert(Ring::kStages * Ring::kSlotBytes >= int(sizeof(float)) * B * kRowsPerGroup,
                "a warp's sums fit its ring");
  extern __shared__ float shared[];
  __shared__ NormSharedOf<kFolds, B> norm;
  __shared__ bool lastBlock[kRingWarpsPerBlock];

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  // A power of two (the launch checks it): shifts, not divisions by a runtime value.
  const int groupWarps = a.ringGroupWarps, groupShift = __ffs(groupWarps) - 1;
  const int64_t groups = (a.rows + kRowsPerGroup - 1) / kRowsPerGroup;
  const int split = blockIdx.y;
  const int64_t chunk0 = int64_t(split) * a.chunksPerSplit;
  const int64_t chunkEnd = min(chunk0 + a.chunksPerSplit, a.totalChunks);
  // The warp's row group and chunks [chunk0 + first, chunk0 + first + count): its part of the split (GemvProblem.h).
  const RingWarpWork work = ringWarpWork(blockIdx.x, warp, groupShift, int(chunkEnd - chunk0), groups, a.ringBlocks);
  const int64_t group = work.group;
  const int part = work.part, first = work.first;
  const bool active = group < groups;  // the last block may have fewer row groups than warps
  const int count = active ? work.count : 0;
  BlockTimeline timeline;
  timeline.begin();
  allowDependentLaunch();

  const int64_t units = a.sumUnit > 0 ? a.sliceCols / a.sumUnit : 0;
  uint8_t* ring = reinterpret_cast<uint8_t*>(shared) + ringOffsetBytes(Staging::words(a.sliceCols), int64_t(B) * units);
  uint8_t* warpRing = ring + warp * Ring::kStages * Ring::kSlotBytes;
  const auto slotOf = [&](int i) { return warpRing + (i % Ring::kStages) * Ring::kSlotBytes; };
  // The warp's first kRingStages chunks go in flight before x is staged (they do not depend on it): one commit
  // group a stage, empty or not, so that waitCopies counts stages.
  {
    const uint64_t policy = evictFirstPolicy();
#pragma unroll
    for (int i = 0; i < Ring::kStages; ++i) {
      if (i < count) Format::copyChunk(w, group, chunk0 + first + i, lane, sharedAddressOf(slotOf(i)), policy);
      commitCopies();
    }
  }
  [[maybe_unused]] typename RingRowStartOf<Format>::type rowStart{};
  if constexpr (RingRowStartOf<Format>::kHas)
    if (active && part == 0)
      Format::ringRowStart(w, rowStart, group * kRowsPerGroup + lane, chunk0 * Format::kChunkCols, a.sliceCols, count);
  waitForPreviousGrid();  // x, y, the partials and the counters belong to the kernels before and after this one
  timeline.release();

  auto* xs = reinterpret_cast<typename Staging::type*>(shared);
  float* xsum = shared + Staging::words(a.sliceCols);
  const int64_t col0 = chunk0 * Format::kChunkCols;
  stageSlice<Format, B, T, kFolds>(a, readerOf<kFolds, B, T>(a, norm, lane, col0), col0, xs, xsum, lane, norm);
  PrepareOf<Format>::run();
  __syncthreads();
  timeline.stage();

  typename Format::template Accumulator<B> acc{};
  if constexpr (RingRowStartOf<Format>::kHas) Format::template ringRowAdopt<B>(acc, rowStart);
  const int64_t unitsPerChunk = a.sumUnit > 0 ? Format::kChunkCols / a.sumUnit : 0;
  // Chunk i of the warp is in slot i mod kRingStages. Each iteration waits for the oldest stage (the lane's own
  // copies), makes the other lanes' copies visible (__syncwarp), computes it, and refills the slot with the chunk
  // kRingStages ahead once every lane has read it (the second __syncwarp): kRingStages − 1 chunks stay in flight
  // during each compute. The chunk's place in the staged slice is first + i.
  {
    const uint64_t policy = evictFirstPolicy();
    for (int i = 0; i < count; ++i) {
      waitCopies<Ring::kStages - 1>();
      __syncwarp();
      Format::template computeSlot<B>(w, slotOf(i), group, chunk0 + first + i, first + i, lane, xs, a.sliceCols,
                                      xsum + (first + i) * unitsPerChunk, units, acc);
      __syncwarp();
      if (i + Ring::kStages < count)
        Format::copyChunk(w, group, chunk0 + first + i + Ring::kStages, lane, sharedAddressOf(slotOf(i)), policy);
      commitCopies();
    }
    waitCopies<0>();  // nothing may still be writing shared memory when the block ends (or its sums go there)
  }
  float total[B];
  if (active) {
    Format::template finish<B>(acc, lane, total);
    if constexpr (RingRowExtraOf<Format>::kHas)
      Format::template ringRowExtra<B, T>(w, acc, group * kRowsPerGroup + lane, chunk0 * Format::kChunkCols,
                                          a.sliceCols, xs, total);
  }
  if (groupWarps > 1) {  // uniform across the block: every thread reaches the barrier
    // Every lane's copies have landed (waitCopies<0>) and every lane has read the warp's last chunk (the loop's
    // second __syncwarp); the __syncwarp makes the first so for the whole warp before its ring is overwritten.
    __syncwarp();
    float* sums = reinterpret_cast<float*>(warpRing);
    if (active)
#pragma unroll
      for (int b = 0; b < B; ++b) sums[b * kRowsPerGroup + lane] = total[b];
    __syncthreads();
    if (!active || part != 0) return;
    for (int p = 1; p < groupWarps; ++p) {
      const float* other = reinterpret_cast<const float*>(warpRing + p * Ring::kStages * Ring::kSlotBytes);
#pragma unroll
      for (int b = 0; b < B; ++b) total[b] += other[b * kRowsPerGroup + lane];
    }
  } else if (!active) {
    return;
  }
  storeOrCombineSplits<B, T, kFolds>(a, total, group, split, groups * kRowsPerGroup, lane, lastBlock[warp]);
#ifdef PARETO_GEMV_TIMELINE
  timeline.end(a.timeline, a.y);
#endif
}

// PARETO_RING_SPREAD=1 (ringSpreadEnabled): the dynamic shared memory of a ring grid of no more blocks than
// multiprocessors, raised so that a block takes over half of a multiprocessor's shared memory. Why: the hardware
// places a grid's blocks where the previous grid's leave room, and under programmatic launch that is the
// multiprocessors the previous GEMV's blocks are leaving first. The H200 timeline at batch 1 (bench/NOTES.md)
// shows int4 g128's o, 128 blocks, on ~67 of the 132 multiprocessors, two blocks each, those alone ending at
// 3.9 µs (median) against 5.3 for the pairs. A block of this size still fits beside one ring block of another
// GEMV (both ≤ half), so it may still start under the previous GEMV's tail. Unchanged where the grid is larger
// than the machine, or where the device cannot say.
template <class Kernel>
size_t spreadSharedBytes(Kernel kernel, int64_t blocks, size_t sharedBytes) {
  int device = 0, multiprocessors = 0, perMultiprocessor = 0, reserved = 0, optIn = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&perMultiprocessor, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optIn, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
    return sharedBytes;
  if (blocks > multiprocessors) return sharedBytes;
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) return sharedBytes;
  // Two blocks then need 2 · (static + dynamic + reserved) > the multiprocessor's shared memory.
  const size_t others = attributes.sharedSizeBytes + size_t(reserved);
  const size_t half = size_t(perMultiprocessor) / 2 + 1;
  const size_t wanted = half > others ? half - others : 0;
  const size_t most = size_t(optIn) > attributes.sharedSizeBytes ? size_t(optIn) - attributes.sharedSizeBytes : 0;
  return wanted > sharedBytes && wanted <= most ? wanted : sharedBytes;
}

inline std::string cudaErrorText(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

// Launches packedGemvKernel<Format, B, T, kFolds> or its ring form (B: the compiled batch for a.batch). kFolds: the
// kernel with the folds' code, for a launch that folds (launchFolds); a format with folds compiles its folded
// launches in a translation unit of their own (the build's longest files would otherwise double).
template <class Format, int B, ActivationType T, bool kFolds>
cudaError_t launchPackedGemvAt(const typename Format::Params& w, const GemvLaunch& a, size_t sharedBytes,
                               cudaStream_t stream) {
  constexpr bool kRing = RingOf<Format>::kRing;
  const int64_t gridRows =
      !kRing ? rowGroups(a.rows)
      : a.ringBlocks > 0 ? a.ringBlocks
                         : ceilDiv(rowGroups(a.rows), kRingWarpsPerBlock / a.ringGroupWarps);
  const dim3 grid(unsigned(gridRows), unsigned(a.splits));
  const dim3 block(kRowsPerGroup * (kRing ? kRingWarpsPerBlock : kWarpsPerBlock));
  // A non-sticky error left behind by an unrelated runtime call elsewhere in the process (cudaGetLastError is
  // per thread) would otherwise be reported as this launch's failure; sticky errors survive this and resurface.
  (void)cudaGetLastError();
  if (!kFolds && launchFolds(a)) return cudaErrorInvalidValue;  // a folding launch needs the kernel with the folds
  // Warps sharing a row group: ring kernels only, a power of two dividing the block's warps.
  if (a.ringGroupWarps != 1 && (!kRing || a.ringGroupWarps < 1 || kRingWarpsPerBlock % a.ringGroupWarps != 0 ||
                                (a.ringGroupWarps & (a.ringGroupWarps - 1)) != 0))
    return cudaErrorInvalidValue;
  // Row groups dealt out evenly: ring kernels only, and no block given more row groups than its warps can take.
  if (a.ringBlocks != 0 && (!kRing || a.ringBlocks < 0 ||
                            ceilDiv(rowGroups(a.rows), a.ringBlocks) > kRingWarpsPerBlock / a.ringGroupWarps))
    return cudaErrorInvalidValue;
  const auto kernel = [] {
    if constexpr (kRing) return ringGemvKernel<Format, B, T, kFolds>;
    else return packedGemvKernel<Format, B, T, kFolds>;
  }();
  if constexpr (kRing)
    if (ringSpreadEnabled()) sharedBytes = spreadSharedBytes(kernel, int64_t(grid.x) * grid.y, sharedBytes);
  // Static shared memory (the warp sums) counts against the same 48 KB default, so opt in well below it.
  if (sharedBytes > 32 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sharedBytes));
    if (e != cudaSuccess) return e;
  }
  // The ring kernels' residency (kRingResidentBlocks, which their split assumes) needs the largest shared-memory
  // carveout; their weights bypass L1 (cp.async.cg), so the smaller L1 costs nothing.
  if constexpr (kRing) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, int(cudaSharedmemCarveoutMaxShared));
    if (e != cudaSuccess) return e;
  }
  return launchKernel(kernel, grid, block, sharedBytes, stream, w, a);
}

// Launches the kernel for the smallest compiled B ≥ batch.
template <class Format, ActivationType T, bool kFolds>
cudaError_t launchPackedGemv(const typename Format::Params& w, const GemvLaunch& a, size_t sharedBytes,
                             cudaStream_t stream) {
  switch (compiledBatch(a.batch)) {
    case 1: return launchPackedGemvAt<Format, 1, T, kFolds>(w, a, sharedBytes, stream);
    case 2: return launchPackedGemvAt<Format, 2, T, kFolds>(w, a, sharedBytes, stream);
    case 4: return launchPackedGemvAt<Format, 4, T, kFolds>(w, a, sharedBytes, stream);
    case 8: return launchPackedGemvAt<Format, 8, T, kFolds>(w, a, sharedBytes, stream);
    default: return launchPackedGemvAt<Format, 16, T, kFolds>(w, a, sharedBytes, stream);
  }
}

// Fills the launch record from a problem and its split.
inline GemvLaunch makeLaunch(const GemvProblem& p, const GemvSplit& s, int64_t totalChunks, int sumUnit,
                             float* partials, int* counters) {
  GemvLaunch a;
  a.rows = p.rows;
  a.cols = p.cols;
  a.batch = p.batch;
  a.splits = s.splits;
  a.ringGroupWarps = s.ringGroupWarps;
  a.ringBlocks = s.ringBlocks;
  a.totalChunks = totalChunks;
  a.chunksPerSplit = s.chunksPerSplit;
  a.sliceCols = s.sliceCols;
  a.sumUnit = sumUnit;
  a.x = p.x;
  a.y = p.y;
  a.partials = partials;
  a.counters = counters;
  a.input = p.input;
  a.normWeight = p.normWeight;
  a.eps = p.eps;
  a.accumulate = p.accumulate;
  a.normInStaging = normInStagingEnabled();
  a.wideCombine = splitCombineWideEnabled();
#ifdef PARETO_GEMV_TIMELINE
  a.timeline = p.timeline;
#endif
  return a;
}

}  // namespace pareto::kernels::detail
