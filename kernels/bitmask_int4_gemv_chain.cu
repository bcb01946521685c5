// bitmask_int4_gemv_chain: several bitmask_int4_gemv launches of one batch in one launch of the chain kernel
// (GemvProblem.h GemvChainLink, GemvDriver.cuh ringChainKernel), in a file of its own so that its kernels compile
// beside the single launches' (BitmaskInt4Formats.cuh).
#include "BitmaskInt4Formats.cuh"

namespace pareto::kernels {

std::string runBitmaskInt4GemvChain(const GemvChainLink<BitmaskInt4GemvWeight>* links, int count,
                                    const GemvChainWorkspace& ws, CUstream_st* stream) {
  if (auto e = checkGemvChain(links, count, ws, &checkBitmaskInt4Gemv); !e.empty()) return e;
  bool folds = false;
  for (int i = 0; i < count; ++i) {
    const BitmaskInt4GemvWeight& w = links[i].weight;
    if (!bitmaskInt4UsesTensorCores(w.n, w.m, w.groupSize, links[i].problem.cols))
      return "bitmask_int4_gemv chain link " + std::to_string(i) + ": " + std::to_string(w.n) + ":" +
             std::to_string(w.m) + " with groups of " + std::to_string(w.groupSize) +
             " runs on the FFMA kernel, which has no chain (the chain runs the tensor-core ring kernel)";
    folds = folds || foldsWork(links[i].problem);
  }
  using bitmask_int4_gemv::launchChain;
  constexpr auto F16 = ActivationType::Float16, BF16 = ActivationType::BFloat16;
  const bool f16 = links[0].problem.type == F16;
  if (folds) return f16 ? launchChain<F16, true>(links, count, ws, stream) : launchChain<BF16, true>(links, count, ws, stream);
  return f16 ? launchChain<F16, false>(links, count, ws, stream) : launchChain<BF16, false>(links, count, ws, stream);
}

}  // namespace pareto::kernels
