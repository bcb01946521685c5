// Memory budgets of the jobs that can stream a model (`--max-gpu-memory`, `--max-host-memory`), and the peaks a run
// actually reached. A budget is planned against, not only watched: the job computes what its smallest unit of work
// needs (one block's weights, Hessians and solver workspace, one batch's activations) and refuses up front, with
// that size, a budget below it; within the budget it decides where the rest lives (calib/ActivationStore.h). On
// CUDA the budget is also the caching allocator's limit, so a misestimate fails as an out-of-memory error naming
// the stage instead of growing past it.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

#include "checkpoint/ModelConfig.h"

namespace pareto {

struct MemoryBudget {
  uint64_t gpuBytes = 0;    // device memory the job may use; 0: no limit
  uint64_t hostBytes = 0;   // resident host memory beyond the process's own at the start (LibTorch, CUDA context); 0: no limit
  bool limited() const { return gpuBytes != 0 || hostBytes != 0; }
  // "--max-gpu-memory 8GiB" style sizes (checkpoint/ShardPlan.h parseByteSize); "" leaves that one unlimited.
  static MemoryBudget parse(const std::string& gpu, const std::string& host);
};

// The process's resident memory now, and its peak so far (Linux: /proc/self/statm, getrusage).
uint64_t hostResidentBytes();
uint64_t hostPeakResidentBytes();

// The CUDA caching allocator's bytes held from the system, now and at peak since resetGpuPeak; 0 on the CPU.
uint64_t gpuReservedBytes(const c10::Device& device);
uint64_t gpuPeakBytes(const c10::Device& device);
void resetGpuPeak(const c10::Device& device);
uint64_t gpuTotalBytes(const c10::Device& device);
// Caps the caching allocator at `bytes` (0: no cap). Throws InputError when the device has less than that.
void limitGpuMemory(const c10::Device& device, uint64_t bytes);

// limitGpuMemory for as long as it lives, then no cap (the workbench runs jobs in one long-lived process).
class GpuMemoryLimit {
 public:
  GpuMemoryLimit(const c10::Device& device, uint64_t bytes);
  ~GpuMemoryLimit();
  GpuMemoryLimit(const GpuMemoryLimit&) = delete;
  GpuMemoryLimit& operator=(const GpuMemoryLimit&) = delete;

 private:
  c10::Device device_;
  bool active_ = false;
};

// Bytes of one block's weights in `dtype` (norms included), and of the embedding table and the output head.
uint64_t blockWeightBytes(const ModelConfig& config, c10::ScalarType dtype);
uint64_t embeddingBytes(const ModelConfig& config, c10::ScalarType dtype);
// The whole model: blocks, embedding, head (once when tied), final norm.
uint64_t modelWeightBytes(const ModelConfig& config, c10::ScalarType dtype);

// Allocator rounding and LibTorch's temporaries that the planners' terms do not name: every plan's total is raised
// by 15%.
uint64_t withHeadroom(uint64_t bytes);

// What generating with `models` whole models in `dtype` takes: their weights, each one's KV cache of `batch`
// sequences of `positions`, and float32 logits. Generation runs every layer for every new token, so unlike a
// calibration pass or perplexity it cannot stream the model block by block.
uint64_t wholeModelGenerationBytes(const ModelConfig& config, c10::ScalarType dtype, int64_t batch, int64_t positions,
                                   int models = 1);

// Throws InputError up front when that is more than the budget of the device the generation runs on
// (--max-gpu-memory on CUDA, --max-host-memory on the CPU), naming `what` ("decode fidelity"), the size and the
// budget, and what to change.
void requireGenerationFits(const ModelConfig& config, const c10::Device& device, c10::ScalarType dtype,
                           const MemoryBudget& budget, int64_t batch, int64_t positions, int models,
                           const std::string& what);

}  // namespace pareto
