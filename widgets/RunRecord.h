// One finished run as the workbench shows it: the exact recipe, where its compressed folder is, its metrics by
// name (the store's metrics table has the same shape: run, name, value) and the curves its views plot.
//
// Metric names are core's (store/MetricNames.h), the keys of runMetricInfo(); every widget that shows a metric
// takes its caption and its tooltip (what it means, how it was measured) from there, so they read the same
// everywhere.
#pragma once

#include <QDateTime>
#include <QString>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "store/MetricNames.h"

namespace pareto {

struct ActivationDriftResult;
struct HessianStudyResult;

struct MetricInfo {
  std::string key;
  QString caption;      // short, for column headers and plot axes: "Perplexity"
  QString meaning;      // the tooltip: what it means and how it was measured
  int decimals = 2;
  bool lowerIsBetter = true;
  bool percent = false;   // a fraction shown as percent
};

// Every metric a run can have, in display order.
const std::vector<MetricInfo>& runMetricInfo();
const MetricInfo* findMetric(const std::string& key);
// The value as shown: "12.34", "87.5%", "30.00 MiB"; "—" for a missing value.
QString formatMetric(const std::string& key, double value);

struct RunRecord {
  int id = 0;                 // assigned by RunHistory, unique in the session
  int64_t storeId = 0;        // the run's id in the experiment store (0: not recorded)
  QString name;               // "#3 sparsegpt 2:4 · text"
  QString modelDir;           // the dense model it compressed
  QString outDir;             // the compressed folder it wrote
  std::string recipeJson;     // the recipe exactly as run
  QDateTime finishedAt;
  QString device;             // "cpu", "NVIDIA H200"
  QString bandwidthSource;    // where predicted_tok_s came from
  std::map<std::string, double> metrics;
  std::shared_ptr<const ActivationDriftResult> drift;          // null when not measured
  std::shared_ptr<const HessianStudyResult> discrepancy;       // null when not measured

  double metric(const std::string& key) const {
    auto it = metrics.find(key);
    return it == metrics.end() ? std::nan("") : it->second;
  }
};

// A short description of a recipe for lists: "sparsegpt 2:4 + rtn int4 g128 · decode calibration".
QString describeRecipe(const std::string& recipeJson);

}  // namespace pareto
