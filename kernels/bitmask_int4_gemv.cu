// bitmask_int4_gemv: the entry point and the plain launches (BitmaskInt4Formats.cuh has the kernels' formats;
// bitmask_int4_gemv_folded.cu the launches that fold the decode step's ops).
#include "BitmaskInt4Formats.cuh"

namespace pareto::kernels {

std::string runBitmaskInt4Gemv(const GemvProblem& p, const BitmaskInt4GemvWeight& w, const GemvSplit& s,
                               float* partials, int* counters, CUstream_st* stream) {
  if (auto e = checkBitmaskInt4Gemv(p, w); !e.empty()) return e;
  if (bitmaskInt4UsesTensorCores(w.n, w.m, w.groupSize, p.cols) ? !w.metadata : !w.masks)
    return w.metadata ? "missing masks: the FFMA kernel reads the masks"
                      : "missing metadata: the 2:4 tensor-core kernel reads the masks as sparse-MMA metadata "
                        "(bitmaskInt4MmaMetadata)";
  if (foldsWork(p))
    return bitmask_int4_gemv::launchFolded(p, w, s, partials, counters, stream);
  return bitmask_int4_gemv::launchAny<false>(p, w, s, partials, counters, stream);
}

}  // namespace pareto::kernels
