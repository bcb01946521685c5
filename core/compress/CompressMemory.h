// What a compress run needs in memory, planned before any work against --max-gpu-memory / --max-host-memory
// (model/MemoryBudget.h). The pass holds one block at a time (a streamed model), so the smallest unit of work is
// one block: its weights in the compute dtype, the four input Hessians of the block (fp32, in² each: the
// 14336-wide MLP input of an 8B is 822 MB), then either a forward over one calibration batch (observing and
// recomputing the block's outputs) or the largest module's solver (the damped Hessian, its Cholesky factor and
// inverse, and the weight, its update and error in fp32). The calibration activations (one [b, T, hidden] tensor
// per batch) go to the device when they fit beside that, else to host memory, else to a scratch file.
// Decode calibration generates with the whole model, so it must fit the device whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calib/ActivationStore.h"
#include "checkpoint/ModelConfig.h"
#include "model/Device.h"
#include "model/MemoryBudget.h"

namespace pareto {

struct CompressMemoryPlan {
  uint64_t blockWeights = 0;   // one block in the compute dtype
  uint64_t hessians = 0;       // the block's input Hessians
  uint64_t forward = 0;        // the working memory of one batch through a block
  uint64_t solver = 0;         // the largest module's solver workspace
  uint64_t activations = 0;    // all batches' block inputs
  uint64_t staging = 0;        // host: a finished layer's tensors on their way to the staging folder
  // The least each side needs with the activations off it, and where the activations go.
  uint64_t deviceNeed = 0, hostNeed = 0;
  ActivationPlacement placement = ActivationPlacement::Device;
  // Whether the host has room for a copy of all the activations beside everything else, so that the next block's
  // inputs (saved for a resume) are copied and written beside the pass; otherwise they are written from where
  // they live, one batch at a time, in the pass.
  bool inputsCopied = false;
  // Linears of a block solved at once on CUDA (SequentialPassOptions::solverThreads): as many as the device
  // budget holds the solvers of, beyond the one counted in `solver`; 1 on the CPU.
  int solverThreads = 1;
  std::string summary() const;   // "block 872 MiB, Hessians 1.02 GiB, ... activations on the device"
};

// `shapes`: the pass's activation shapes (calib/SequentialPass.h activationShapes). Throws InputError when a
// budget is below the least one block needs, saying how much that is and of what it is made.
CompressMemoryPlan planCompressMemory(const ModelConfig& config, const RuntimeOptions& runtime,
                                      const MemoryBudget& budget, const std::vector<std::vector<int64_t>>& shapes);


}  // namespace pareto
