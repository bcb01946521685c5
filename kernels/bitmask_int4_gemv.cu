// bitmask_int4_gemv: the entry point and the plain launches (BitmaskInt4Formats.cuh has the kernels' formats;
// bitmask_int4_gemv_folded.cu the launches that fold the decode step's ops).
#include "BitmaskInt4Formats.cuh"

namespace pareto::kernels {

std::string runBitmaskInt4Gemv(const GemvProblem& p, const BitmaskInt4GemvWeight& w, const GemvSplit& s,
                               float* partials, int* counters, CUstream_st* stream) {
  if (auto e = checkBitmaskInt4Gemv(p, w); !e.empty()) return e;
  if (foldsWork(p))
    return bitmask_int4_gemv::launchFolded(p, w, s, partials, counters, stream);
  return bitmask_int4_gemv::launchAny<false>(p, w, s, partials, counters, stream);
}

}  // namespace pareto::kernels
