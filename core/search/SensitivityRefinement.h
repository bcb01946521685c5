// The refinement of a sensitivity table (issue 24, point 1, as AIMET's per-layer analysis measures it): per module
// m, the KL to dense of the model with m alone replaced by one reference candidate's solution,
//
//   KL_m = mean over positions of KL(P_dense ‖ P_m)  on the first `windows` calibration sequences,
//   scale_m = KL_m / outputError_m(reference),   loss(m, c) = outputError(m, c) · scale_m  for every candidate c,
//
// so that each loss predicts the KL its candidate adds to the model's output. The output error alone ranks a
// module's candidates well but not modules against each other (search/Sensitivity.h); the scale carries what
// follows the module (the softmax, the SiLU gate, the residual stream) into one unit. Summing the scaled losses
// over modules assumes their KLs add, which holds to first order for small independent errors.
//
// With `modules` = K > 0 only the K modules of largest reference output error are measured; every other module
// takes the median scale of the measured modules of its kind (the last part of its name, "o_proj"), or of all
// measured modules when none of its kind was.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "search/SearchBase.h"
#include "search/Sensitivity.h"
#include "util/Progress.h"

namespace pareto {

class LlamaModel;
struct CalibrationSet;

// The reference candidate: options.reference when named, else, of the non-dense candidates that apply to every
// module, the one of median total bytes (the lower of the two middle ones; ties by list order), so that the
// measured error is neither lost in rounding (8-bit) nor out of the small-error regime (2:4, 3-bit). Throws
// InputError when no candidate applies to every module, or the named one does not.
size_t referenceCandidate(const SensitivityTable& table, const SearchBase& base);

// Fills every module's scale and referenceKl and multiplies every cell's output error by its module's scale
// (cell.loss). `solutions`: the reference candidate's solved weight per module name (the sensitivity pass keeps
// them). Runs on the model's device; the model's weights are restored after each module, also on an exception.
// Stage "refine" of `progress`; `cancel` is checked between modules and windows (throws Cancelled).
void refineSensitivity(SensitivityTable& table, LlamaModel& model, const CalibrationSet& data,
                       const RefineOptions& options, size_t reference,
                       const std::map<std::string, at::Tensor>& solutions, const ProgressCallback& progress,
                       const CancelToken* cancel);

}  // namespace pareto
