#include "analysis/HessianStudy.h"

#include <chrono>

#include "calib/DecodeCalibration.h"
#include "calib/SequentialPass.h"
#include "calib/TextCalibration.h"
#include "model/LoadedModel.h"
#include "util/Error.h"

namespace pareto {

HessianStudyResult runHessianStudy(const LoadedModel& m, const HessianStudyOptions& opts,
                                   const ProgressCallback& progress, const CancelToken* cancel) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> prompts = readPrompts(opts.promptsFile);
  if (prompts.size() < 2)
    throw InputError(fileMessage(opts.promptsFile, "needs at least two prompts (one half calibrates, the other is "
                                                   "the held-out target)"));
  // A seeded split into two disjoint halves: calibration never sees a target prompt.
  std::vector<size_t> order = seededPermutation(prompts.size(), opts.seed);
  std::vector<std::string> calibPrompts, targetPrompts;
  for (size_t i = 0; i < order.size(); ++i)
    (i < order.size() / 2 ? calibPrompts : targetPrompts).push_back(prompts[order[i]]);

  HessianStudyResult result;
  result.calibrationPrompts = static_cast<int64_t>(calibPrompts.size());
  result.targetPrompts = static_cast<int64_t>(targetPrompts.size());

  auto stage = [&](const std::string& name) {
    return [&progress, name](const ProgressUpdate& u) {
      if (progress) progress({name, u.fraction, u.message});
    };
  };
  TextCalibrationOptions textOpts;
  textOpts.window = opts.window;
  textOpts.tokens = opts.calibTokens;
  textOpts.seed = opts.seed;
  CalibrationSet text = textCalibration(*m.tokenizer, opts.textFile, textOpts);

  DecodeCalibrationOptions decodeOpts;
  decodeOpts.tokens = opts.calibTokens;
  decodeOpts.maxNewTokens = opts.maxNewTokens;
  decodeOpts.seed = opts.seed;
  decodeOpts.batch = opts.batch;
  decodeOpts.eosTokenIds = m.eosTokenIds;
  decodeOpts.bosTokenId = m.config.bosTokenId;
  CalibrationSet decode =
      decodeCalibration(*m.model, *m.tokenizer, calibPrompts, decodeOpts, stage("decode calibration"), cancel);
  decodeOpts.tokens = opts.targetTokens > 0 ? opts.targetTokens : opts.calibTokens;
  CalibrationSet target =
      decodeCalibration(*m.model, *m.tokenizer, targetPrompts, decodeOpts, stage("held-out target"), cancel);
  result.textTokens = text.countedTokens();
  result.decodeTokens = decode.countedTokens();
  result.targetTokens = target.countedTokens();

  SequentialPassOptions passOpts;
  passOpts.batch = opts.batch;
  passOpts.cancel = cancel;
  passOpts.progress = stage("hessians and discrepancy");
  std::vector<double> deltaText, deltaDecode;
  observeHessians(*m.model, {&text, &decode, &target},
                  [&](int64_t, LinearGroup, const std::vector<std::string>& modules,
                      const std::vector<const HessianAccumulator*>& h) {
                    at::Tensor targetMean = h[2]->mean();
                    const std::string& first = modules.front();
                    DiscrepancyResult dt = hessianDiscrepancy(h[0]->mean(), targetMean, opts.discrepancy, first);
                    DiscrepancyResult dd = hessianDiscrepancy(h[1]->mean(), targetMean, opts.discrepancy, first);
                    // Linears sharing an input share its Hessian, so they share δ; each is still listed.
                    for (const auto& name : modules) {
                      result.modules.push_back({name, h[0]->columns(), dt, dd});
                      deltaText.push_back(dt.delta);
                      deltaDecode.push_back(dd.delta);
                    }
                  },
                  passOpts);
  result.summary = summarizeDiscrepancies(deltaText, deltaDecode);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace pareto
