// The OBS sweep's lazy block in one CUDA launch (kernels/ObsBlockSweep.h) for the column rules that are plain data:
// a keep mask given for the block, an N:M mask chosen as the sweep reaches each group, or a quantization grid. The
// solvers offer their rule through ObsSweepHooks::fixBlock; where the kernel does not take it (the CPU, float64,
// a group that straddles blocks, act-order) the sweep fixes the block column by column as before.
//
// Opt-in for now: PARETO_OBS_FUSED=1 in the environment turns the kernel on. It becomes the default once its CUDA
// tests (test_obs_block_kernel: the same masks, grids and codes as the column sweep, and every block of an aligned
// sweep taken by the kernel) have passed on a GPU.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace pareto {

class ObsSweepState;

struct ObsBlockRule {
  enum class Kind { GivenMask, NMMask, Quantize };
  Kind kind = Kind::GivenMask;
  at::Tensor keep;           // bool [out, in] on W's device, contiguous: read (GivenMask) or written (NMMask)
  int64_t n = 0, m = 0;      // NMMask
  // Quantize: grids [gridRows (out or 1), groups] float32, contiguous; groupSize columns a group; the grid of a
  // dynamic group is written when the sweep reaches its first column.
  at::Tensor scales, zeros;
  int64_t groupSize = 0;
  bool dynamicGroups = false;
  bool symmetric = true;
  double qmin = 0, qmax = 0;
  at::Tensor codes;          // float32 [out, in], contiguous: written
  at::Tensor pruned;         // optional bool [out, in], contiguous: these take the zero point
  at::Tensor overflow;       // int32 [1] on W's device: set to 1 where a dynamic scale leaves the fp16 range
};

// Whether the fused block sweep runs for a working weight like `w` here: float32 on a CUDA device, in a build
// with the CUDA kernels, and PARETO_OBS_FUSED is "1".
bool obsBlockKernelAvailable(const at::Tensor& w);

// Fixes every column of the state's block by `rule` in one launch on the current CUDA stream: the block holds the
// fixed values afterwards, errorsT [width, out] each column's error / U_jj, and `losses` [out] gains the block's
// Σ (error / U_jj)². Returns false, having changed nothing, where the kernel does not take the block.
bool obsBlockKernel(const ObsBlockRule& rule, const ObsSweepState& state, const at::Tensor& hinvBlock,
                    const at::Tensor& errorsT, const at::Tensor& losses);

}  // namespace pareto
