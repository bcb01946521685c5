#include "compress/CompressMemory.h"

#include <algorithm>

#include "util/Error.h"
#include "util/InputFile.h"

namespace pareto {
namespace {

// A solver's workspace for a [rows, cols] weight: the damped Hessian, the Cholesky factor and U (and a transient
// of the same size while U is solved for); the weight, its update and error in fp32.
uint64_t solverBytes(uint64_t rows, uint64_t cols) { return 3 * cols * cols * 4 + 4 * rows * cols * 4; }

// The solvers of a block's seven linears, largest first.
std::vector<uint64_t> blockSolvers(const ModelConfig& c) {
  const uint64_t H = c.hiddenSize, F = c.intermediateSize, Q = uint64_t(c.numHeads) * c.headDim,
                 KV = uint64_t(c.numKvHeads) * c.headDim;
  std::vector<uint64_t> s = {solverBytes(Q, H),  solverBytes(KV, H), solverBytes(KV, H), solverBytes(H, Q),
                             solverBytes(F, H),  solverBytes(F, H),  solverBytes(H, F)};
  std::sort(s.rbegin(), s.rend());
  return s;
}

}  // namespace

std::string CompressMemoryPlan::summary() const {
  return "block weights " + formatBytes(blockWeights) + ", Hessians " + formatBytes(hessians) + ", forward of one batch " +
         formatBytes(forward) + ", solver " + formatBytes(solver) + ", activations " + formatBytes(activations) +
         " (" + activationPlacementName(placement) + ")" +
         (solverThreads > 1 ? ", " + std::to_string(solverThreads) + " solvers at once" : "");
}

CompressMemoryPlan planCompressMemory(const ModelConfig& c, const RuntimeOptions& runtime, const MemoryBudget& budget,
                                      const std::vector<std::vector<int64_t>>& shapes) {
  const uint64_t e = c10::elementSize(runtime.dtype);
  const uint64_t H = c.hiddenSize, F = c.intermediateSize, Q = uint64_t(c.numHeads) * c.headDim;
  CompressMemoryPlan p;
  p.blockWeights = blockWeightBytes(c, runtime.dtype);
  p.hessians = 4 * (2 * H * H + Q * Q + F * F);
  uint64_t batchTokens = 0, batchSeqs = 0, longest = 0;
  for (const auto& s : shapes) {
    batchTokens = std::max<uint64_t>(batchTokens, uint64_t(s[0]) * s[1]);
    batchSeqs = std::max<uint64_t>(batchSeqs, uint64_t(s[0]));
    longest = std::max<uint64_t>(longest, uint64_t(s[1]));
  }
  // Input and output of the block, the MLP's gate, up and product; the attention scores, scaled, masked and their
  // softmax (up to four [b, heads, T, T] alive, fp32 at most); the fp32 input and its weighted copy the Hessian
  // accumulation makes of the widest input.
  p.forward = batchTokens * (4 * H + 3 * F) * e + 4 * batchSeqs * c.numHeads * longest * longest * 4 +
              2 * batchTokens * F * 4;
  // The largest module by columns² (the down projection's F×F Hessian): damped copy, Cholesky factor, inverse;
  // its weight, update and error in fp32.
  const uint64_t cols = std::max(F, std::max(H, Q)), rows = cols == F ? H : std::max(F, H);
  p.solver = solverBytes(rows, cols);
  p.activations = ActivationStore::bytesOf(shapes, runtime.dtype);
  // A finished layer on its way to the staging folder (its stored parts: at most 4 bytes a weight, a float32
  // checkpoint's module kept dense), and the batch of the next block's inputs being saved for a resume.
  p.staging = p.blockWeights / e * 4 + batchTokens * H * e;

  const uint64_t work = p.blockWeights + p.hessians + std::max(p.forward, p.solver);
  const bool cuda = runtime.device.is_cuda();
  p.deviceNeed = cuda ? withHeadroom(work) : 0;
  p.hostNeed = withHeadroom(cuda ? p.staging + batchTokens * H * e : work + p.staging);
  auto refuse = [&](const char* option, uint64_t budget, uint64_t need) {
    throw InputError(std::string(option) + " " + formatBytes(budget) + " is less than the " + formatBytes(need) +
                     " one block needs (" + p.summary() + "); raise it" +
                     (p.forward > p.solver ? ", or lower --batch" : ""));
  };
  if (cuda && budget.gpuBytes != 0 && budget.gpuBytes < p.deviceNeed) refuse("--max-gpu-memory", budget.gpuBytes, p.deviceNeed);
  if (budget.hostBytes != 0 && budget.hostBytes < p.hostNeed) refuse("--max-host-memory", budget.hostBytes, p.hostNeed);

  const uint64_t deviceRoom = budget.gpuBytes == 0 ? UINT64_MAX : budget.gpuBytes - p.deviceNeed;
  const uint64_t hostRoom = budget.hostBytes == 0 ? UINT64_MAX : budget.hostBytes - p.hostNeed;
  if (cuda && withHeadroom(p.activations) <= deviceRoom)
    p.placement = ActivationPlacement::Device;
  else if (withHeadroom(p.activations) <= hostRoom)
    p.placement = cuda ? ActivationPlacement::Host : ActivationPlacement::Device;
  else
    p.placement = ActivationPlacement::Scratch;

  {
    uint64_t room = hostRoom;
    if (room != UINT64_MAX && p.placement == ActivationPlacement::Host) room -= withHeadroom(p.activations);
    p.inputsCopied = p.placement != ActivationPlacement::Scratch && withHeadroom(p.activations) <= room;
  }
  if (cuda) {
    // More solvers at once while the next one's workspace fits what the budget leaves (the first is in `work`).
    uint64_t room = deviceRoom;
    if (p.placement == ActivationPlacement::Device && room != UINT64_MAX) room -= withHeadroom(p.activations);
    const std::vector<uint64_t> solvers = blockSolvers(c);
    for (size_t i = 1; i < solvers.size(); ++i) {
      if (room != UINT64_MAX && withHeadroom(solvers[i]) > room) break;
      if (room != UINT64_MAX) room -= withHeadroom(solvers[i]);
      ++p.solverThreads;
    }
  }
  return p;
}

}  // namespace pareto
