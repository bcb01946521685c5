// quant_group_gemv_chain: several quant_group_gemv launches of one batch in one launch of the chain kernel
// (GemvProblem.h GemvChainLink, GemvDriver.cuh ringChainKernel), in a file of its own so that its kernels compile
// beside the single launches' (QuantGroupFormats.cuh).
#include "QuantGroupFormats.cuh"

namespace pareto::kernels {

std::string runQuantGroupGemvChain(const GemvChainLink<QuantGroupGemvWeight>* links, int count,
                                   const GemvChainWorkspace& ws, CUstream_st* stream) {
  if (auto e = checkGemvChain(links, count, ws, &checkQuantGroupGemv); !e.empty()) return e;
  const int bits = links[0].weight.bits;
  bool folds = false;
  for (int i = 0; i < count; ++i) {
    if (links[i].weight.bits != bits) return "quant_group_gemv chain: every link has the first link's code width";
    folds = folds || foldsWork(links[i].problem);
  }
  const bool f16 = links[0].problem.type == ActivationType::Float16;
  using quant_group_gemv::launchChain;
  constexpr auto F16 = ActivationType::Float16, BF16 = ActivationType::BFloat16;
  if (bits == 4) {
    if (folds) return f16 ? launchChain<4, F16, true>(links, count, ws, stream) : launchChain<4, BF16, true>(links, count, ws, stream);
    return f16 ? launchChain<4, F16, false>(links, count, ws, stream) : launchChain<4, BF16, false>(links, count, ws, stream);
  }
  if (folds) return f16 ? launchChain<8, F16, true>(links, count, ws, stream) : launchChain<8, BF16, true>(links, count, ws, stream);
  return f16 ? launchChain<8, F16, false>(links, count, ws, stream) : launchChain<8, BF16, false>(links, count, ws, stream);
}

}  // namespace pareto::kernels
