// obs_block_sweep: one lazy block of the OBS sweep, all of its columns in one launch (ObsBlockSweep.h).
//
// One thread sweeps one row. The CTA first copies U's diagonal block and its rows' tile of the block into shared
// memory with coalesced loads; then each thread walks the block's columns in order, fixing column i by the rule
// and compensating its error on the columns after it through row i of U. Every thread reads the same U[i][j] at
// the same time (a broadcast), while each reads and writes its own row: the row tile's stride is width + 1 floats
// so that the 32 rows a warp touches at one column fall in 32 different banks.
//
// The arithmetic follows core/compress/ObsSweep.cpp and the solvers' ATen code step for step in float32 (scores
// v² / d², the error (v − f) / U_ii, the loss as a running sum of squares, round half to even), so that the fused
// sweep and the column-by-column one differ only by the rounding of a contracted multiply-add.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ObsBlockSweep.h"

namespace pareto::kernels {
namespace {

constexpr int kRowsPerCta = 64;

// The smallest fp16 value >= s (s > 0 and finite), as a float: positive halves are ordered like their bits.
__device__ __forceinline__ float roundUpToHalf(float s) {
  const __half h = __float2half_rn(s);
  const float back = __half2float(h);
  if (back >= s) return back;
  return __half2float(__ushort_as_half(static_cast<unsigned short>(__half_as_ushort(h) + 1)));
}

// Row `row` of the block, whose values are `w` in shared memory, swept through every column of the block.
__device__ void sweepRow(const ObsBlockSweepProblem& p, const float* u, float* w, int64_t row) {
  const int width = p.width;
  uint8_t* keep = p.keep ? p.keep + row * p.keepStride : nullptr;
  const uint8_t* pruned = p.pruned ? p.pruned + row * p.prunedStride : nullptr;
  float* codes = p.codes ? p.codes + row * p.codesStride : nullptr;
  float* scales = p.scales ? p.scales + row * p.gridStride : nullptr;
  float* zeros = p.zeros ? p.zeros + row * p.gridStride : nullptr;

  float loss = 0.f;
  uint32_t groupKeep = 0;  // NMMask: the keep bits of the current group
  float scale = 1.f, zero = 0.f;
  for (int i = 0; i < width; ++i) {
    const float v = w[i];
    float fixed;
    if (p.rule == ObsRule::Quantize) {
      const int64_t column = p.start + i, group = column / p.groupSize;
      if (p.dynamicGroups) {
        if (column % p.groupSize == 0) {
          float lo = 0.f, hi = 0.f, amax = 0.f;
          for (int k = 0; k < p.groupSize; ++k) {
            const float x = (pruned && pruned[i + k]) ? 0.f : w[i + k];
            lo = fminf(lo, x);
            hi = fmaxf(hi, x);
            amax = fmaxf(amax, fabsf(x));
          }
          scale = p.symmetric ? amax / p.qmax : (hi - lo) / p.qmax;
          if (scale == 0.f) scale = 1.f;
          scale = roundUpToHalf(scale);
          if (!(scale <= 65504.f)) *p.overflow = 1;
          zero = p.symmetric ? 0.f : fminf(fmaxf(rintf(-lo / scale), 0.f), p.qmax);
          scales[group] = scale;
          zeros[group] = zero;
        }
      } else {
        scale = scales[group];
        zero = zeros[group];
      }
      float q = fminf(fmaxf(rintf(v / scale) + zero, p.qmin), p.qmax);
      if (pruned && pruned[i]) q = zero;
      codes[i] = q;
      fixed = (q - zero) * scale;
    } else {
      bool kept;
      if (p.rule == ObsRule::NMMask) {
        const int offset = i % p.m;
        if (offset == 0) {
          float scores[kObsMaxGroupM];
          for (int k = 0; k < p.m; ++k) {
            const float x = w[i + k], d = u[(i + k) * width + i + k];
            scores[k] = (x * x) / (d * d);
          }
          groupKeep = (p.m == 32) ? 0xffffffffu : ((1u << p.m) - 1u);
          for (int removed = 0; removed < p.m - p.n; ++removed) {
            int smallest = -1;
            for (int k = 0; k < p.m; ++k)
              if (((groupKeep >> k) & 1u) && (smallest < 0 || scores[k] < scores[smallest])) smallest = k;
            groupKeep &= ~(1u << smallest);
          }
          for (int k = 0; k < p.m; ++k) keep[i + k] = uint8_t((groupKeep >> k) & 1u);
        }
        kept = (groupKeep >> offset) & 1u;
      } else {
        kept = keep[i] != 0;
      }
      fixed = kept ? v : 0.f;
    }
    const float* uRow = u + i * width;
    const float error = (v - fixed) / uRow[i];
    loss += error * error;
    p.errors[int64_t(i) * p.rows + row] = error;  // transposed: the CTA's rows are consecutive
    w[i] = fixed;
    for (int j = i + 1; j < width; ++j) w[j] = fmaf(-error, uRow[j], w[j]);
  }
  p.losses[row] += loss;
}

__global__ void __launch_bounds__(kRowsPerCta) obsBlockSweepKernel(const ObsBlockSweepProblem p) {
  extern __shared__ float shared[];
  const int width = p.width, stride = width + 1;
  float* u = shared;                         // [width][width]
  float* tile = shared + width * width;      // [kRowsPerCta][width + 1]
  const int64_t firstRow = int64_t(blockIdx.x) * kRowsPerCta;
  const int rowsHere = p.rows - firstRow < kRowsPerCta ? int(p.rows - firstRow) : kRowsPerCta;

  for (int k = threadIdx.x; k < width * width; k += blockDim.x) {
    const int i = k / width, j = k - i * width;
    u[k] = p.hinv[int64_t(i) * p.hinvStride + j];
  }
  for (int k = threadIdx.x; k < rowsHere * width; k += blockDim.x) {
    const int r = k / width, j = k - r * width;
    tile[r * stride + j] = p.block[(firstRow + r) * width + j];
  }
  __syncthreads();
  if (threadIdx.x < rowsHere) sweepRow(p, u, tile + threadIdx.x * stride, firstRow + threadIdx.x);
  __syncthreads();
  for (int k = threadIdx.x; k < rowsHere * width; k += blockDim.x) {
    const int r = k / width, j = k - r * width;
    p.block[(firstRow + r) * width + j] = tile[r * stride + j];
  }
}

}  // namespace

std::string runObsBlockSweep(const ObsBlockSweepProblem& p, CUstream_st* stream) {
  if (auto e = checkObsBlockSweep(p); !e.empty()) return e;
  const size_t shared = sizeof(float) * (size_t(p.width) * p.width + size_t(kRowsPerCta) * (p.width + 1));
  (void)cudaGetLastError();  // a stale error of an unrelated call must not be reported as this launch's
  cudaError_t e = cudaFuncSetAttribute(obsBlockSweepKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (e != cudaSuccess) return cudaGetErrorString(e);
  const dim3 grid{unsigned((p.rows + kRowsPerCta - 1) / kRowsPerCta)}, block{unsigned(kRowsPerCta)};
  obsBlockSweepKernel<<<grid, block, shared, stream>>>(p);
  e = cudaGetLastError();
  return e == cudaSuccess ? std::string() : std::string(cudaGetErrorString(e));
}

}  // namespace pareto::kernels
