// Loading a whole model reports its progress block by block and stops at a cancel within one tensor
// (model/LoadedModel.h loadModel, jobs/ModelCache.h, the jobs that load): a job cancelled while ref-small loads
// answers within a second and keeps nothing loaded.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "SharedData.h"
#include "jobs/GenerateJob.h"
#include "jobs/ModelCache.h"
#include "model/LoadedModel.h"
#include "util/Error.h"

namespace pareto {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string refSmall() { return test::sharedPath("models/ref-small"); }

TEST(ModelLoad, ReportsEveryBlockInOrder) {
  PARETO_REQUIRE_SHARED();
  std::vector<ProgressUpdate> seen;
  const LoadedModel m = loadModel(refSmall(), makeRuntimeOptions("cpu", "float32"), WeightResidency::Whole,
                                  [&](const ProgressUpdate& u) { seen.push_back(u); });
  // The embedding, each layer, the head, and the end.
  ASSERT_EQ(seen.size(), size_t(m.model->numLayers() + 3));
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].stage, "load");
    if (i > 0) EXPECT_GT(seen[i].fraction, seen[i - 1].fraction);
  }
  EXPECT_DOUBLE_EQ(seen.front().fraction, 0.0);
  EXPECT_DOUBLE_EQ(seen.back().fraction, 1.0);
  EXPECT_NE(seen[1].message.find("layer 1/"), std::string::npos) << seen[1].message;
}

TEST(ModelLoad, CancelStopsWithinOneTensorAndWellWithinASecond) {
  PARETO_REQUIRE_SHARED();
  CancelToken cancel;
  Clock::time_point cancelledAt;
  size_t reportsAfterCancel = 0;
  auto progress = [&](const ProgressUpdate& u) {
    if (cancel.isCancelled()) ++reportsAfterCancel;
    // Cancelled as the first layer begins: the embedding is read, the layers are not.
    if (u.message.find("layer 1/") != std::string::npos) {
      cancel.cancel();
      cancelledAt = Clock::now();
    }
  };
  EXPECT_THROW(loadModel(refSmall(), makeRuntimeOptions("cpu", "float32"), WeightResidency::Whole, progress, &cancel),
               Cancelled);
  EXPECT_LT(secondsSince(cancelledAt), 1.0);
  EXPECT_EQ(reportsAfterCancel, 0u) << "the load went on to another block after the cancel";
}

TEST(ModelLoad, CancelledCacheLoadLeavesTheSlotEmptyAndTheNextLoadWorks) {
  PARETO_REQUIRE_SHARED();
  ModelCache cache;
  const RuntimeOptions runtime = makeRuntimeOptions("cpu", "float32");
  CancelToken cancel;
  cancel.cancel();
  EXPECT_THROW(cache.dense(refSmall(), runtime, {}, &cancel), Cancelled);
  EXPECT_TRUE(cache.denseKey().empty());
  const LoadedModel& m = cache.dense(refSmall(), runtime);
  EXPECT_GT(m.model->numLayers(), 0);
  EXPECT_FALSE(cache.denseKey().empty());
}

// The GUI's generation and evaluation load through the jobs, with the token the window's Cancel sets: a cancel
// during the load ends the job with Cancelled within a second.
TEST(ModelLoad, JobCancelledDuringItsLoadAnswersWithinASecond) {
  PARETO_REQUIRE_SHARED();
  GenerateOptions o;
  o.modelDir = refSmall();
  o.compressedDir = refSmall();   // two loads: the cancel lands in the first or the second
  o.prompt = "The";
  o.generation.maxNewTokens = 4;
  GenerateJob job(o);
  CancelToken cancel;
  Clock::time_point cancelledAt;
  bool cancelledDuringLoad = false;
  auto progress = [&](const ProgressUpdate& u) {
    if (u.stage == "load" && u.fraction > 0.25 && !cancel.isCancelled()) {
      cancelledDuringLoad = true;
      cancel.cancel();
      cancelledAt = Clock::now();
    }
  };
  EXPECT_THROW(job.run(progress, cancel), Cancelled);
  EXPECT_TRUE(cancelledDuringLoad);
  EXPECT_LT(secondsSince(cancelledAt), 1.0);
  EXPECT_TRUE(job.report().sequences.empty()) << "nothing was generated";
}

}  // namespace
}  // namespace pareto
