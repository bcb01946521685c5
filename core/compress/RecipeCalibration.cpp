#include "compress/RecipeCalibration.h"

#include "calib/ContinuationsFile.h"
#include "calib/DecodeCalibration.h"
#include "calib/TextCalibration.h"
#include "dist/ProcessGroup.h"

namespace pareto {
namespace {

DecodeCalibrationOptions decodeOptions(const LoadedModel& m, const CalibrationSpec& spec, int64_t batch) {
  DecodeCalibrationOptions o;
  o.tokens = spec.tokens;
  o.maxNewTokens = spec.maxNewTokens;
  o.seed = spec.seed;
  o.batch = batch;
  o.eosTokenIds = m.eosTokenIds;
  o.bosTokenId = m.config.bosTokenId;
  return o;
}

}  // namespace

CalibrationSet recipeCalibration(const LoadedModel& m, const CalibrationSpec& spec, int64_t batch,
                                 const ProgressCallback& progress, const CancelToken* cancel) {
  if (spec.source == "text") {
    TextCalibrationOptions o;
    o.window = spec.window;
    o.tokens = spec.tokens;
    o.seed = spec.seed;
    return textCalibration(*m.tokenizer, spec.file, o);
  }
  const DecodeCalibrationOptions o = decodeOptions(m, spec, batch);
  if (spec.fromContinuations)
    return continuationCalibration(readContinuationsFile(spec.file, m.config.vocabSize), o, spec.file);
  return decodeCalibration(*m.model, *m.tokenizer, readPrompts(spec.file), o, progress, cancel);
}

CalibrationSet recipeCalibrationShare(const LoadedModel& m, const CalibrationSpec& spec, int64_t batch,
                                      ProcessGroup& group, const ProgressCallback& progress, const CancelToken* cancel) {
  if (spec.source != "text" && !spec.fromContinuations)
    return decodeCalibrationShare(*m.model, *m.tokenizer, readPrompts(spec.file), decodeOptions(m, spec, batch), group,
                                  progress, cancel);
  CalibrationSet whole = recipeCalibration(m, spec, batch, progress, cancel);
  CalibrationSet share;
  share.source = whole.source;
  for (size_t k = static_cast<size_t>(group.rank()); k < whole.sequences.size(); k += static_cast<size_t>(group.size()))
    share.sequences.push_back(std::move(whole.sequences[k]));
  return share;
}

}  // namespace pareto
