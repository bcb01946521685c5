// decode_next_token: the end of a greedy decode step in one launch (DecodeOps.h): each row's argmax over the
// head's logits in the dtype, and the next step's inputs: ids and next = that token, positions += 1,
// generated[b][slot + 1] = token, slot += 1. Unfused that is a float32 copy of the logits, an argmax and four
// small updates, each a launch that waits for the one before.
//
// The argmax is at::argmax's: the first maximum, a NaN above every number (the first NaN). Taken on the 16-bit
// values it is the argmax of their float32 copy, the conversion being exact and monotonic. One block of 1024
// threads a row: each thread keeps its best over a strided share of 16-byte vectors (in ascending order, so a
// later equal value never replaces it), then the block reduces (value, index) pairs. Every block reads the slot
// first; the last block to finish (a counter it sets back to zero) moves the slot on.
#include <cmath>

#include "DecodeOps.h"
#include "GemvDriver.cuh"

namespace pareto::kernels {
namespace {

using detail::Act;
using detail::aligned16;

constexpr int kThreads = 1024;

struct Best {
  float value;
  int64_t index;
};

// Whether (a, ia) comes before (b, ib) in at::argmax's order.
__device__ __forceinline__ bool before(float a, int64_t ia, float b, int64_t ib) {
  const bool na = isnan(a), nb = isnan(b);
  if (na || nb) return na && (!nb || ia < ib);
  return a > b || (a == b && ia < ib);
}

template <ActivationType T>
__global__ void __launch_bounds__(kThreads) nextTokenKernel(const NextTokenProblem p) {
  using A = Act<T>;
  using E = typename A::type;
  __shared__ float values[kThreads / 32];
  __shared__ int64_t indices[kThreads / 32];
  const int b = blockIdx.x;
  detail::allowDependentLaunch();
  detail::waitForPreviousGrid();  // the logits are the head GEMV's output just before (ProgrammaticLaunch.cuh)
  const int64_t slot = *p.slot;   // read by every block before the last one moves it on
  const E* row = static_cast<const E*>(p.logits) + int64_t(b) * p.vocab;

  Best best{-INFINITY, p.vocab};  // no index yet: any value, even −∞, comes before it
  auto take = [&](float v, int64_t i) {
    if (best.index == p.vocab || before(v, i, best.value, best.index)) best = {v, i};
  };
  if (p.vocab % 8 == 0) {
    const uint4* vectors = reinterpret_cast<const uint4*>(row);
    for (int64_t k = threadIdx.x; k < p.vocab / 8; k += kThreads) {
      const uint4 x = vectors[k];
      const uint32_t words[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        take(A::lowToFloat(words[w]), 8 * k + 2 * w);
        take(A::highToFloat(words[w]), 8 * k + 2 * w + 1);
      }
    }
  } else {
    for (int64_t k = threadIdx.x; k < p.vocab; k += kThreads) take(A::toFloat(row[k]), k);
  }
  // Warp, then block: a pair with no index (a thread with no element) never wins.
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const float v = __shfl_xor_sync(0xFFFFFFFFu, best.value, off);
    const int64_t i = __shfl_xor_sync(0xFFFFFFFFu, best.index, off);
    if (i != p.vocab && (best.index == p.vocab || before(v, i, best.value, best.index))) best = {v, i};
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    values[warp] = best.value;
    indices[warp] = best.index;
  }
  __syncthreads();
  if (warp == 0) {
    best = {values[lane], indices[lane]};
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      const float v = __shfl_xor_sync(0xFFFFFFFFu, best.value, off);
      const int64_t i = __shfl_xor_sync(0xFFFFFFFFu, best.index, off);
      if (i != p.vocab && (best.index == p.vocab || before(v, i, best.value, best.index))) best = {v, i};
    }
  }
  if (threadIdx.x != 0) return;
  const int64_t token = best.index;
  p.next[b] = token;
  p.ids[b] = token;
  p.positions[b] += 1;
  if (slot + 1 >= 0 && slot + 1 < p.generatedColumns) p.generated[int64_t(b) * p.generatedColumns + slot + 1] = token;
  __threadfence();
  if (atomicAdd(p.counter, 1u) + 1u == unsigned(p.batch)) {
    *p.counter = 0u;
    *p.slot = slot + 1;
  }
}

}  // namespace

std::string runNextToken(const NextTokenProblem& p, CUstream_st* stream) {
  if (auto e = checkNextToken(p); !e.empty()) return e;
  if (p.logits == nullptr || p.next == nullptr || p.ids == nullptr || p.positions == nullptr || p.slot == nullptr ||
      p.generated == nullptr || p.counter == nullptr)
    return "missing logits, token, position, slot, generated or counter pointer";
  if (p.vocab % 8 == 0 && !aligned16(p.logits)) return "logits must be 16-byte aligned";
  (void)cudaGetLastError();  // a stale error of an unrelated call must not be reported as this launch's
  const dim3 grid{unsigned(p.batch)}, block{unsigned(kThreads)};
  const cudaError_t e =
      p.type == ActivationType::Float16
          ? detail::launchKernel(nextTokenKernel<ActivationType::Float16>, grid, block, 0, stream, p)
          : detail::launchKernel(nextTokenKernel<ActivationType::BFloat16>, grid, block, 0, stream, p);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "decode_next_token launch");
}

}  // namespace pareto::kernels
