// One progress fraction and an ETA for a whole job from its stages' own reports (util/Progress.h: each stage
// reports its fraction from 0 to 1). A job's stages are listed in order, each with the names it reports under and
// a weight: its expected share of the job's time. The whole job's fraction is the weights of the stages before
// the current one plus its share of its own; it never moves back (a stage name reported again later, such as a
// study's own calibration, holds the position), and a name not listed holds it too.
#pragma once

#include <string>
#include <vector>

#include "util/Progress.h"

namespace pareto {

struct JobStage {
  std::vector<std::string> names;   // the stage names it reports under ("sequential pass", "prune" ...)
  double weight = 1;                // its expected share of the job's time (any scale)
};

// The stages of a compress + evaluate run (jobs/CompressEvaluateJob.h) as it will go: calibration only when the
// recipe calibrates, perplexity with held-out text, fidelity with held-out prompts, drift with drift steps, the
// Hessian study when asked. Weights from ref-tiny and Llama-class runs on the CPU and a GPU (the sequential pass
// and the evaluations dominate; loading and writing are short).
std::vector<JobStage> compressEvaluateStages(bool calibrates, bool perplexity, bool prompts, bool drift, bool study);

class JobProgress {
 public:
  explicit JobProgress(std::vector<JobStage> stages);
  // The whole job's fraction after this report.
  double update(const ProgressUpdate& update);
  double fraction() const { return fraction_; }
  // Seconds left at the pace so far (elapsed / fraction done); negative until a pace is known (2% done).
  static double secondsLeft(double fraction, double elapsedSeconds);

 private:
  std::vector<JobStage> stages_;
  double total_ = 0;
  size_t current_ = 0;
  double fraction_ = 0;
};

}  // namespace pareto
