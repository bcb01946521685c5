#include "widgets/RunRecord.h"

#include <QCoreApplication>
#include <QLocale>
#include <nlohmann/json.hpp>

#include "widgets/DisplayFormat.h"

namespace pareto {

namespace {
QString tr(const char* text) { return QCoreApplication::translate("RunMetrics", text); }
}  // namespace

const std::vector<MetricInfo>& runMetricInfo() {
  static const std::vector<MetricInfo> info = {
      {metric::kPerplexity, tr("Perplexity"),
       tr("Perplexity of the compressed model on the held-out text: the text is cut into non-overlapping windows "
          "of W tokens, each scored on its own without BOS; exp(mean NLL) over the W−1 predictions per window "
          "(the GPTQ/SparseGPT WikiText-2 protocol). Lower is better."),
       3, true},
      {metric::kDensePerplexity, tr("Dense perplexity"),
       tr("The same perplexity for the dense model the run started from, on the same text and windows: the "
          "floor the compressed model is compared with."),
       3, true},
      {metric::kDecodeNll, tr("Decode NLL"),
       tr("The dense model continues each held-out prompt greedily; this is the compressed model's mean negative "
          "log-likelihood (nats per token) of those continuation tokens, teacher-forced. Lower is better."),
       4, true},
      {metric::kDenseDecodeNll, tr("Dense decode NLL"),
       tr("The dense model's own mean NLL on its greedy continuations: the floor of decode NLL."), 4, true},
      {metric::kTop1Agreement, tr("Top-1 agreement"),
       tr("Fraction of the dense continuation's positions where the compressed model's most likely next token is "
          "the dense model's token (teacher-forced). Higher is better."),
       1, false, true},
      {metric::kKlMean, tr("KL"),
       tr("KL divergence KL(P_dense ‖ P_compressed) of the next-token distributions over the full vocabulary, in "
          "nats, at every predicted position of the perplexity windows (both models read the same windows); the "
          "mean over positions (llama.cpp's \"Mean KLD\"). 0 means the compressed model predicts exactly as the "
          "dense one. Lower is better."),
       4, true},
      {metric::kKlP99, tr("KL p99"),
       tr("The 99th percentile of the same per-position KL divergence to the dense model on the perplexity "
          "windows (llama.cpp's \"99.0% KLD\"): how far the worst 1% of predictions stray. Lower is better."),
       4, true},
      {metric::kDecodeKlMean, tr("Decode KL"),
       tr("KL divergence KL(P_dense ‖ P_compressed) over the full vocabulary, in nats, at every position of the "
          "dense model's greedy continuations of the held-out prompts (teacher-forced, the positions decode NLL "
          "scores); the mean over positions. Lower is better."),
       4, true},
      {metric::kDecodeKlP99, tr("Decode KL p99"),
       tr("The 99th percentile of the same per-position KL divergence on the dense continuations. Lower is "
          "better."),
       4, true},
      {metric::kSharedPrefix, tr("Shared prefix"),
       tr("Mean over prompts of how many leading tokens the compressed model's own greedy continuation shares "
          "with the dense one. Higher is better."),
       1, false},
      {metric::kLinearBitsPerWeight, tr("Bits/weight"),
       tr("Every byte the compressed folder stores for the block linears (values, codes, masks, scales, zeros, "
          "outlier indices) × 8, over their number of weights; measured on the written files."),
       3, true},
      {metric::kModelBitsPerWeight, tr("Model bits/weight"),
       tr("Every stored weight byte of the compressed folder × 8 over every weight of the model (embedding, "
          "norms and output head included)."),
       3, true},
      {metric::kBytes, tr("Size"), tr("Bytes of weight data the compressed folder holds."), 0, true},
      {metric::kPredictedTokensPerSecond, tr("Predicted tok/s"),
       tr("Batch-1 decode tokens per second predicted as bandwidth ÷ weight bytes read per token (every block "
          "weight and the output head once per token). The run's bandwidth source says whether the bandwidth is "
          "a stored kernel benchmark or a measured copy bandwidth. Higher is better."),
       0, false},
      {kMeasuredTokensPerSecond, tr("Measured tok/s"),
       tr("Batch-1 decode tokens per second measured on the run's compressed folder on its device (the newest "
          "benchmark of that folder in the run store: Runs dock ▸ Benchmark, or pareto-cli bench decode --model). "
          "Where there is one, it replaces the prediction. Higher is better."),
       0, false},
      {kDecodeTokensPerSecond, tr("Decode tok/s"),
       tr("Batch-1 decode tokens per second: measured on the run's folder where it was benchmarked, else "
          "predicted (hollow points in the Pareto view). Higher is better."),
       0, false},
      {metric::kDenseLinearBitsPerWeight, tr("Dense bits/weight"),
       tr("Bits per weight of the block linears as the dense checkpoint stores them (16 for bf16/fp16)."), 2, true},
      {metric::kDensePredictedTokensPerSecond, tr("Dense predicted tok/s"),
       tr("The dense model's predicted batch-1 decode tokens per second, on the same bandwidth as the run's."), 0,
       false},
      {metric::kDriftPlateauMax, tr("Drift plateau"),
       tr("Activation drift D(l,t) = ‖h_c − h_d‖ / ‖h_d‖ of each layer's input hidden state at decode step t, "
          "each model on its own greedy tokens, averaged over prompts; the plateau is the mean of the last quarter "
          "of the steps. This is the largest plateau over layers."),
       4, true},
      {metric::kDriftStepsTo90Max, tr("Steps to 90%"),
       tr("For each layer, the first decode step at which the drift reaches 90% of its plateau; this is the "
          "largest over layers (the SparseDecoding paper reports ≤ 12 for every layer)."),
       0, true},
      {metric::kDiscrepancyFraction, tr("Decode closer"),
       tr("Hessian discrepancy δ = ‖H_t^{-1/2}(H_c − H_t)H_t^{-1/2}‖₂ of each module's calibration Hessian H_c "
          "against the decode-time Hessian H_t of held-out prompts: the fraction of modules where decode "
          "calibration has the smaller δ than text calibration."),
       1, false, true},
      {metric::kDiscrepancyMedianRatio, tr("Median δ ratio"),
       tr("Median over modules of δ(text calibration) / δ(decode calibration); above 1, decode calibration is "
          "closer to the decode-time Hessian."),
       2, false},
      {metric::kSeconds, tr("Run time"), tr("Wall-clock seconds of the whole run: compression and evaluation."), 1,
       true},
  };
  return info;
}

const MetricInfo* findMetric(const std::string& key) {
  for (const MetricInfo& m : runMetricInfo())
    if (m.key == key) return &m;
  return nullptr;
}

QString formatMetric(const std::string& key, double value) {
  if (std::isnan(value)) return QStringLiteral("—");
  const MetricInfo* info = findMetric(key);
  if (key == metric::kBytes) return display::bytes(static_cast<uint64_t>(value));
  const QLocale locale;
  if (info == nullptr) return locale.toString(value, 'g', 6);
  if (info->percent) return locale.toString(100.0 * value, 'f', info->decimals) + "%";
  if (key == metric::kSeconds) return locale.toString(value, 'f', info->decimals) + " s";
  return locale.toString(value, 'f', info->decimals);
}

std::string denseMetricOf(const std::string& key) {
  if (key == metric::kPerplexity) return metric::kDensePerplexity;
  if (key == metric::kDecodeNll) return metric::kDenseDecodeNll;
  if (key == metric::kLinearBitsPerWeight) return metric::kDenseLinearBitsPerWeight;
  if (key == metric::kPredictedTokensPerSecond) return metric::kDensePredictedTokensPerSecond;
  return {};
}

QString formatDelta(const std::string& key, double delta) {
  if (std::isnan(delta)) return QStringLiteral("—");
  return (delta >= 0 ? QStringLiteral("+") : QStringLiteral("−")) + formatMetric(key, std::abs(delta));
}

namespace {

QString describePrune(const nlohmann::json& p) {
  QString s = QString::fromStdString(p.value("method", "?"));
  if (p.contains("pattern") && p["pattern"].is_string()) s += " " + QString::fromStdString(p["pattern"].get<std::string>());
  if (p.contains("sparsity") && p["sparsity"].is_number())
    s += QStringLiteral(" %1%").arg(100.0 * p["sparsity"].get<double>(), 0, 'g', 3);
  return s;
}

QString describeQuantize(const nlohmann::json& q) {
  QString s = QString::fromStdString(q.value("method", "?"));
  if (q.contains("format") && q["format"].is_string()) return s + " " + QString::fromStdString(q["format"].get<std::string>());
  if (q.contains("bits") && q["bits"].is_number_integer()) s += QStringLiteral(" int%1").arg(q["bits"].get<int>());
  const std::string granularity = q.value("granularity", q.contains("group_size") ? "group" : "");
  if (granularity == "group" && q.contains("group_size") && q["group_size"].is_number_integer())
    s += QStringLiteral(" g%1").arg(q["group_size"].get<int64_t>());
  else if (!granularity.empty())
    s += " " + QString::fromStdString(granularity);
  return s;
}

// One override as "model.layers.0.* → dense": its pruning and quantization, "dense" for one it removes.
QString describeOverride(const nlohmann::json& o) {
  QStringList parts;
  for (const char* key : {"prune", "quantize"}) {
    if (!o.contains(key)) continue;
    const nlohmann::json& block = o.at(key);
    if (block.is_null()) parts << (std::string(key) == "prune" ? QObject::tr("unpruned") : QObject::tr("unquantized"));
    else if (block.is_object()) parts << (std::string(key) == "prune" ? describePrune(block) : describeQuantize(block));
  }
  return QStringLiteral("%1 → %2").arg(QString::fromStdString(o.value("match", "?")),
                                       parts.isEmpty() ? QObject::tr("as the recipe") : parts.join(" + "));
}

}  // namespace

QString describeRecipe(const std::string& recipeJson) {
  nlohmann::json j = nlohmann::json::parse(recipeJson, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return QStringLiteral("?");
  QStringList parts;
  if (j.contains("prune") && j["prune"].is_object()) parts << describePrune(j["prune"]);
  if (j.contains("quantize") && j["quantize"].is_object()) parts << describeQuantize(j["quantize"]);
  QString text = parts.isEmpty() ? QStringLiteral("dense") : parts.join(" + ");
  if (j.contains("overrides") && j["overrides"].is_array() && !j["overrides"].empty()) {
    QStringList overrides;
    for (const auto& o : j["overrides"])
      if (o.is_object()) overrides << describeOverride(o);
    text += QStringLiteral(" · %1").arg(overrides.join(", "));
  }
  if (j.contains("calibration") && j["calibration"].is_object())
    text += QStringLiteral(" · %1 calibration").arg(QString::fromStdString(j["calibration"].value("source", "?")));
  return text;
}

}  // namespace pareto
