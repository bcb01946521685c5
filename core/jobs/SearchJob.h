// The search of issue 24 as both front ends run it (`pareto-cli search`, the workbench's Search view): the base
// recipe read, the reachable range checked against the budget before any work, the sensitivity pass, the front
// and the allocation chosen for the budget (core/search). The job writes nothing: the caller writes the recipes
// it wants (searchRecipe), so a cancelled search leaves nothing behind; only a finished sensitivity table is
// written, to SearchOptions::tableFile when one is given. A search keeps no run in the store (the
// compress runs of its recipes do).
#pragma once

#include <optional>
#include <string>

#include "compress/RecipeEstimate.h"
#include "jobs/Job.h"
#include "model/Device.h"
#include "search/Search.h"

namespace pareto {

struct SearchOptions {
  std::string modelDir;
  std::string baseRecipe;   // search/SearchBase.h
  SearchBudget budget;
  std::string device = "cpu";
  std::string dtype = kDefaultComputeDtype;
  int64_t batch = 0;        // calibration sequences per forward; 0 picks
  // Each set one replaces the base recipe's "refine" setting of that name (the CLI's --no-refine and --refine-*
  // flags, the Search view's checkbox).
  std::optional<bool> refine;
  std::optional<int64_t> refineWindows, refineModules;
  std::optional<std::string> refineReference;
  // search/SensitivityFile.h: a table measured for the same model, base and dtype is read from here instead of
  // measured; a table measured here is written here. "": none.
  std::string tableFile;
  // What predicted tokens/s come from: this device's kernel benchmarks, or one bandwidth (Search.h).
  DecodeBandwidth bandwidth;
};

class SearchJob : public Job {
 public:
  explicit SearchJob(SearchOptions options);
  // InputError for a bad base recipe or model, or a budget outside the reachable range (before the pass);
  // Cancelled between modules and candidates.
  void run(const ProgressCallback& progress, const CancelToken& cancel) override;
  const SearchReport& report() const { return report_; }
  bool tableReused() const { return tableReused_; }

 private:
  SearchOptions options_;
  SearchReport report_;
  bool tableReused_ = false;
};

}  // namespace pareto
