// A long job as both front ends run it (DESIGN.md: "Long jobs run through one Job interface in core"): options
// in (the job's constructor), run(progress, cancel), a report out (the job's report()), and the run it records
// in the store. pareto-cli's commands and the workbench's workers only turn their options or widgets into a
// job's options and show what it reports.
//
// run() calls `progress` with a stage, a fraction and a message between units of work (windows, layers,
// batches, formats) and checks `cancel` at the same points, throwing Cancelled (util/Error.h): a cancel stops
// within one unit and leaves no partial output behind (folders are written through util/OutputFolder.h, or
// removed again when a later stage is cancelled).
//
// A job the store keeps (RecordedJob) builds its own run record: runStart() (through the one factory,
// jobs/RunRecords.h) says what its run records when it begins, record() what it adds once run() has returned;
// runRecorded() does both around run().
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "store/ExperimentStore.h"
#include "util/Progress.h"

namespace pareto {

class Job {
 public:
  virtual ~Job() = default;
  virtual void run(const ProgressCallback& progress, const CancelToken& cancel) = 0;
};

// A job whose run the store keeps (every kind of store/ExperimentStore.h runKinds(); generation keeps none).
class RecordedJob : public Job {
 public:
  // When its run is recorded. FromStart: as running before run(), then finished, failed or cancelled (compress,
  // analyses: a run that never ends reads as interrupted). OnceFinished: one finished run written after run()
  // returns, nothing for a failed or cancelled job nor for one with nothing to record (benchmarks: only
  // measurements are worth keeping).
  enum class Recording { FromStart, OnceFinished };
  virtual Recording recording() const { return Recording::FromStart; }
  // Whether a finished OnceFinished job has anything to record.
  virtual bool hasResults() const { return true; }

  virtual RunStart runStart() const = 0;
  // The finished job's result as one JSON object: what `pareto-cli ... --json` prints, and (through
  // store/ResultJson.h, so its key paths are the metric names of store/MetricNames.h) what the store keeps.
  virtual nlohmann::json result() const = 0;
  // Adds the finished job's results to a run: result() as the store reads it, plus what a job keeps besides
  // (a benchmark's rows).
  virtual void record(RunResults& results) const;
};

// Why a run was not recorded, or not completely: `problem` is called at most once per stage that failed, with
// "begin" (nothing is recorded) or "finish" (the result could not be written), and the store's error.
using StoreProblem = std::function<void(const std::string& stage, const std::string& error)>;

// Runs `job` as one run of `store` (nullptr: unrecorded) as job.recording() says: begun from job.runStart(),
// finished with job.record(), or cancelled (Cancelled) or failed (any other exception, with its message); the
// exception is rethrown. History never costs a result: a store that cannot be written reports through
// `problem` and the job runs (and returns) all the same. Returns the run's id, 0 when it was not recorded.
int64_t runRecorded(RecordedJob& job, ExperimentStore* store, const ProgressCallback& progress, const CancelToken& cancel,
                    const StoreProblem& problem = {});

}  // namespace pareto
