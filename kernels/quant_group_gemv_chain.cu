// quant_group_gemv_chain: several quant_group_gemv launches of one batch in one launch of the chain kernel
// (GemvProblem.h GemvChainLink, GemvDriver.cuh ringChainKernel), in a file of its own so that its kernels compile
// beside the single launches' (QuantGroupFormats.cuh).
#include "QuantGroupFormats.cuh"

namespace pareto::kernels {

std::string runQuantGroupGemvChain(const GemvChainLink<QuantGroupGemvWeight>* links, int count,
                                   const GemvChainWorkspace& ws, CUstream_st* stream) {
  if (auto e = checkGemvChain(links, count, ws, &checkQuantGroupGemv); !e.empty()) return e;
  const int bits = links[0].weight.bits;
  for (int i = 0; i < count; ++i) {
    if (links[i].weight.bits != bits) return "quant_group_gemv chain: every link has the first link's code width";
    // The folds' kernels would read an earlier link's residual stream through L2 (InputReader's kCoherent), but
    // they are not compiled for the chain yet: a folded link is refused, not run unfused.
    if (foldsWork(links[i].problem))
      return "quant_group_gemv chain link " + std::to_string(i) + ": the chain runs plain GEMVs (no folded norm, "
             "SiLU·mul or residual add)";
  }
  const bool f16 = links[0].problem.type == ActivationType::Float16;
  if (bits == 4)
    return f16 ? quant_group_gemv::launchChain<4, ActivationType::Float16, false>(links, count, ws, stream)
               : quant_group_gemv::launchChain<4, ActivationType::BFloat16, false>(links, count, ws, stream);
  return f16 ? quant_group_gemv::launchChain<8, ActivationType::Float16, false>(links, count, ws, stream)
             : quant_group_gemv::launchChain<8, ActivationType::BFloat16, false>(links, count, ws, stream);
}

}  // namespace pareto::kernels
