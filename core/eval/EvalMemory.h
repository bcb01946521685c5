// Whether an evaluation that runs the model over many sequences (perplexity) holds its model whole or streams
// it block by block, and where the hidden states then live, planned against --max-gpu-memory / --max-host-memory
// (model/MemoryBudget.h). Whole: every weight, plus one batch's forward and logits. Streamed: one block and the
// output head per model, one batch's forward and logits, and the hidden states of every sequence (on the device
// if they fit beside that, else host memory, else a scratch file).
#pragma once

#include <cstdint>
#include <string>

#include "calib/ActivationStore.h"
#include "checkpoint/ModelConfig.h"
#include "model/Device.h"
#include "model/MemoryBudget.h"

namespace pareto {

struct EvalMemoryPlan {
  bool streamed = false;
  ActivationPlacement placement = ActivationPlacement::Device;
  uint64_t wholeBytes = 0, streamedBytes = 0, hiddenBytes = 0;
  std::string summary() const;
};

// `models`: 1, or 2 with a dense reference of the same shape. `sequences` of `length` tokens, `batch` a forward.
// Throws InputError when even the streamed form does not fit, naming the budget and the size one block needs.
EvalMemoryPlan planEvalMemory(const ModelConfig& config, const RuntimeOptions& runtime, const MemoryBudget& budget,
                              int models, int64_t sequences, int64_t length, int64_t batch);

}  // namespace pareto
