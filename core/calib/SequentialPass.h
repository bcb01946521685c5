// The layer-wise sequential pass of SparseGPT/GPTQ: block i sees the inputs produced by the already-processed
// blocks < i, so each block is calibrated against the errors its predecessors made. Only one block's
// activations (for all calibration sequences) exist at a time, where the options place them
// (calib/ActivationStore.h). On a streamed model (LlamaModel's streamed constructor) each block's weights are read
// when its turn comes and freed once it is done, so a model larger than the device, or the host, passes through
// one block at a time.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "calib/ActivationStore.h"
#include "calib/CalibrationSet.h"
#include "calib/HessianAccumulator.h"
#include "model/LlamaModel.h"
#include "util/Progress.h"

namespace pareto {

class ProcessGroup;

// Called for every linear of a block with its current weight [out, in] and the Hessian of its input. Returns the
// new weight, or an undefined tensor to keep the weight as it is. With SequentialPassOptions::solverThreads > 1
// the linears of a block are handed to it concurrently (each from its own thread, on its own CUDA stream), so a
// callback that keeps state must guard it; the weights are installed in execution order once all returned.
using ModuleCallback =
    std::function<at::Tensor(const std::string& name, const at::Tensor& weight, const HessianAccumulator& hessian)>;

struct SequentialPassOptions {
  int64_t batch = 0;   // calibration sequences per forward; 0 picks one for the device
  ProgressCallback progress;
  const CancelToken* cancel = nullptr;   // checked between blocks
  // Resuming: blocks [0, restoredLayers) were processed by an earlier run, which saved the inputs of block
  // restoredLayers (blockInputs). restoredInput(i) gives batch i's, and the pass starts at that block, so the
  // blocks after it see exactly the inputs an uninterrupted pass gives them, and the earlier blocks are not read.
  int64_t restoredLayers = 0;
  std::function<at::Tensor(size_t batch)> restoredInput;
  // Called after each block but the last, once its outputs have replaced the inputs: the next block's inputs,
  // batch by batch (`input(i)` on the device, of `shapes[i]` in `dtype`), for a later resume.
  struct BlockInputs {
    std::vector<std::vector<int64_t>> shapes;
    c10::ScalarType dtype;
    std::function<at::Tensor(size_t batch)> input;
  };
  std::function<void(int64_t nextLayer, const BlockInputs& inputs)> blockInputs;
  // Called once every linear of a block has its new weight, before the next block starts (and before a streamed
  // model frees the block).
  std::function<void(int64_t layer)> layerDone;
  // Where the block inputs live between blocks; Scratch puts them in a file in scratchDir (default: the system's
  // temporary folder).
  ActivationPlacement activations = ActivationPlacement::Device;
  std::string scratchDir;
  // A pass spread over processes (dist/ProcessGroup.h): `data` is this rank's share of the calibration set (it
  // may be empty). Every rank runs each block on its share, the Hessians are summed over the ranks, each linear
  // is solved by one rank (moduleRanks; the callback runs there only) and its new weight broadcast, and each
  // rank carries its own sequences on to the next block. A cancel seen by any rank stops all at the same block.
  ProcessGroup* group = nullptr;
  // How many linears of a block are solved at once. On CUDA a module's solve is a chain of small dependent steps
  // (factorisations checked on the host, one lazy block after another) that leaves most of the GPU idle;
  // independent modules on their own threads and streams overlap those chains. On the CPU each ATen op already
  // uses every core, so planners leave it at 1 there.
  int solverThreads = 1;
  // When set, the seconds of each stage of a block (read, observe, solve, advance, finish) are added to it, summed
  // over the blocks the pass computes: where a long pass spends its time.
  std::map<std::string, double>* stageSeconds = nullptr;
};

// Which rank solves each linear of `layer` (in layerLinears order) when `ranks` processes share the work: the
// costliest first (a solver's work grows as rows x columns^2), each to the rank with the least so far.
std::vector<int> moduleRanks(const LlamaModel& model, int64_t layer, int ranks);

// The padded shapes [b, T, hidden] of the batches the pass forms from `data` with `batch` sequences a forward
// (0: the default for the device), as it stores them: what a memory plan counts.
std::vector<std::vector<int64_t>> activationShapes(const CalibrationSet& data, int64_t hiddenSize, int64_t batch,
                                                   const c10::Device& device);
// The batch the pass uses for `requested` sequences a forward on `device` (0: the default, 32 on CUDA, 8 on the CPU).
int64_t passBatch(int64_t requested, const c10::Device& device);

// Runs the pass over `data`, installing what the callback returns. Throws Cancelled between blocks; the model
// then holds the blocks already processed (callers that must not keep partial work load a fresh model).
void runSequentialPass(LlamaModel& model, const CalibrationSet& data, const ModuleCallback& onModule,
                       const SequentialPassOptions& opts = {});

// Hessians of the unchanged (dense) model for several calibration sets at once, layer by layer, so that only one
// layer's Hessians are alive: per input group, `modules` are the linears reading it and `perSet[k]` its
// Hessian under sets[k].
using HessianObserver = std::function<void(int64_t layer, LinearGroup group, const std::vector<std::string>& modules,
                                           const std::vector<const HessianAccumulator*>& perSet)>;
void observeHessians(LlamaModel& model, const std::vector<const CalibrationSet*>& sets,
                     const HessianObserver& observer, const SequentialPassOptions& opts = {});

}  // namespace pareto
