// What compress does to one module, decided once from the recipe and the module's shape: which solvers run and
// which stored format the result takes. The compress job follows the plan and the instant estimate
// (compress/RecipeEstimate.h) counts the plan's bytes, so the two cannot disagree.
//
//   N:M pruning of a module whose columns are a multiple of 32   → bitmask-N:M, its kept values as fp values, or
//                                                                   an int grid (rtn, gptq) or SpQR over them
//   rtn, gptq (also after unstructured pruning)                  → intB-… (a packed integer grid)
//   spqr (also after unstructured pruning)                       → spqr-Bbit…
//   rtn, gptq with "format": gguf-…                              → that gguf-* format; a k-quant on a module whose
//                                                                   columns are not whole 256-weight super-blocks
//                                                                   falls back (q4_k → q4_0, q6_k → q8_0) and `note`
//                                                                   says so; never with pruning
//   otherwise (unstructured pruning alone, skipped modules)      → dense
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "compress/Recipe.h"
#include "formats/WeightFormat.h"

namespace pareto {

struct ModulePlan {
  std::string module;
  int64_t rows = 0, cols = 0;
  std::optional<PruneSpec> prune;
  std::optional<QuantizeSpec> quant;
  WeightFormat format;   // the stored layout
  std::string note;      // why the layout differs from what the recipe asked (a GGUF fallback); "" otherwise

  bool touched() const { return prune || quant; }
  // "sparsegpt+gptq", "" when untouched; "2:4 int4 g128" (the pruning pattern and the grid).
  std::string method() const;
  std::string pattern() const;
  // Kept values per row of the N:M bitmask (the columns of the grid over them); cols without a bitmask.
  int64_t valueColumns() const;
  // The grid the solvers quantize with, in original columns: after N:M pruning a group of g kept values spans
  // g·M/N columns.
  QuantSpec solverGrid() const;
  // Every byte the stored format takes: `valueBytes` per fp value (the checkpoint's dtype), `outliers` fp16
  // outliers for SpQR. A dense module counts rows · cols · valueBytes.
  uint64_t storedBytes(int64_t valueBytes, int64_t outliers = 0) const;
};

// The plan for `module` of shape [rows, cols]. Throws InputError naming the module when the job would refuse
// it: a pattern the columns do not take, groups that do not fit the (kept) columns, GPTQ act-order with dynamic
// groups, codes that do not fill whole bytes, SpQR groups that do not divide the rows or columns, a GGUF format
// with pruning or on columns that are not a multiple of 32.
ModulePlan planModule(const Recipe& recipe, const std::string& module, int64_t rows, int64_t cols);

}  // namespace pareto
