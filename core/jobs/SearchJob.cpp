#include "jobs/SearchJob.h"

#include "model/ModelSummary.h"
#include "search/SensitivityFile.h"
#include "util/Error.h"

namespace pareto {

SearchJob::SearchJob(SearchOptions options) : options_(std::move(options)) {}

void SearchJob::run(const ProgressCallback& progress, const CancelToken& cancel) {
  SearchReport r;
  r.base = readSearchBase(options_.baseRecipe);
  if (options_.refine) r.base.refine.enabled = *options_.refine;
  if (options_.refineWindows) {
    if (*options_.refineWindows < 1) throw InputError("refine windows: must be at least 1");
    r.base.refine.windows = *options_.refineWindows;
  }
  if (options_.refineModules) {
    if (*options_.refineModules < 0) throw InputError("refine modules: must be 0 (every module) or more");
    r.base.refine.modules = *options_.refineModules;
  }
  if (options_.refineReference) r.base.refine.reference = *options_.refineReference;
  r.table = planSensitivity(r.base, summarizeModel(options_.modelDir));
  checkBudget(r.table, options_.budget, options_.bandwidth);
  const nlohmann::json key = sensitivityKey(r.base, options_.modelDir, options_.dtype);
  std::optional<SensitivityTable> stored;
  if (!options_.tableFile.empty()) stored = readSensitivityTable(options_.tableFile, key);
  tableReused_ = stored.has_value();
  if (stored) {
    const SensitivityTable planned = std::move(r.table);
    r.table = std::move(*stored);
    if (r.table.modules.size() != planned.modules.size() || r.table.candidates != planned.candidates)
      throw InputError(fileMessage(options_.tableFile, "holds a table of other modules or candidates than " +
                                                           options_.modelDir + " with this base"));
  } else {
    measureSensitivity(r.table, r.base, options_.modelDir, makeRuntimeOptions(options_.device, options_.dtype),
                       options_.batch, progress, &cancel);
    if (!options_.tableFile.empty()) writeSensitivityTable(options_.tableFile, r.table, key);
  }
  r.budget = options_.budget;
  r.front = searchFront(r.table, options_.budget.kind, options_.bandwidth);
  const SearchPoint& chosen = chooseForBudget(r.front, options_.budget);
  r.chosen = size_t(&chosen - r.front.points.data());
  if (cancel.isCancelled()) throw Cancelled();
  report_ = std::move(r);
}

}  // namespace pareto
