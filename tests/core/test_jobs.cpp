// The jobs layer's recording (core/jobs/Job.h runRecorded, RunRecords.h makeRunStart): a job recorded from the
// start ends finished with its result, cancelled or failed; a job recorded once finished leaves no run when it
// is cancelled, fails or measured nothing; and every run starts from the one factory.
#include <gtest/gtest.h>

#include <stdexcept>

#include "SharedData.h"
#include "jobs/Job.h"
#include "jobs/RunRecords.h"
#include "store/RunRecorder.h"
#include "util/Error.h"

namespace pareto {
namespace {

// A job whose run() does what the test says: finish, throw Cancelled, or fail.
class ScriptedJob : public RecordedJob {
 public:
  enum class Ending { Finish, Cancel, Fail };
  ScriptedJob(Ending ending, Recording recording, bool results = true)
      : ending_(ending), recording_(recording), results_(results) {}
  Recording recording() const override { return recording_; }
  bool hasResults() const override { return results_; }
  RunStart runStart() const override {
    return makeRunStart("perplexity", "", "cpu", {{"window", 128}, {"text", "/data/held-out.txt"}});
  }
  void run(const ProgressCallback& progress, const CancelToken& cancel) override {
    if (progress) progress({"scripted", 1.0, "done"});
    if (cancel.isCancelled() || ending_ == Ending::Cancel) throw Cancelled();
    if (ending_ == Ending::Fail) throw InputError("held-out.txt: fewer tokens than one window");
    ran_ = true;
  }
  nlohmann::json result() const override {
    return {{"ppl", ran_ ? 12.5 : -1.0}, {"settings", {{"window", 64}, {"batch", 8}}}};
  }

 private:
  Ending ending_;
  Recording recording_;
  bool results_;
  bool ran_ = false;
};

class Jobs : public ::testing::Test {
 protected:
  void SetUp() override { store_ = std::make_unique<ExperimentStore>(test::scratchDir("jobs") + "/pareto.db"); }
  int64_t run(ScriptedJob job, const CancelToken& cancel = CancelToken()) {
    try {
      return runRecorded(job, store_.get(), {}, cancel);
    } catch (const Cancelled&) {
      return -1;
    } catch (const InputError&) {
      return -2;
    }
  }
  std::unique_ptr<ExperimentStore> store_;
};

TEST_F(Jobs, RecordedFromTheStartEndsFinishedCancelledOrFailed) {
  using E = ScriptedJob::Ending;
  const auto fromStart = RecordedJob::Recording::FromStart;
  const int64_t id = run(ScriptedJob(E::Finish, fromStart));
  ASSERT_GT(id, 0);
  const RunDetails d = store_->run(id);
  EXPECT_EQ(d.summary.status, RunStatus::Finished);
  EXPECT_EQ(d.summary.metrics.at("ppl"), 12.5);
  // The settings the job resolved add to those it began with, which win.
  EXPECT_EQ(d.recipe["window"], 128);
  EXPECT_EQ(d.recipe["batch"], 8);
  EXPECT_EQ(d.recipe["text"], "/data/held-out.txt");
  EXPECT_EQ(d.versions["pareto"].get<std::string>().empty(), false);

  EXPECT_EQ(run(ScriptedJob(E::Cancel, fromStart)), -1);
  EXPECT_EQ(run(ScriptedJob(E::Fail, fromStart)), -2);
  const std::vector<RunSummary> runs = store_->listRuns();   // newest first
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1].status, RunStatus::Cancelled);
  EXPECT_TRUE(runs[1].metrics.empty());
  EXPECT_EQ(runs[0].status, RunStatus::Failed);
  EXPECT_NE(runs[0].error.find("fewer tokens than one window"), std::string::npos) << runs[0].error;
}

TEST_F(Jobs, RecordedOnceFinishedLeavesNoRunUnlessItFinishedWithResults) {
  using E = ScriptedJob::Ending;
  const auto onceFinished = RecordedJob::Recording::OnceFinished;
  CancelToken cancelled;
  cancelled.cancel();
  EXPECT_EQ(run(ScriptedJob(E::Finish, onceFinished), cancelled), -1);
  EXPECT_EQ(run(ScriptedJob(E::Fail, onceFinished)), -2);
  EXPECT_EQ(run(ScriptedJob(E::Finish, onceFinished, /*results=*/false)), 0);
  EXPECT_TRUE(store_->listRuns().empty());
  const int64_t id = run(ScriptedJob(E::Finish, onceFinished));
  ASSERT_GT(id, 0);
  EXPECT_EQ(store_->run(id).summary.status, RunStatus::Finished);
  EXPECT_EQ(store_->listRuns().size(), 1u);
}

TEST_F(Jobs, WithoutAStoreTheJobStillRuns) {
  ScriptedJob job(ScriptedJob::Ending::Finish, RecordedJob::Recording::FromStart);
  EXPECT_EQ(runRecorded(job, nullptr, {}, CancelToken()), 0);
  EXPECT_EQ(job.result()["ppl"], 12.5);
}

TEST(RunRecords, OneFactoryForEveryRunStart) {
  const RunStart compress = makeRunStart("compress", "", "cpu", {{"prune", {{"method", "magnitude"}}}}, "out");
  EXPECT_EQ(compress.kind, "compress");
  EXPECT_EQ(compress.device, "cpu");
  EXPECT_FALSE(compress.recipe.contains("model"));   // a compress recipe stays a recipe compress accepts
  EXPECT_EQ(compress.output.front(), '/');           // made absolute
  EXPECT_TRUE(compress.versions.contains("pareto") && compress.versions.contains("libtorch"));
  const RunStart named = makeRunStart("perplexity", "no-such-model", "NVIDIA H200", {{"window", 128}});
  EXPECT_EQ(named.device, "NVIDIA H200");             // a description stays as given
  EXPECT_FALSE(named.model.has_value());              // not a model folder: the job records why it failed
  EXPECT_EQ(named.recipe["model"].get<std::string>().front(), '/');
  EXPECT_EQ(named.recipe["window"], 128);
}

}  // namespace
}  // namespace pareto
