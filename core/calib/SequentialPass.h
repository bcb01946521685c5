// The layer-wise sequential pass of SparseGPT/GPTQ: block i sees the inputs produced by the already-processed
// blocks < i, so each block is calibrated against the errors its predecessors made. Only one block's
// activations (for all calibration sequences) are resident at a time.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "calib/CalibrationSet.h"
#include "calib/HessianAccumulator.h"
#include "model/LlamaModel.h"
#include "util/Progress.h"

namespace pareto {

// Called for every linear of a block, in execution order, with its current weight [out, in] and the Hessian of
// its input. Returns the new weight, or an undefined tensor to keep the weight as it is.
using ModuleCallback =
    std::function<at::Tensor(const std::string& name, const at::Tensor& weight, const HessianAccumulator& hessian)>;

struct SequentialPassOptions {
  int64_t batch = 0;   // calibration sequences per forward; 0 picks one for the device
  ProgressCallback progress;
  const CancelToken* cancel = nullptr;   // checked between blocks
  // Resuming: blocks [0, restoredLayers) were processed by an earlier run. For each, restoreLayer installs its
  // weights as that run left them, and the pass only carries the activations through it (no Hessians, no
  // callback), so the blocks after it see exactly the inputs an uninterrupted pass gives them.
  int64_t restoredLayers = 0;
  std::function<void(int64_t layer)> restoreLayer;
  // Called once every linear of a block has its new weight, before the next block starts.
  std::function<void(int64_t layer)> layerDone;
};

// Runs the pass over `data`, installing what the callback returns. Throws Cancelled between blocks; the model
// then holds the blocks already processed (callers that must not keep partial work load a fresh model).
void runSequentialPass(LlamaModel& model, const CalibrationSet& data, const ModuleCallback& onModule,
                       const SequentialPassOptions& opts = {});

// Hessians of the unchanged (dense) model for several calibration sets at once, layer by layer, so that only one
// layer's Hessians are alive: per input group, `modules` are the linears reading it and `perSet[k]` its
// Hessian under sets[k].
using HessianObserver = std::function<void(int64_t layer, LinearGroup group, const std::vector<std::string>& modules,
                                           const std::vector<const HessianAccumulator*>& perSet)>;
void observeHessians(const LlamaModel& model, const std::vector<const CalibrationSet*>& sets,
                     const HessianObserver& observer, const SequentialPassOptions& opts = {});

}  // namespace pareto
