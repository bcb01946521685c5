// The calibration set a recipe's "calibration" block names (text windows, decode-time continuations generated
// from prompts, or continuations read from a file), built one way for every job that calibrates from a recipe
// (compress, search), so that the same block gives the same Hessians everywhere.
#pragma once

#include <cstdint>

#include "calib/CalibrationSet.h"
#include "compress/Recipe.h"
#include "model/LoadedModel.h"
#include "util/Progress.h"

namespace pareto {

class ProcessGroup;

// Decode calibration from prompts generates with `m`'s model, which must then hold its weights whole; text and
// continuation files need only the tokenizer and config. `batch`: sequences a generation step (0: the default).
CalibrationSet recipeCalibration(const LoadedModel& m, const CalibrationSpec& spec, int64_t batch,
                                 const ProgressCallback& progress = {}, const CancelToken* cancel = nullptr);

// This rank's share of the same set when the ranks of `group` share the work (calib/SequentialPass.h): decode
// calibration from prompts generates only this rank's prompts (decodeCalibrationShare); text windows and
// continuation files, cheap to build, are built whole and dealt out (sequence k to rank k mod size). The shares
// together are the set recipeCalibration gives.
CalibrationSet recipeCalibrationShare(const LoadedModel& m, const CalibrationSpec& spec, int64_t batch,
                                      ProcessGroup& group, const ProgressCallback& progress = {},
                                      const CancelToken* cancel = nullptr);

}  // namespace pareto
