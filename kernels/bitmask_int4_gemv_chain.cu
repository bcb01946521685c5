// bitmask_int4_gemv_chain: several bitmask_int4_gemv launches of one batch in one launch of the chain kernel
// (GemvProblem.h GemvChainLink, GemvDriver.cuh ringChainKernel), in a file of its own so that its kernels compile
// beside the single launches' (BitmaskInt4Formats.cuh).
#include "BitmaskInt4Formats.cuh"

namespace pareto::kernels {

std::string runBitmaskInt4GemvChain(const GemvChainLink<BitmaskInt4GemvWeight>* links, int count,
                                    const GemvChainWorkspace& ws, CUstream_st* stream) {
  if (auto e = checkGemvChain(links, count, ws, &checkBitmaskInt4Gemv); !e.empty()) return e;
  for (int i = 0; i < count; ++i) {
    const BitmaskInt4GemvWeight& w = links[i].weight;
    const std::string at = "bitmask_int4_gemv chain link " + std::to_string(i) + ": ";
    if (!bitmaskInt4UsesTensorCores(w.n, w.m, w.groupSize, links[i].problem.cols))
      return at + std::to_string(w.n) + ":" + std::to_string(w.m) + " with groups of " + std::to_string(w.groupSize) +
             " runs on the FFMA kernel, which has no chain (the chain runs the tensor-core ring kernel)";
    // As quant_group_gemv_chain.cu: folded links are refused, not run unfused.
    if (foldsWork(links[i].problem))
      return at + "the chain runs plain GEMVs (no folded norm, SiLU·mul or residual add)";
  }
  return links[0].problem.type == ActivationType::Float16
             ? bitmask_int4_gemv::launchChain<ActivationType::Float16, false>(links, count, ws, stream)
             : bitmask_int4_gemv::launchChain<ActivationType::BFloat16, false>(links, count, ws, stream);
}

}  // namespace pareto::kernels
