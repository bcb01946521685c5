// The whole-job fraction of jobs/JobProgress.h: stages weighted in order, never moving back, names not listed
// holding the position, and the time left at the pace so far.
#include <gtest/gtest.h>

#include "jobs/JobProgress.h"

namespace pareto {
namespace {

TEST(JobProgress, WeighsStagesInOrderAndNeverMovesBack) {
  JobProgress p({{{"load"}, 1}, {{"sequential pass", "prune"}, 6}, {{"perplexity"}, 3}});
  EXPECT_DOUBLE_EQ(p.update({"load", 1.0, ""}), 0.1);
  EXPECT_DOUBLE_EQ(p.update({"sequential pass", 0.5, "layer 2/4"}), 0.4);
  EXPECT_DOUBLE_EQ(p.update({"sequential pass", 1.0, ""}), 0.7);
  EXPECT_DOUBLE_EQ(p.update({"load", 0.0, "dense and compressed models"}), 0.7);   // an earlier name: held
  EXPECT_DOUBLE_EQ(p.update({"something new", 0.9, ""}), 0.7);                      // not listed: held
  EXPECT_DOUBLE_EQ(p.update({"perplexity", 0.5, ""}), 0.85);
  EXPECT_DOUBLE_EQ(p.update({"perplexity", 1.0, ""}), 1.0);
  EXPECT_DOUBLE_EQ(p.fraction(), 1.0);
}

TEST(JobProgress, CompressEvaluateStagesFollowTheSettings) {
  const auto all = compressEvaluateStages(true, true, true, true, true);
  const auto bare = compressEvaluateStages(false, false, false, false, false);
  EXPECT_GT(all.size(), bare.size());
  // Without evaluations, writing the folder ends the job.
  JobProgress p(bare);
  EXPECT_DOUBLE_EQ(p.update({"done", 1.0, ""}), 1.0);
  // Drift is measured on the prompts: no prompts, no drift stage.
  EXPECT_EQ(compressEvaluateStages(false, false, false, true, false).size(), bare.size());
}

TEST(JobProgress, TimeLeftFollowsThePaceSoFar) {
  EXPECT_LT(JobProgress::secondsLeft(0.01, 10), 0);   // too early to tell
  EXPECT_DOUBLE_EQ(JobProgress::secondsLeft(0.25, 10), 30);
  EXPECT_DOUBLE_EQ(JobProgress::secondsLeft(1.0, 10), 0);
}

}  // namespace
}  // namespace pareto
