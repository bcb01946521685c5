// The analyses' curves a compress run stores beside its metrics, and read back from the run store: the activation
// drift matrices and the Hessian discrepancy of every module. With them the workbench draws and overlays runs of
// earlier sessions as it does the session's own.
//
// In the result JSON (CompressEvaluateJob::result) they are "drift": {"steps", "prompts", "free": [layer][step],
// "forced": [layer][step], "counts": {"free": [step], "forced": [step]}} with null where no prompt reached a step,
// and "discrepancy": {"modules": [{"name", "discrepancy_columns", "discrepancy_text", "discrepancy_decode"}]};
// the store keeps the matrices' rows as curves ("drift.free[3]") and the modules' values as module stats
// (store/ResultJson.h).
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "analysis/ActivationDrift.h"
#include "analysis/HessianStudy.h"
#include "store/ExperimentStore.h"

namespace pareto {

nlohmann::json storedDriftJson(const ActivationDriftResult& drift);
nlohmann::json storedDiscrepancyJson(const HessianStudyResult& study);

// The run's drift, or null when it stored none (no drift measured, or a run recorded before the curves were).
std::shared_ptr<const ActivationDriftResult> storedDrift(const RunDetails& run);
// The run's per-module discrepancy with its summary recomputed, or null when it stored none.
std::shared_ptr<const HessianStudyResult> storedDiscrepancy(const RunDetails& run);

}  // namespace pareto
