#include "jobs/StoredAnalyses.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "analysis/HessianDiscrepancy.h"

namespace pareto {
namespace {

constexpr const char* kColumns = "discrepancy_columns";
constexpr const char* kText = "discrepancy_text";
constexpr const char* kDecode = "discrepancy_decode";

nlohmann::json row(const std::vector<double>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (double v : values) out.push_back(std::isnan(v) ? nlohmann::json() : nlohmann::json(v));
  return out;
}

nlohmann::json matrix(const std::vector<std::vector<double>>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) out.push_back(row(r));
  return out;
}

double metricOf(const RunDetails& run, const std::string& name) {
  for (const Metric& m : run.metrics)
    if (m.name == name) return m.value;
  return std::numeric_limits<double>::quiet_NaN();
}

// The stored rows "<name>[0]", "<name>[1]" ... as a [rows][steps] matrix, NaN where a step has no point.
std::vector<std::vector<double>> rowsOf(const std::map<std::string, const Curve*>& curves, const std::string& name,
                                        size_t steps) {
  std::vector<std::vector<double>> rows;
  for (size_t i = 0;; ++i) {
    const auto it = curves.find(name + "[" + std::to_string(i) + "]");
    if (it == curves.end()) return rows;
    std::vector<double> values(steps, std::numeric_limits<double>::quiet_NaN());
    for (size_t k = 0; k < it->second->x.size(); ++k) {
      const double x = it->second->x[k];
      if (x >= 0 && x < double(steps)) values[static_cast<size_t>(x)] = it->second->y[k];
    }
    rows.push_back(std::move(values));
  }
}

std::vector<int64_t> countsOf(const std::map<std::string, const Curve*>& curves, const std::string& name,
                              size_t steps) {
  std::vector<int64_t> counts(steps, 0);
  const auto it = curves.find(name);
  if (it == curves.end()) return counts;
  for (size_t k = 0; k < it->second->x.size(); ++k) {
    const double x = it->second->x[k];
    if (x >= 0 && x < double(steps)) counts[static_cast<size_t>(x)] = static_cast<int64_t>(it->second->y[k]);
  }
  return counts;
}

}  // namespace

nlohmann::json storedDriftJson(const ActivationDriftResult& d) {
  return {{"steps", d.steps},
          {"prompts", d.prompts},
          {"free", matrix(d.free.drift)},
          {"forced", matrix(d.forced.drift)},
          {"counts", {{"free", d.free.counts}, {"forced", d.forced.counts}}}};
}

nlohmann::json storedDiscrepancyJson(const HessianStudyResult& study) {
  nlohmann::json modules = nlohmann::json::array();
  for (const ModuleDiscrepancy& m : study.modules)
    modules.push_back({{"name", m.name}, {kColumns, m.columns}, {kText, m.text.delta}, {kDecode, m.decode.delta}});
  return {{"modules", modules}};
}

std::shared_ptr<const ActivationDriftResult> storedDrift(const RunDetails& run) {
  const double steps = metricOf(run, "drift.steps");
  if (!(steps > 0)) return nullptr;
  std::map<std::string, const Curve*> curves;
  for (const Curve& c : run.curves) curves[c.name] = &c;
  auto d = std::make_shared<ActivationDriftResult>();
  d->steps = static_cast<int64_t>(steps);
  const double prompts = metricOf(run, "drift.prompts");
  d->prompts = std::isnan(prompts) ? 0 : static_cast<int64_t>(prompts);
  const size_t n = static_cast<size_t>(d->steps);
  for (auto [variant, curvesOut] : {std::pair<const char*, DriftCurves*>{"free", &d->free}, {"forced", &d->forced}}) {
    curvesOut->drift = rowsOf(curves, std::string("drift.") + variant, n);
    curvesOut->counts = countsOf(curves, std::string("drift.counts.") + variant, n);
    summarizeDriftCurves(*curvesOut);
  }
  if (d->free.drift.empty() || d->free.drift.size() != d->forced.drift.size()) return nullptr;
  d->layers = static_cast<int64_t>(d->free.drift.size());
  return d;
}

std::shared_ptr<const HessianStudyResult> storedDiscrepancy(const RunDetails& run) {
  std::map<std::string, ModuleDiscrepancy> byName;
  std::vector<std::string> order;   // as stored: the model's order
  for (const ModuleStat& s : run.moduleStats) {
    if (s.name != kColumns && s.name != kText && s.name != kDecode) continue;
    auto [it, added] = byName.try_emplace(s.module);
    if (added) order.push_back(s.module);
    ModuleDiscrepancy& m = it->second;
    m.name = s.module;
    if (s.name == kColumns) m.columns = static_cast<int64_t>(s.value);
    if (s.name == kText) m.text.delta = s.value;
    if (s.name == kDecode) m.decode.delta = s.value;
  }
  if (order.empty()) return nullptr;
  auto study = std::make_shared<HessianStudyResult>();
  std::vector<double> text, decode;
  for (const std::string& name : order) {
    study->modules.push_back(byName.at(name));
    text.push_back(study->modules.back().text.delta);
    decode.push_back(study->modules.back().decode.delta);
  }
  study->summary = summarizeDiscrepancies(text, decode);
  return study;
}

}  // namespace pareto
