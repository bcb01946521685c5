// Seconds of one batch-1 decode step for an allocation of formats, the cost a tokens-per-second budget searches
// over (search/Search.h). The step is what the decode runtime (decode/DecodeModel.h) launches: one GEMV a linear
// group (q, k, v of a layer fused when they share a format, likewise gate and up, o and down alone), plus the rest
// of the step (attention, norms, the head, launch gaps).
//
// A GEMV's seconds, from the best measurements the device has stored (compress/RecipeEstimate.h DecodeBandwidth):
//   - single GEMVs timed alone (`bench kernels --per-shape`): the measured time of that shape, else a fixed cost
//     plus a cost per weight fitted to the kernel's measured shapes. Small GEMVs cost mostly their launch and
//     latency, which bytes alone miss: ref-small's dense linears ran at 6% of copy bandwidth on an H200. Used for
//     every kernel once dense has such rows (kernels without them are then unmeasured, not mixed in by bytes);
//   - else the kernel's bandwidth over a whole benchmark step (`bench kernels`), else one copy bandwidth: bytes
//     over bandwidth, the model of compress/RecipeEstimate.h.
// The rest of the step: the dense model's measured decode step (`bench decode --model`) less the dense linears'
// own predicted seconds, when the store has one for this model and device; else the bytes the step reads besides
// the linears at the dense kernel's bandwidth (which leaves out everything that is not bytes).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compress/RecipeEstimate.h"

namespace pareto {

class DecodeTimeModel {
 public:
  explicit DecodeTimeModel(const DecodeBandwidth& bandwidth);

  bool known() const { return perGemv_ || !bandwidth_.empty() || one_ > 0; }
  bool perGemv() const { return perGemv_; }
  // Where the seconds come from, shown with every predicted tokens/s.
  std::string source() const;

  // Seconds of one GEMV of `kernel` (runtime/KernelBenchmark.h names; "" for a layout no kernel runs) over a
  // rows × cols weight storing `bytes`. NaN when no measurement covers the kernel.
  double gemvSeconds(const std::string& kernel, int64_t rows, int64_t cols, uint64_t bytes) const;

  // Seconds of the step besides the searched linears, given what the model predicts for them dense
  // (`denseLinearSeconds`) and the bytes the step reads besides them.
  double otherSeconds(double denseLinearSeconds, uint64_t otherBytes) const;
  // Whether otherSeconds comes from a measured decode step.
  bool measuredStep() const { return denseStep_ > 0; }

 private:
  struct GemvFit {
    std::map<std::pair<int64_t, int64_t>, double> exact;   // (rows, cols) → seconds
    double fixed = 0, perWeight = 0;                       // seconds = fixed + perWeight · rows · cols
  };
  std::map<std::string, GemvFit> gemv_;
  bool perGemv_ = false;
  std::map<std::string, double> bandwidth_;   // bytes/s over a whole step, by kernel (only with "dense")
  double one_ = 0;
  double denseStep_ = 0;
  std::string device_, bandwidthSource_, stepSource_;
};

}  // namespace pareto
