#include "jobs/AnalyzeJob.h"

#include <algorithm>

#include "calib/CalibrationSet.h"
#include "eval/DecodeFidelity.h"
#include "jobs/RunRecords.h"
#include "util/FileSystem.h"

namespace pareto {
namespace {

nlohmann::json hessianJson(const HessianStudyResult& r, const HessianStudyOptions& o, const AnalyzeReport& m) {
  nlohmann::json modules = nlohmann::json::array();
  for (const auto& mod : r.modules)
    modules.push_back({{"name", mod.name},
                       {"columns", mod.columns},
                       {"delta_text", mod.text.delta},
                       {"delta_decode", mod.decode.delta},
                       {"ratio", mod.ratio()},
                       {"converged", mod.text.converged && mod.decode.converged},
                       {"damp_used", std::max(mod.text.dampUsed, mod.decode.dampUsed)}});
  return {{"modules", modules},
          {"fraction_decode_smaller", r.summary.fractionDecodeSmaller},
          {"median_ratio", r.summary.medianRatio},
          {"settings",
           {{"model", m.modelDir},
            {"text", o.textFile},
            {"prompts", o.promptsFile},
            {"calib_tokens", o.calibTokens},
            {"target_tokens", r.targetTokens},
            {"window", o.window},
            {"max_new_tokens", o.maxNewTokens},
            {"seed", o.seed},
            {"damp", o.discrepancy.damp},
            {"calibration_prompts", r.calibrationPrompts},
            {"target_prompts", r.targetPrompts},
            {"device", m.device},
            {"dtype", m.dtype}}},
          {"seconds", r.seconds}};
}

nlohmann::json driftJson(const ActivationDriftResult& r, const AnalyzeOptions& o, const AnalyzeReport& m) {
  auto plateaus = [](const DriftCurves& c) {
    std::vector<double> v;
    for (const auto& s : c.summary) v.push_back(s.plateau);
    return v;
  };
  auto settling = [](const DriftCurves& c) {
    std::vector<int64_t> v;
    for (const auto& s : c.summary) v.push_back(s.stepsTo90);
    return v;
  };
  const nlohmann::json settings = {{"dense", o.denseDir},         {"model", o.modelDir}, {"prompts", o.prompts},
                                   {"max_prompts", o.maxPrompts}, {"device", m.device},  {"dtype", m.dtype},
                                   {"batch", o.drift.batch}};
  return {{"layers", r.layers},
          {"num_hidden_layers", m.numLayers},
          {"steps", r.steps},
          {"free", r.free.drift},
          {"forced", r.forced.drift},
          {"plateau", {{"free", plateaus(r.free)}, {"forced", plateaus(r.forced)}}},
          {"steps_to_90", {{"free", settling(r.free)}, {"forced", settling(r.forced)}}},
          {"counts", {{"free", r.free.counts}, {"forced", r.forced.counts}}},
          {"prompts", r.prompts},
          {"settings", settings},
          {"seconds", r.seconds}};
}

}  // namespace

Comparison loadComparison(const std::string& denseDir, const std::string& compressedDir, const std::string& prompts,
                          int64_t maxPrompts, const std::string& device, const std::string& dtype,
                          const GenerationLimits& limits, const ProgressCallback& progress,
                          const CancelToken* cancel) {
  std::vector<std::string> lines = readPrompts(prompts);
  if (maxPrompts > 0 && static_cast<int64_t>(lines.size()) > maxPrompts) lines.resize(static_cast<size_t>(maxPrompts));
  const RuntimeOptions runtime = makeRuntimeOptions(device, dtype);
  if (limits.budget.limited()) {
    const LoadedModel d = loadModel(denseDir, runtime, WeightResidency::Streamed);
    const LoadedModel m = loadModel(compressedDir, runtime, WeightResidency::Streamed);
    const std::vector<std::vector<TokenId>> ids = comparablePromptIds(d, m, lines);
    size_t longest = 0;
    for (const auto& p : ids) longest = std::max(longest, p.size());
    const int64_t batch = std::min<int64_t>(static_cast<int64_t>(std::max<size_t>(ids.size(), 1)),
                                            limits.batch > 0 ? limits.batch : (runtime.device.is_cuda() ? 64 : 8));
    requireGenerationFits(d.config, runtime.device, runtime.dtype, limits.budget, batch,
                          static_cast<int64_t>(longest) + limits.maxNewTokens, 2, limits.what);
  }
  Comparison c{loadModel(denseDir, runtime, WeightResidency::Whole, partOfStage(progress, 0, 0.5), cancel),
               loadModel(compressedDir, runtime, WeightResidency::Whole, partOfStage(progress, 0.5, 1), cancel), {}};
  c.promptIds = comparablePromptIds(c.dense, c.compressed, lines);
  return c;
}

AnalyzeOptions AnalyzeOptions::hessianStudy(std::string modelDir, std::string device, std::string dtype,
                                            HessianStudyOptions study) {
  AnalyzeOptions o;
  o.analysis = Analysis::Hessian;
  o.modelDir = std::move(modelDir);
  o.device = std::move(device);
  o.dtype = std::move(dtype);
  o.hessian = std::move(study);
  return o;
}

AnalyzeOptions AnalyzeOptions::activationDrift(std::string denseDir, std::string compressedDir, std::string prompts,
                                               int64_t maxPrompts, std::string device, std::string dtype,
                                               ActivationDriftOptions drift) {
  AnalyzeOptions o = hessianStudy(std::move(compressedDir), std::move(device), std::move(dtype), {});
  o.analysis = Analysis::Drift;
  o.denseDir = std::move(denseDir);
  o.prompts = std::move(prompts);
  o.maxPrompts = maxPrompts;
  o.drift = std::move(drift);
  return o;
}

AnalyzeJob::AnalyzeJob(AnalyzeOptions options) : options_(std::move(options)) {}

RunStart AnalyzeJob::runStart() const {
  const AnalyzeOptions& o = options_;
  if (o.analysis == AnalyzeOptions::Analysis::Hessian)
    return makeRunStart("hessian", o.modelDir, o.device,
                        {{"text", absolutePath(o.hessian.textFile)},
                         {"prompts", absolutePath(o.hessian.promptsFile)},
                         {"calib_tokens", o.hessian.calibTokens},
                         {"dtype", o.dtype}});
  return makeRunStart("drift", o.modelDir, o.device,
                      {{"dense", absolutePath(o.denseDir)},
                       {"prompts", absolutePath(o.prompts)},
                       {"max_prompts", o.maxPrompts},
                       {"steps", o.drift.steps},
                       {"dtype", o.dtype}});
}

void AnalyzeJob::run(const ProgressCallback& progress, const CancelToken& cancel) {
  report_ = {};
  auto describe = [&](const LoadedModel& m) {
    report_.numLayers = m.model->numLayers();
    report_.modelDir = m.directory;
    report_.device = deviceDescription(m.model->options().device);
    report_.dtype = dtypeLabel(m.model->options().dtype);
  };
  const RuntimeOptions runtime = makeRuntimeOptions(options_.device, options_.dtype);
  if (options_.analysis == AnalyzeOptions::Analysis::Hessian) {
    if (options_.budget.limited()) {
      // Decode calibration and the held-out target generate with the whole model; prompts are allowed 512 tokens.
      const LoadedModel headers = loadModel(options_.modelDir, runtime, WeightResidency::Streamed);
      const HessianStudyOptions& h = options_.hessian;
      requireGenerationFits(headers.config, runtime.device, runtime.dtype, options_.budget,
                            h.batch > 0 ? h.batch : (runtime.device.is_cuda() ? 64 : 8), h.maxNewTokens + 512, 1,
                            "the Hessian study's decode calibration");
    }
    const GpuMemoryLimit gpuLimit(runtime.device, options_.budget.gpuBytes);
    const LoadedModel m = loadModel(options_.modelDir, runtime, WeightResidency::Whole, progress, &cancel);
    describe(m);
    report_.hessian = runHessianStudy(m, options_.hessian, progress, &cancel);
    return;
  }
  const GpuMemoryLimit gpuLimit(runtime.device, options_.budget.gpuBytes);
  const Comparison c = loadComparison(options_.denseDir, options_.modelDir, options_.prompts, options_.maxPrompts,
                                      options_.device, options_.dtype,
                                      {options_.budget, options_.drift.batch, options_.drift.steps, "activation drift"},
                                      progress, &cancel);
  describe(c.dense);
  ActivationDriftOptions d = options_.drift;
  d.eosTokenIds = c.dense.eosTokenIds;
  report_.drift = activationDrift(*c.dense.model, *c.compressed.model, c.promptIds, d, progress, &cancel);
}

nlohmann::json AnalyzeJob::result() const {
  if (report_.hessian) return hessianJson(*report_.hessian, options_.hessian, report_);
  if (report_.drift) return driftJson(*report_.drift, options_, report_);
  return nlohmann::json::object();
}

}  // namespace pareto
