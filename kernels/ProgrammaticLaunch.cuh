// Programmatic dependent launch (Hopper and later) for the decode-step kernels.
//
// Why: a decode step is ~350 short kernels in a row (four GEMVs and six small ops a layer). Between two of them
// the GPU otherwise drains the first grid completely, then launches the second, whose blocks only then start
// their first memory loads: a few microseconds a boundary in which no weight bytes move, and a packed int4 GEMV
// of a 4096-wide layer lasts only ~5 µs at full bandwidth. With programmatic stream serialisation the next
// kernel is launched as soon as every block of the current one has started (`allowDependentLaunch`), its blocks
// take the multiprocessors that the current grid's finished blocks leave, issue the loads that do not depend
// on the previous kernel (the weights), and only then wait (`waitForPreviousGrid`) until the previous grid has
// finished and its writes are visible. Captured into a CUDA graph the stream order becomes programmatic edges,
// so graph replays keep the overlap.
//
// The rule every kernel launched through `launchKernel` keeps: nothing is written to global memory, and nothing
// that an earlier kernel writes is read, before `waitForPreviousGrid` — and every block calls it before it may
// return — so a kernel started early can never see or clobber the previous kernel's data, and the wait of
// kernel n+1 on kernel n also covers kernel n−1 (kernel n cannot finish before kernel n−1 did). One exception,
// argued where it is made: the fused decode attention (unless PARETO_ATTENTION_EARLY_TILE=0) reads the KV-cache rows
// of earlier decode steps before its wait (decode_attention.cu), which every step's first kernel, an ordinary
// launch, has already waited for.
//
// PARETO_PDL=0 in the environment launches everything the ordinary way (for A/B timing and as a way out if a
// driver mishandles it). Before Hopper the attribute is not requested and the two device calls compile to
// nothing.
#pragma once

#include <cuda_runtime.h>

#include "KernelSwitches.h"

namespace pareto::kernels::detail {

__device__ __forceinline__ void waitForPreviousGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allowDependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether kernels on the current device are launched with programmatic stream serialisation: compute
// capability ≥ 9 and PARETO_PDL not "0". The environment is read once; the device is asked on each launch
// (a host-side lookup, no synchronisation) since a process may use several.
inline bool programmaticLaunchWanted() {
  static const bool enabled = kernelSwitch("PARETO_PDL") != SwitchSetting::Off;
  if (!enabled) return false;
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  return major >= 9;
}

// kernel<<<grid, block, sharedBytes, stream>>>(args...), with programmatic stream serialisation where wanted.
template <class... Params, class... Args>
cudaError_t launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t sharedBytes,
                         cudaStream_t stream, const Args&... args) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = sharedBytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = programmaticLaunchWanted() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

}  // namespace pareto::kernels::detail
