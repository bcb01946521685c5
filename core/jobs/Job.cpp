#include "jobs/Job.h"

#include <c10/util/Exception.h>

#include <memory>

#include "jobs/RunRecords.h"
#include "store/ResultJson.h"
#include "store/RunRecorder.h"
#include "util/Error.h"

namespace pareto {

void RecordedJob::record(RunResults& results) const { addResultsFromJson(results, result()); }

namespace {

std::unique_ptr<RunRecorder> beginRun(const RecordedJob& job, ExperimentStore* store, nlohmann::json& begun,
                                      const StoreProblem& problem) {
  if (store == nullptr) return nullptr;
  try {
    const RunStart start = job.runStart();
    begun = start.recipe;
    return std::make_unique<RunRecorder>(*store, start);
  } catch (const std::exception& e) {
    if (problem) problem("begin", e.what());
    return nullptr;
  }
}

}  // namespace

int64_t runRecorded(RecordedJob& job, ExperimentStore* store, const ProgressCallback& progress, const CancelToken& cancel,
                    const StoreProblem& problem) {
  const bool fromStart = job.recording() == RecordedJob::Recording::FromStart;
  nlohmann::json begun;
  std::unique_ptr<RunRecorder> recorder;
  if (fromStart) recorder = beginRun(job, store, begun, problem);
  try {
    job.run(progress, cancel);
  } catch (const Cancelled&) {
    if (recorder) recorder->cancel();
    throw;
  } catch (const c10::Error& e) {
    if (recorder) recorder->fail(e.what_without_backtrace());
    throw;
  } catch (const std::exception& e) {
    if (recorder) recorder->fail(e.what());
    throw;
  }
  if (!fromStart && job.hasResults()) recorder = beginRun(job, store, begun, problem);
  if (!recorder) return 0;
  try {
    job.record(recorder->results());
    keepBegunSettings(recorder->results(), begun);
    recorder->finish();
  } catch (const std::exception& e) {
    if (!recorder->ended()) recorder->fail(e.what());
    if (problem) problem("finish", e.what());
    return 0;
  }
  return recorder->id();
}

}  // namespace pareto
