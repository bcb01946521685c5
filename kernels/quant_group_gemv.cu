// quant_group_gemv: the entry point and the plain launches (QuantGroupFormats.cuh has the kernels' formats;
// quant_group_gemv_folded.cu the launches that fold the decode step's ops).
#include "QuantGroupFormats.cuh"

namespace pareto::kernels {

std::string runQuantGroupGemv(const GemvProblem& p, const QuantGroupGemvWeight& w, const GemvSplit& s,
                              float* partials, int* counters, CUstream_st* stream) {
  if (auto e = checkQuantGroupGemv(p, w); !e.empty()) return e;
  if (foldsWork(p))
    return quant_group_gemv::launchFolded(p, w, s, partials, counters, stream);
  return quant_group_gemv::launchAny<false>(p, w, s, partials, counters, stream);
}

}  // namespace pareto::kernels
