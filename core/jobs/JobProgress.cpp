#include "jobs/JobProgress.h"

#include <algorithm>

namespace pareto {

std::vector<JobStage> compressEvaluateStages(bool calibrates, bool perplexity, bool prompts, bool drift, bool study) {
  std::vector<JobStage> stages;
  stages.push_back({{"load", "memory", "resume"}, 2});
  if (calibrates) stages.push_back({{"calibration", "decode calibration", "calibration / generation"}, 15});
  stages.push_back({{"sequential pass", "prune", "pack"}, calibrates ? 40 : 10});
  stages.push_back({{"write", "done"}, 4});
  if (perplexity) stages.push_back({{"perplexity"}, 12});
  if (prompts) stages.push_back({{"continuations", "decode fidelity"}, 10});
  if (prompts && drift) stages.push_back({{"activation drift"}, 8});
  if (study) stages.push_back({{"held-out target", "hessians and discrepancy"}, 25});
  return stages;
}

JobProgress::JobProgress(std::vector<JobStage> stages) : stages_(std::move(stages)) {
  for (const JobStage& s : stages_) total_ += s.weight;
}

double JobProgress::update(const ProgressUpdate& u) {
  for (size_t i = current_; i < stages_.size(); ++i) {
    const auto& names = stages_[i].names;
    if (std::find(names.begin(), names.end(), u.stage) == names.end()) continue;
    current_ = i;
    double before = 0;
    for (size_t j = 0; j < i; ++j) before += stages_[j].weight;
    const double own = stages_[i].weight * std::clamp(u.fraction, 0.0, 1.0);
    if (total_ > 0) fraction_ = std::max(fraction_, std::min(1.0, (before + own) / total_));
    break;
  }
  return fraction_;
}

double JobProgress::secondsLeft(double fraction, double elapsedSeconds) {
  if (fraction < 0.02 || elapsedSeconds <= 0) return -1;
  return elapsedSeconds * (1 - fraction) / fraction;
}

}  // namespace pareto
