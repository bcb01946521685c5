#include "search/SensitivityRefinement.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "calib/CalibrationSet.h"
#include "eval/KlDivergence.h"
#include "model/LlamaModel.h"
#include "util/Error.h"

namespace pareto {
namespace {

// "o_proj" of "model.layers.3.self_attn.o_proj".
std::string kindOf(const std::string& module) {
  const size_t dot = module.rfind('.');
  return dot == std::string::npos ? module : module.substr(dot + 1);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The dense model on the measured windows: each block's input and the final logits, so that a module of layer l
// is measured from block l on.
struct DenseWindows {
  std::vector<at::Tensor> ids;                  // [1, T] each
  std::vector<std::vector<at::Tensor>> hidden;  // [window][layer]: the input of block `layer`
  std::vector<at::Tensor> logits;               // [T, V] float32
  int64_t tokens = 0;
};

DenseWindows denseWindows(const LlamaModel& model, const CalibrationSet& data, int64_t windows) {
  DenseWindows d;
  const c10::Device device = model.options().device;
  const size_t n = std::min(data.sequences.size(), size_t(windows));
  for (size_t w = 0; w < n; ++w) {
    const std::vector<TokenId>& seq = data.sequences[w].ids;
    std::vector<int64_t> ids(seq.begin(), seq.end());
    if (ids.empty()) continue;
    at::Tensor t = at::tensor(ids, at::kLong).view({1, int64_t(ids.size())}).to(device);
    const LlamaModel::Context ctx = model.prepare(1, t.size(1), nullptr, nullptr);
    std::vector<at::Tensor> hidden;
    at::Tensor x = model.embed(t);
    for (int64_t l = 0; l < model.numLayers(); ++l) {
      hidden.push_back(x);
      model.loadLayer(l);
      x = model.block(l, x, ctx);
    }
    model.loadHead();
    d.logits.push_back(model.head(x)[0]);
    d.ids.push_back(t);
    d.hidden.push_back(std::move(hidden));
    d.tokens += t.size(1);
  }
  return d;
}

}  // namespace

size_t referenceCandidate(const SensitivityTable& table, const SearchBase& base) {
  auto appliesEverywhere = [&](size_t c) {
    return std::all_of(table.modules.begin(), table.modules.end(),
                       [&](const SensitivityModule& m) { return m.cells.at(c).applies; });
  };
  if (!base.refine.reference.empty()) {
    for (size_t c = 0; c < base.candidates.size(); ++c) {
      if (base.candidates[c].name != base.refine.reference) continue;
      if (!appliesEverywhere(c))
        throw InputError("refine.reference: \"" + base.refine.reference + "\" does not apply to every module (" +
                         table.skipped().front() + "); name one that does");
      return c;
    }
    throw InputError("refine.reference: \"" + base.refine.reference + "\" names no candidate");
  }
  std::vector<std::pair<uint64_t, size_t>> sized;
  for (size_t c = 0; c < base.candidates.size(); ++c) {
    if (base.candidates[c].dense() || !appliesEverywhere(c)) continue;
    uint64_t bytes = 0;
    for (const SensitivityModule& m : table.modules) bytes += m.cells[c].bytes;
    sized.emplace_back(bytes, c);
  }
  if (sized.empty())
    throw InputError("the KL refinement needs a candidate that applies to every module and none does; add one "
                     "(e.g. rtn int8 per channel) or turn the refinement off (\"refine\": false, --no-refine)");
  std::stable_sort(sized.begin(), sized.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return sized[(sized.size() - 1) / 2].second;
}

void refineSensitivity(SensitivityTable& table, LlamaModel& model, const CalibrationSet& data,
                       const RefineOptions& options, size_t reference,
                       const std::map<std::string, at::Tensor>& solutions, const ProgressCallback& progress,
                       const CancelToken* cancel) {
  auto report = [&](double fraction, const std::string& msg) {
    if (progress) progress({"refine", fraction, msg});
  };
  auto checkCancel = [&] {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
  };
  // Which modules are measured: those with a reference error (the skip list leaves some untouched), the K of
  // largest error first.
  std::vector<size_t> order;
  for (size_t i = 0; i < table.modules.size(); ++i) {
    const double e = table.modules[i].cells.at(reference).outputError;
    if (std::isfinite(e) && e > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return table.modules[a].cells[reference].outputError > table.modules[b].cells[reference].outputError;
  });
  if (options.modules > 0 && order.size() > size_t(options.modules)) order.resize(size_t(options.modules));

  report(0, "dense logits on " + std::to_string(options.windows) + " calibration windows");
  const DenseWindows dense = denseWindows(model, data, options.windows);
  if (dense.tokens == 0) throw InputError("the KL refinement has no calibration tokens to measure on");

  // Where each module sits.
  std::map<std::string, std::pair<int64_t, Linear*>> where;
  for (int64_t l = 0; l < model.numLayers(); ++l)
    for (const auto& [group, linear] : model.layerLinears(l)) where[linear->name()] = {l, linear};

  for (size_t k = 0; k < order.size(); ++k) {
    SensitivityModule& mod = table.modules[order[k]];
    report(double(k) / double(order.size()), mod.name + " × " + table.candidates.at(reference) + " alone");
    checkCancel();
    const auto place = where.find(mod.name);
    const auto solved = solutions.find(mod.name);
    if (place == where.end() || solved == solutions.end())
      throw Error(mod.name + ": no " + std::string(place == where.end() ? "linear in the model" : "reference solution") +
                  " for the KL refinement");
    const int64_t layer = place->second.first;
    Linear* linear = place->second.second;
    const at::Tensor denseWeight = linear->weight();
    linear->setWeight(solved->second);
    double sum = 0;
    try {
      for (size_t w = 0; w < dense.ids.size(); ++w) {
        checkCancel();
        const LlamaModel::Context ctx = model.prepare(1, dense.ids[w].size(1), nullptr, nullptr);
        at::Tensor x = dense.hidden[w][size_t(layer)];
        for (int64_t l = layer; l < model.numLayers(); ++l) x = model.block(l, x, ctx);
        sum += tokenKlDivergence(dense.logits[w], model.head(x)[0]).sum().item<double>();
      }
    } catch (...) {
      linear->setWeight(denseWeight);
      throw;
    }
    linear->setWeight(denseWeight);
    mod.referenceKl = sum / double(dense.tokens);
    // A module whose replacement leaves the output unchanged to the last bit still costs something: the
    // smallest positive scale keeps every scale positive.
    mod.scale = std::max(mod.referenceKl, std::numeric_limits<double>::min()) / mod.cells[reference].outputError;
  }

  // The modules not measured: their kind's median scale.
  std::map<std::string, std::vector<double>> byKind;
  std::vector<double> all;
  for (size_t i : order) {
    byKind[kindOf(table.modules[i].name)].push_back(table.modules[i].scale);
    all.push_back(table.modules[i].scale);
  }
  const double overall = all.empty() ? 1.0 : median(all);
  std::vector<bool> measured(table.modules.size(), false);
  for (size_t i : order) measured[i] = true;
  for (size_t i = 0; i < table.modules.size(); ++i) {
    SensitivityModule& mod = table.modules[i];
    if (!measured[i]) {
      const auto it = byKind.find(kindOf(mod.name));
      mod.scale = it == byKind.end() ? overall : median(it->second);
    }
    for (SensitivityCell& cell : mod.cells)
      if (cell.applies) cell.loss = cell.outputError * mod.scale;
  }
  table.refinement = {true, table.candidates.at(reference), int64_t(dense.ids.size()), dense.tokens, order.size()};
  report(1.0, std::to_string(order.size()) + " modules");
}

}  // namespace pareto
