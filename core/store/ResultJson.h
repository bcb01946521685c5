// A job's result as the store keeps it, from the JSON object the job prints (pareto-cli --json): numbers become
// metrics ("ppl", "timings.total_s"), arrays of numbers curves over their index ("plateau.free"), arrays of such
// arrays one curve per row ("free[3]": drift of layer 3 over decode steps; nulls are points nobody reached), and
// arrays of objects with a "name" module statistics ("modules": per-module sparsity, bits per weight, δ).
// Booleans count as 0/1; strings are not results. The "settings" member is the job's configuration and is
// returned separately. One rule for every command keeps new commands recorded without store changes.
#pragma once

#include <nlohmann/json.hpp>

#include "store/ExperimentStore.h"

namespace pareto {

// Appends to `results`; result["settings"] is merged into results.recipe (the settings recorded at begin are
// expected there already when the caller wants them kept).
void addResultsFromJson(RunResults& results, const nlohmann::json& result);

}  // namespace pareto
