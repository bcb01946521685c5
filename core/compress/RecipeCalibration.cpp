#include "compress/RecipeCalibration.h"

#include "calib/ContinuationsFile.h"
#include "calib/DecodeCalibration.h"
#include "calib/TextCalibration.h"

namespace pareto {

CalibrationSet recipeCalibration(const LoadedModel& m, const CalibrationSpec& spec, int64_t batch,
                                 const ProgressCallback& progress, const CancelToken* cancel) {
  if (spec.source == "text") {
    TextCalibrationOptions o;
    o.window = spec.window;
    o.tokens = spec.tokens;
    o.seed = spec.seed;
    return textCalibration(*m.tokenizer, spec.file, o);
  }
  DecodeCalibrationOptions o;
  o.tokens = spec.tokens;
  o.maxNewTokens = spec.maxNewTokens;
  o.seed = spec.seed;
  o.batch = batch;
  o.eosTokenIds = m.eosTokenIds;
  o.bosTokenId = m.config.bosTokenId;
  if (spec.fromContinuations)
    return continuationCalibration(readContinuationsFile(spec.file, m.config.vocabSize), o, spec.file);
  return decodeCalibration(*m.model, *m.tokenizer, readPrompts(spec.file), o, progress, cancel);
}

}  // namespace pareto
