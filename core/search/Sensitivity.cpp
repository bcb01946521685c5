#include "search/Sensitivity.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "calib/SequentialPass.h"
#include "compress/ModulePlan.h"
#include "compress/ModuleSolve.h"
#include "compress/RecipeCalibration.h"
#include "compress/RecipeEstimate.h"
#include "formats/CompressionManifest.h"
#include "model/LoadedModel.h"
#include "model/ModelSummary.h"
#include "search/SensitivityRefinement.h"
#include "util/Error.h"

namespace pareto {
namespace {


// tr(ΔW H̄ ΔWᵀ) in float64.
double estimatedLoss(const at::Tensor& solved, const at::Tensor& dense, const at::Tensor& meanHessian) {
  const at::Tensor delta = solved.to(at::kCPU, at::kDouble) - dense.to(at::kCPU, at::kDouble);
  return (delta.mm(meanHessian) * delta).sum().item<double>();
}

}  // namespace

std::string SensitivityTable::estimate() const {
  if (!refinement.done) return "output error tr(ΔW H̄ ΔWᵀ) of each module";
  std::ostringstream s;
  s << "predicted KL (nats): output error tr(ΔW H̄ ΔWᵀ) × KL to dense of " << refinement.reference
    << " alone / its output error, on " << refinement.windows << " calibration windows (" << refinement.tokens
    << " tokens), " << refinement.measuredModules << " of " << modules.size() << " modules measured";
  if (refinement.measuredModules < modules.size()) s << " (the rest: their kind's median scale)";
  return s.str();
}

std::vector<std::string> SensitivityTable::skipped() const {
  std::vector<std::string> out;
  for (const SensitivityModule& m : modules)
    for (size_t c = 0; c < m.cells.size(); ++c)
      if (!m.cells[c].applies) out.push_back(m.name + " × " + candidates[c] + ": " + m.cells[c].problem);
  return out;
}

SensitivityTable planSensitivity(const SearchBase& base, const ModelSummary& model) {
  if (model.compressed)
    throw InputError(fileMessage(model.path, "is already a compressed folder; the search starts from the dense "
                                             "source model"));
  SensitivityTable t;
  for (const SearchCandidate& c : base.candidates) t.candidates.push_back(c.name);
  // The dense estimate lists the block linears (and what a decode step reads besides them).
  Recipe dense;
  const RecipeEstimate denseEstimate = estimateRecipe(dense, model, DecodeBandwidth{});
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TensorSummary& s : model.tensors) shapes[s.name] = s.shape;
  for (const ModuleEstimate& e : denseEstimate.modules) {
    SensitivityModule m;
    m.name = e.module;
    const std::vector<int64_t>& shape = shapes.at(e.module + ".weight");
    m.rows = shape[0];
    m.cols = shape[1];
    t.linearWeights += e.weights;
    t.denseLinearBytes += e.bytes;
    t.modules.push_back(std::move(m));
  }
  t.otherBytesPerToken = denseEstimate.denseBytesPerToken - std::min(denseEstimate.denseBytesPerToken, t.denseLinearBytes);

  for (size_t c = 0; c < base.candidates.size(); ++c) {
    const SearchCandidate& cand = base.candidates[c];
    std::vector<ModuleEstimate> estimates = cand.dense() ? denseEstimate.modules
                                                         : estimateRecipe(*cand.recipe, model, DecodeBandwidth{}).modules;
    for (size_t i = 0; i < t.modules.size(); ++i) {
      SensitivityModule& m = t.modules[i];
      const ModuleEstimate& e = estimates.at(i);
      SensitivityCell cell;
      cell.applies = true;
      cell.format = "dense";
      cell.kernel = "dense";
      cell.bytes = denseEstimate.modules.at(i).bytes;
      cell.loss = cand.dense() ? 0.0 : std::numeric_limits<double>::quiet_NaN();
      cell.outputError = cell.loss;
      if (!cand.dense()) {
        try {
          const ModulePlan plan = planModule(*cand.recipe, m.name, m.rows, m.cols);
          cell.note = plan.note;
          if (!plan.touched()) cell.loss = cell.outputError = 0;   // the base's skip list leaves it dense
          cell.format = e.format;
          cell.kernel = e.kernel;
          cell.bytes = e.bytes;
        } catch (const InputError& err) {
          cell.applies = false;
          cell.problem = err.what();
        }
      }
      m.cells.push_back(std::move(cell));
    }
  }
  return t;
}

