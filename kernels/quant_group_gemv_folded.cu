// quant_group_gemv's launches with the decode step's ops folded in (an RMSNorm or SiLU·mul while x is staged, the
// residual add while y is stored): the kernels with the folds' code, in a file of their own so that they compile
// beside the plain ones (QuantGroupFormats.cuh).
#include "QuantGroupFormats.cuh"

namespace pareto::kernels::quant_group_gemv {

std::string launchFolded(const GemvProblem& p, const QuantGroupGemvWeight& w, const GemvSplit& s, float* partials,
                         int* counters, cudaStream_t stream) {
  return launchAny<true>(p, w, s, partials, counters, stream);
}

}  // namespace pareto::kernels::quant_group_gemv
