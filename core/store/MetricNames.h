// The names of the metrics a run stores (the store's metrics table: run, name, value), one set for pareto-cli,
// the workbench and the store. A metric is named after the key path of the job's result JSON that holds it
// (store/ResultJson.h flattens "timings": {"total_s": ...} to "timings.total_s"), so what `--json` prints, what
// the store keeps and what the workbench shows carry the same name.
//
// Runs recorded before the names were one set (the workbench wrote linear_bpw, model_bpw, dense_linear_bpw,
// dense_decode_nll and seconds for compress runs) read under today's names: canonicalMetricName is applied to
// every metric the store reads.
#pragma once

#include <map>
#include <string>

namespace pareto::metric {

// Quality
inline constexpr const char* kPerplexity = "ppl";
inline constexpr const char* kDensePerplexity = "dense_ppl";
inline constexpr const char* kDecodeNll = "decode_nll";
inline constexpr const char* kDenseDecodeNll = "dense_nll";
inline constexpr const char* kTop1Agreement = "top1_agreement";
inline constexpr const char* kSharedPrefix = "shared_prefix";
// KL(P_dense ‖ P_model) per predicted position (eval/KlDivergence.h), mean and 99th percentile: over the
// perplexity windows, and over decode fidelity's teacher-forced dense continuation tokens.
inline constexpr const char* kKlMean = "kl_mean";
inline constexpr const char* kKlP99 = "kl_p99";
inline constexpr const char* kDecodeKlMean = "decode_kl_mean";
inline constexpr const char* kDecodeKlP99 = "decode_kl_p99";
// Cost
inline constexpr const char* kLinearBitsPerWeight = "linear_bits_per_weight";
inline constexpr const char* kModelBitsPerWeight = "model_bits_per_weight";
inline constexpr const char* kBytes = "bytes";
inline constexpr const char* kPredictedTokensPerSecond = "predicted_tok_s";
inline constexpr const char* kDenseLinearBitsPerWeight = "dense_linear_bits_per_weight";
inline constexpr const char* kDensePredictedTokensPerSecond = "dense_predicted_tok_s";
// Analyses
inline constexpr const char* kDriftPlateauMax = "drift_plateau_max";
inline constexpr const char* kDriftStepsTo90Max = "drift_steps_to_90_max";
inline constexpr const char* kDiscrepancyFraction = "discrepancy_fraction_decode_smaller";
inline constexpr const char* kDiscrepancyMedianRatio = "discrepancy_median_ratio";
// Memory: the process's peak resident bytes, its resident bytes when the job started, and the CUDA caching
// allocator's peak (compress/CompressJob.h CompressReport).
inline constexpr const char* kPeakHostBytes = "memory.peak_host_bytes";
inline constexpr const char* kHostBaseBytes = "memory.host_base_bytes";
inline constexpr const char* kPeakGpuBytes = "memory.peak_gpu_bytes";
// Bookkeeping: wall-clock seconds of the whole job (a compress run: compression and its evaluations).
inline constexpr const char* kSeconds = "timings.total_s";

// Today's name of a metric stored as `stored` in a run of `kind` ("compress", "fidelity", ...): the name
// itself unless it is a name a run of that kind was once recorded under.
std::string canonicalMetricName(const std::string& kind, const std::string& stored);

// Adds a stored metric to `metrics` under its canonical name. A run holding both an old and today's name for one
// metric keeps the value stored under today's name.
void addStoredMetric(std::map<std::string, double>& metrics, const std::string& kind, const std::string& stored,
                     double value);

}  // namespace pareto::metric