void measureSensitivity(SensitivityTable& table, const SearchBase& base, const std::string& modelDir,
                        const RuntimeOptions& runtime, int64_t batch, const ProgressCallback& progress,
                        const CancelToken* cancel) {
  if (progress) progress({"load", 0, modelDir});
  LoadedModel m = loadModel(modelDir, runtime, WeightResidency::Whole, progress, cancel);
  if (CompressionManifest::readFrom(modelDir))
    throw InputError(fileMessage(modelDir, "is already a compressed folder; the search starts from the dense "
                                           "source model"));
  measureSensitivity(table, base, m, batch, progress, cancel);
}

void measureSensitivity(SensitivityTable& table, const SearchBase& base, LoadedModel& m, int64_t batch,
                        const ProgressCallback& progress, const CancelToken* cancel) {
  auto report = [&](const std::string& stage, double fraction, const std::string& msg) {
    if (progress) progress({stage, fraction, msg});
  };
  // Chosen from the plan (bytes, applicability) before the pass, so that only its solutions are kept.
  const size_t reference = base.refine.enabled ? referenceCandidate(table, base) : 0;
  std::map<std::string, at::Tensor> solutions;   // the reference's solved weights, on the CPU in the model dtype
  report("calibration", 0, base.calibration.file);
  const CalibrationSet data = recipeCalibration(m, base.calibration, batch, progress, cancel);
  table.calibrationTokens = data.countedTokens();

  std::map<std::string, size_t> index;
  for (size_t i = 0; i < table.modules.size(); ++i) index[table.modules[i].name] = i;
  size_t done = 0;
  auto observer = [&](int64_t layer, LinearGroup, const std::vector<std::string>& names,
                      const std::vector<const HessianAccumulator*>& perSet) {
    const HessianAccumulator& h = *perSet.at(0);
    const at::Tensor meanHessian = h.mean().to(at::kCPU, at::kDouble);
    for (const std::string& name : names) {
      const auto it = index.find(name);
      if (it == index.end()) continue;
      SensitivityModule& mod = table.modules[it->second];
      const Linear* linear = nullptr;
      for (const auto& [group, l] : std::as_const(*m.model).layerLinears(layer))
        if (l->name() == name) linear = l;
      if (linear == nullptr) throw Error(name + ": not a linear of layer " + std::to_string(layer));
      const at::Tensor& weight = linear->weight();
      for (size_t c = 0; c < base.candidates.size(); ++c) {
        if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
        SensitivityCell& cell = mod.cells[c];
        if (!cell.applies || !std::isnan(cell.outputError)) continue;
        report("sensitivity", (double(done) + double(c) / double(base.candidates.size())) / double(table.modules.size()),
               name + " × " + base.candidates[c].name);
        try {
          const ModulePlan plan = planModule(*base.candidates[c].recipe, name, mod.rows, mod.cols);
          const ModuleOutcome outcome = solveModule(plan, weight, &h);
          cell.outputError = cell.loss = estimatedLoss(outcome.weight, weight, meanHessian);
          if (base.refine.enabled && c == reference)
            solutions[name] = outcome.weight.to(at::kCPU, weight.scalar_type());
        } catch (const InputError& err) {
          cell.applies = false;
          cell.problem = err.what();
        }
      }
      ++done;
    }
  };
  SequentialPassOptions pass;
  pass.batch = batch;
  pass.cancel = cancel;
  observeHessians(*m.model, {&data}, observer, pass);
  report("sensitivity", 1.0, std::to_string(table.modules.size()) + " modules");
  if (base.refine.enabled)
    refineSensitivity(table, *m.model, data, base.refine, reference, solutions, progress, cancel);
  table.measured = true;
}

}  // namespace pareto
