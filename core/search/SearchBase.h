// What `search` starts from (issue 24): a base recipe that gives the calibration block (the Hessians every
// sensitivity is measured against), the modules never touched ("skip"), and under "candidates" an optional list
// of the prune/quantize choices each module may take:
//
//   {"calibration": {...}, "skip": ["lm_head"],
//    "candidates": [{"name": "dense"}, {"name": "gptq-int4-g128", "quantize": {"method": "gptq", "bits": 4, ...}},
//                   {"name": "2:4", "prune": {"method": "sparsegpt", "pattern": "2:4"}}]}
//
// "refine" (optional) sets how the estimated losses are made comparable across modules (search/Sensitivity.h):
//   "refine": {"windows": 4, "modules": 0, "reference": "gptq-int4-g64"}   or   "refine": false
// Without it the refinement runs with these defaults.
//
// A candidate is read as a recipe of its own blocks (compress/Recipe.h), strictly: an unknown key or a bad value
// is refused with the file and its key path ("base.json: candidates[2]: quantize.bits: ..."). A candidate with
// neither block is dense. Without "candidates" the default list of defaultCandidates() applies. The base's own
// "prune", "quantize" and "overrides" are not used (the search decides them per module) and are refused, so
// that nobody expects them to apply.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "compress/Recipe.h"

namespace pareto {

struct SearchCandidate {
  std::string name;            // "gptq-int4-g128"; unique within the list
  nlohmann::json prune;        // the recipe block as written; null: no pruning
  nlohmann::json quantize;     // null: no quantization
  // The candidate as a recipe (the base's calibration and skip + its blocks); nullopt for dense.
  std::optional<Recipe> recipe;
  bool dense() const { return !recipe; }
};

// The KL refinement of the sensitivity table (search/SensitivityRefinement.h).
struct RefineOptions {
  bool enabled = true;
  int64_t windows = 4;       // calibration sequences the KL to dense is measured on (the first ones)
  int64_t modules = 0;       // the K modules of largest reference output error measured; 0: every module
  std::string reference;     // the candidate each module is replaced by; "": the rule of referenceCandidate()
};

struct SearchBase {
  std::string path;
  CalibrationSpec calibration;
  // The calibration block as written, with its file made absolute, for recipes written elsewhere.
  nlohmann::json calibrationBlock;
  std::vector<std::string> skip;
  std::vector<SearchCandidate> candidates;
  bool defaultCandidates = false;   // no "candidates" list: defaultCandidateBlocks() apply
  RefineOptions refine;
};

// The default list as the issue names it: dense, int8 per channel, int4 in groups of 64 and of 128, GPTQ int3
// g128, SpQR 3-bit, 2:4, 2:4 + int4, and llama.cpp's grids Q8_0, Q4_K and Q4_0, as "candidates" entries.
nlohmann::json defaultCandidateBlocks();

// Reads `path`. Throws InputError naming the file and key path: no calibration block (the sensitivities need
// Hessians), a bad or duplicate candidate, a bad "refine" block (a reference naming no candidate or dense), "prune"/"quantize"/"overrides" at the top level, fewer than two
// candidates.
SearchBase readSearchBase(const std::string& path);
SearchBase searchBaseFromJson(const nlohmann::json& j, const std::string& baseDir, const std::string& sourceName);

}  // namespace pareto
