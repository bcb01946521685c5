// Per-block timestamps of the packed GEMV kernels, for `bench/gemv_kernels timeline` only: compiled in with
// -DPARETO_GEMV_TIMELINE (bench/build-gemv-kernels.sh with GEMV_TIMELINE=1), to nothing otherwise.
//
// Why: at batch 1 about half of a packed step is a fixed part of every GEMV, not its bytes (bench/NOTES.md, the
// v6m record and after), and the kernel-level counters (Nsight Compute runs each kernel alone, cold, without the
// programmatic-launch overlap) cannot say where it goes between two kernels of the graph. Thread 0 of every block
// stamps %globaltimer (and its multiprocessor's clock64, finer where the global timer ticks in microseconds) when
// the block starts, when griddepcontrol.wait lets it go, when its x is staged and when it has stored its rows; the
// bench turns the stamps of one graph replay into, per GEMV, the gap between the previous GEMV's last block and
// this one's release, the spread of its blocks' ends (the tail), the staging time and the time its bytes took.
#pragma once

#include <cstdint>

#include "GemvProblem.h"

namespace pareto::kernels::detail {

struct BlockTimeline {
#ifdef PARETO_GEMV_TIMELINE
  uint64_t start = 0, released = 0, staged = 0;
  uint64_t clocks[3] = {0, 0, 0};
  __device__ static __forceinline__ uint64_t now() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ __forceinline__ void begin() {
    if (threadIdx.x == 0) start = now(), clocks[0] = clock64();
  }
  __device__ __forceinline__ void release() {
    if (threadIdx.x == 0) released = now(), clocks[1] = clock64();
  }
  __device__ __forceinline__ void stage() {
    if (threadIdx.x == 0) staged = now(), clocks[2] = clock64();
  }
  // Thread 0 of the block (warp 0 is the block's last: it adds the other warps' sums and stores or combines).
  __device__ __forceinline__ void end(const GemvTimelineBuffer& buffer, const void* y) {
    if (threadIdx.x != 0 || buffer.records == nullptr) return;
    const uint64_t finished = now(), finishedClock = clock64();
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    const unsigned i = atomicAdd(buffer.count, 1u);
    if (i >= buffer.capacity) return;
    GemvTimelineRecord& r = buffer.records[i];
    r.y = reinterpret_cast<uint64_t>(y);
    r.block = blockIdx.x + gridDim.x * blockIdx.y;
    r.sm = sm;
    r.start = start, r.released = released, r.staged = staged, r.end = finished;
    r.clocks[0] = clocks[0], r.clocks[1] = clocks[1], r.clocks[2] = clocks[2], r.clocks[3] = finishedClock;
  }
#else
  __device__ __forceinline__ void begin() {}
  __device__ __forceinline__ void release() {}
  __device__ __forceinline__ void stage() {}
#endif
};

}  // namespace pareto::kernels::detail
