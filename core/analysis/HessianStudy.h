// The Hessian-discrepancy study (DESIGN.md "Definitions"): for every linear, how far the text-calibration and
// the decode-calibration Hessians are from the decode-time Hessian of held-out prompts, δ(text) vs δ(decode).
#pragma once

#include <string>
#include <vector>

#include "analysis/HessianDiscrepancy.h"
#include "util/Progress.h"

namespace pareto {

struct LoadedModel;

struct HessianStudyOptions {
  std::string textFile;          // text calibration source
  std::string promptsFile;       // prompts: a seeded half calibrates, the disjoint other half is the target
  int64_t calibTokens = 16384;   // tokens reaching each calibration Hessian (text windows / decode steps)
  int64_t targetTokens = 0;      // decode tokens of the held-out target; 0: same as calibTokens
  int64_t window = 512;          // text calibration window
  int64_t maxNewTokens = 128;    // per prompt, for decode calibration and target
  uint64_t seed = 0;
  int64_t batch = 0;             // sequences per forward / prompts per generation batch; 0 picks
  DiscrepancyOptions discrepancy;
};

struct ModuleDiscrepancy {
  std::string name;
  int64_t columns = 0;
  DiscrepancyResult text, decode;
  double ratio() const { return text.delta / decode.delta; }   // > 1: decode calibration is closer
};

struct HessianStudyResult {
  std::vector<ModuleDiscrepancy> modules;   // every linear, in model order
  DiscrepancySummary summary;
  int64_t calibrationPrompts = 0, targetPrompts = 0;
  int64_t textTokens = 0, decodeTokens = 0, targetTokens = 0;
  double seconds = 0;
};

HessianStudyResult runHessianStudy(const LoadedModel& model, const HessianStudyOptions& opts,
                                   const ProgressCallback& progress = {}, const CancelToken* cancel = nullptr);

}  // namespace pareto
