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

// Batch-1 decode tokens/s measured on a run's compressed folder: the newest `bench decode` of that folder in the
// store (Runs dock ▸ Benchmark, or `pareto-cli bench decode --model <folder>`), as 10⁶ / its µs per token. The
// workbench derives it from the bench run's rows; it is not a metric the compress run stores.
inline constexpr const char* kMeasuredTokensPerSecond = "measured_tok_s";
// A run's decode speed as the Pareto view plots it: measured where the run has a measurement, else predicted.
inline constexpr const char* kDecodeTokensPerSecond = "decode_tok_s";

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
// The dense model's value a metric is compared with, measured in the same run ("" when it has none: KL and
// top-1 agreement are measured against the dense model already).
std::string denseMetricOf(const std::string& key);
// A run's value minus the dense model's, signed: "+0.412", "−3.000"; "—" when either is missing.
QString formatDelta(const std::string& key, double delta);

struct RunRecord {
  // The run's id in the experiment store, the one `pareto-cli runs show` takes; negative (-1, -2 ...) for a run
  // the store could not record (numbered in the session, never confused with a stored one).
  int id = 0;
  QString name;               // "#3 sparsegpt 2:4 · text calibration"
  QString kind = QStringLiteral("compress");   // the store's run kind: compress, bench, perplexity ...
  QString status = QStringLiteral("finished"); // the store's status: finished, failed, cancelled, running ...
  QString error;              // why a failed or cancelled run ended
  QString modelDir;           // the dense model it compressed (its source model)
  // The source model's content hash (store/ModelIdentity.h); runs of one model share it wherever the folder is.
  QString modelHash;
  QString outDir;             // the compressed folder it wrote
  std::string recipeJson;     // the recipe exactly as run (other kinds: the job's settings)
  QDateTime finishedAt;
  QString device;             // "cpu", "NVIDIA H200"
  QString bandwidthSource;    // where predicted_tok_s came from
  std::map<std::string, double> metrics;
  std::shared_ptr<const ActivationDriftResult> drift;          // null when not measured
  std::shared_ptr<const HessianStudyResult> discrepancy;       // null when not measured
  // Why drift is absent (shown in the Drift view instead of a plot): no held-out prompts, no drift steps, or a
  // run recorded before the store kept drift's curves (jobs/StoredAnalyses.h).
  QString driftAbsent;
  QString tag, note;          // the user's (the store keeps them: `pareto-cli runs label`)

  bool isFinishedCompress() const { return kind == QLatin1String("compress") && status == QLatin1String("finished"); }
  // What groups runs of one model: its content hash, else (not identified) its folder.
  QString modelKey() const { return modelHash.isEmpty() ? modelDir : modelHash; }

  double metric(const std::string& key) const {
    if (key == kDecodeTokensPerSecond) {
      const double measured = metric(kMeasuredTokensPerSecond);
      return std::isnan(measured) ? metric(metric::kPredictedTokensPerSecond) : measured;
    }
    auto it = metrics.find(key);
    return it == metrics.end() ? std::nan("") : it->second;
  }
};

// A short description of a recipe for lists: "sparsegpt 2:4 + rtn int4 g128 · decode calibration".
QString describeRecipe(const std::string& recipeJson);

}  // namespace pareto
