#include "eval/EvalMemory.h"

#include "util/Error.h"
#include "util/InputFile.h"

namespace pareto {

std::string EvalMemoryPlan::summary() const {
  return std::string(streamed ? "streamed block by block" : "whole") + " (whole " + formatBytes(wholeBytes) +
         ", streamed " + formatBytes(streamedBytes) + "; hidden states " + formatBytes(hiddenBytes) +
         (streamed ? std::string(" on the ") + activationPlacementName(placement) : std::string()) + ")";
}

EvalMemoryPlan planEvalMemory(const ModelConfig& c, const RuntimeOptions& runtime, const MemoryBudget& budget, int models,
                              int64_t sequences, int64_t length, int64_t batch) {
  const uint64_t e = c10::elementSize(runtime.dtype);
  const uint64_t H = c.hiddenSize, F = c.intermediateSize, tokens = uint64_t(batch) * length;
  // One batch through a block (as compress/CompressMemory.cpp counts it) and its float32 logits and log-softmax
  // (twice with a dense reference).
  const uint64_t forward = tokens * (4 * H + 3 * F) * e + 4 * uint64_t(batch) * c.numHeads * length * length * 4;
  const uint64_t logits = 2 * uint64_t(models) * tokens * c.vocabSize * 4;
  EvalMemoryPlan p;
  p.wholeBytes = withHeadroom(models * modelWeightBytes(c, runtime.dtype) + forward + logits);
  p.streamedBytes = withHeadroom(models * (blockWeightBytes(c, runtime.dtype) + embeddingBytes(c, runtime.dtype)) +
                                 forward + logits);
  p.hiddenBytes = uint64_t(models) * sequences * length * H * e;
  const bool cuda = runtime.device.is_cuda();
  const uint64_t device = cuda ? budget.gpuBytes : budget.hostBytes;   // where the weights live
  if (device == 0 || p.wholeBytes <= device) return p;
  if (device < p.streamedBytes)
    throw InputError(std::string(cuda ? "--max-gpu-memory " : "--max-host-memory ") + formatBytes(device) +
                     " is less than the " + formatBytes(p.streamedBytes) +
                     " the model needs streamed (one block and the output head, one batch's forward and logits); "
                     "raise it, or lower --batch");
  p.streamed = true;
  const uint64_t deviceRoom = device - p.streamedBytes;
  const uint64_t hostRoom = budget.hostBytes == 0 ? UINT64_MAX : (cuda ? budget.hostBytes : deviceRoom);
  if (withHeadroom(p.hiddenBytes) <= deviceRoom)
    p.placement = ActivationPlacement::Device;
  else if (cuda && withHeadroom(p.hiddenBytes) <= hostRoom)
    p.placement = ActivationPlacement::Host;
  else
    p.placement = ActivationPlacement::Scratch;
  return p;
}

}  // namespace pareto
