// How pareto-cli jobs record themselves in the experiment store (core/store): the global --db FILE and
// --no-record options, and a wrapper that turns a subcommand's body into a recorded run (running → finished,
// failed with the error, or cancelled on Ctrl-C). History must never cost a result: when the default database
// cannot be used the job runs anyway with a warning; only a database the user named (--db, PARETO_DB) that
// cannot be opened stops the job before it starts. What a run records is core's (jobs/RunRecords.h), as for the
// workbench's runs.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "jobs/Job.h"
#include "store/ExperimentStore.h"
#include "util/FileSystem.h"   // absolutePath, for the settings commands record

namespace CLI {
class App;
}

namespace pareto {
class RunRecorder;
}

namespace pareto::cli {

// Registers --db FILE and --no-record on the app. Call it before any subcommand is added: it also lets these
// options follow the subcommand (`pareto-cli perplexity ... --db runs.db`).
void addRecordingOptions(CLI::App& app);

// --db, else $PARETO_DB, else the default location (ExperimentStore's defaultStorePath).
std::string storePath();
// Opens (creating) the database the `runs` commands read. Throws InputError naming the file.
ExperimentStore openStore();
// The same database opened read-only, for the commands that only read (runs list/show/compare/export): works
// in a read-only folder and never creates, migrates or writes anything.
ExperimentStore openStoreForReading();
// Whether --no-record was given: nothing is written to the database.
bool recordingDisabled();

class JobRecord {
 public:
  explicit JobRecord(std::string kind);
  ~JobRecord();
  JobRecord(const JobRecord&) = delete;
  JobRecord& operator=(const JobRecord&) = delete;

  // Records the run as running, as core's jobs do (jobs/RunRecords.h makeRunStart): a core job's runStart(),
  // or the model folder's identity, the device and the command's settings.
  void begin(const RunStart& start);
  void begin(const std::string& modelDir, const std::string& device, nlohmann::json settings);
  // Records the result JSON the command prints (core/store/ResultJson.h) and marks the run finished.
  void finish(const nlohmann::json& result);
  // Records a core job's results (jobs/Job.h record: its result() and what it keeps besides) and marks the run
  // finished.
  void finish(const RecordedJob& job);
  // A core job as this run: begun from its runStart(), run with the terminal's progress and Ctrl-C
  // (CliSupport.h), finished with its results.
  void run(RecordedJob& job);
  // The recorder, or nullptr when nothing is recorded (--no-record, or the database was unusable).
  RunRecorder* recorder() { return recorder_.get(); }

  void fail(const std::string& message);
  void cancel();
  // Why finish() could not record the result (the final write failed after its retries); "" when it did.
  const std::string& unrecorded() const { return unrecorded_; }

 private:
  void finishRecording();

  std::string kind_;
  nlohmann::json settings_;   // as recorded at begin
  std::unique_ptr<ExperimentStore> store_;
  std::unique_ptr<RunRecorder> recorder_;
  std::string unrecorded_;
};

// A subcommand callback that runs body(run) as a recorded run of `kind`: the body calls run.begin(...) first
// and run.finish(result) before printing; an exception marks the run failed (cancelled for Ctrl-C) and goes on
// to main's handlers.
std::function<void()> recordedJob(std::string kind, std::function<void(JobRecord&)> body);

// Records a finished job whose run is kept only once it finished with results (a benchmark,
// RecordedJob::Recording::OnceFinished); a store that cannot be written only warns.
void recordFinished(const RecordedJob& job);


}  // namespace pareto::cli
