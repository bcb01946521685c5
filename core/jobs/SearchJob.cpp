#include "jobs/SearchJob.h"

#include "model/ModelSummary.h"
#include "util/Error.h"

namespace pareto {

SearchJob::SearchJob(SearchOptions options) : options_(std::move(options)) {}

void SearchJob::run(const ProgressCallback& progress, const CancelToken& cancel) {
  SearchReport r;
  r.base = readSearchBase(options_.baseRecipe);
  r.table = planSensitivity(r.base, summarizeModel(options_.modelDir));
  checkBudget(r.table, options_.budget, options_.bandwidth);
  measureSensitivity(r.table, r.base, options_.modelDir, makeRuntimeOptions(options_.device, options_.dtype),
                     options_.batch, progress, &cancel);
  r.budget = options_.budget;
  r.front = searchFront(r.table, options_.budget.kind, options_.bandwidth);
  const SearchPoint& chosen = chooseForBudget(r.front, options_.budget);
  r.chosen = size_t(&chosen - r.front.points.data());
  if (cancel.isCancelled()) throw Cancelled();
  report_ = std::move(r);
}

}  // namespace pareto
