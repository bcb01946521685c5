// Teacher-forced calibration from a text file, as GPTQ/SparseGPT do with C4 or WikiText: windows of the
// tokenized text, every position counts.
#pragma once

#include <string>

#include "calib/CalibrationSet.h"

namespace pareto {

struct TextCalibrationOptions {
  int64_t window = 512;
  int64_t tokens = 16384;   // positions that reach the Hessian; the last window is cut to make it exact
  uint64_t seed = 0;        // which windows of the file are taken
};

// Throws InputError when the file cannot be read or is too short for the requested tokens.
CalibrationSet textCalibration(const Tokenizer& tokenizer, const std::string& textFile,
                               const TextCalibrationOptions& opts);

}  // namespace pareto
