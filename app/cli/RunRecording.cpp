#include "RunRecording.h"

#include <c10/util/Exception.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>

#include "CliSupport.h"
#include "jobs/Job.h"
#include "jobs/RunRecords.h"
#include "store/ResultJson.h"
#include "store/RunRecorder.h"
#include "util/Error.h"

namespace pareto::cli {
namespace {

struct RecordingOptions {
  std::string db;
  bool noRecord = false;
};

RecordingOptions& options() {
  static RecordingOptions o;
  return o;
}

// A database the user named is one they expect to be used: failing to open it is an error. The default one is
// a convenience that must not stop a measurement.
bool databaseNamed() {
  const char* env = std::getenv("PARETO_DB");
  return !options().db.empty() || (env != nullptr && *env != '\0');
}

void warn(const std::string& what) {
  printErrorLine("pareto-cli: warning: " + what + " (this run is not recorded; --no-record skips recording)");
}

// PARETO_DB_LOCK_TIMEOUT: seconds the final write of a run waits for another process's lock on the database
// (default: the store's 120 s).
void applyLockTimeout(ExperimentStore& store) {
  const char* env = std::getenv("PARETO_DB_LOCK_TIMEOUT");
  if (env == nullptr || *env == '\0') return;
  char* end = nullptr;
  const double seconds = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(seconds >= 0) || seconds > 86400)
    throw InputError("PARETO_DB_LOCK_TIMEOUT: \"" + std::string(env) + "\" is not a number of seconds (0 to 86400)");
  store.setFinalWriteTimeout(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

std::unique_ptr<ExperimentStore> openForRecording() {
  if (options().noRecord) return nullptr;
  try {
    auto store = std::make_unique<ExperimentStore>(storePath());
    applyLockTimeout(*store);
    return store;
  } catch (const std::exception& e) {
    if (databaseNamed()) throw;
    warn(e.what());
    return nullptr;
  }
}

}  // namespace

void addRecordingOptions(CLI::App& app) {
  // Subcommands inherit fallthrough when they are created: options they do not know go to the app, so the
  // global options work after the subcommand name too.
  app.fallthrough();
  app.add_option("--db", options().db,
                 "Experiment database (SQLite) that jobs are recorded in and `runs` reads (default: $PARETO_DB, "
                 "else $XDG_DATA_HOME/pareto/pareto.db, else ~/.local/share/pareto/pareto.db)");
  app.add_flag("--no-record", options().noRecord, "Do not record this job in the experiment database");
}

std::string storePath() { return absolutePath(options().db.empty() ? defaultStorePath() : options().db); }

ExperimentStore openStore() { return ExperimentStore(storePath()); }

ExperimentStore openStoreForReading() { return ExperimentStore::openForReading(storePath()); }

bool recordingDisabled() { return options().noRecord; }

JobRecord::JobRecord(std::string kind) : kind_(std::move(kind)) {}
JobRecord::~JobRecord() = default;

void JobRecord::begin(const std::string& modelDir, const std::string& device, nlohmann::json settings) {
  begin(makeRunStart(kind_, modelDir, device, std::move(settings)));
}

void JobRecord::begin(const RunStart& start) {
  store_ = openForRecording();
  if (!store_) return;
  settings_ = start.recipe;
  try {
    recorder_ = std::make_unique<RunRecorder>(*store_, start);
  } catch (const std::exception& e) {
    warn(e.what());
    store_.reset();
  }
}

void JobRecord::finish(const nlohmann::json& result) {
  if (!recorder_) return;
  addResultsFromJson(recorder_->results(), result);
  finishRecording();
}

void JobRecord::finish(const RecordedJob& job) {
  if (!recorder_) return;
  job.record(recorder_->results());
  finishRecording();
}

void JobRecord::run(RecordedJob& job) {
  begin(job.runStart());
  job.run(terminalProgress(), interruptToken());
  finish(job);
}

void JobRecord::finishRecording() {
  keepBegunSettings(recorder_->results(), settings_);
  try {
    recorder_->finish();
  } catch (const std::exception& e) {
    // The job is done and prints its result; the command still fails once it has (recordedJob), so a script
    // never takes a run that reads "interrupted" in the store for a recorded one.
    unrecorded_ = std::string("the result was not recorded: ") + e.what();
    return;
  }
  if (::isatty(STDERR_FILENO) != 0)
    printErrorLine("pareto-cli: recorded as run " + std::to_string(recorder_->id()) + " in " + store_->path());
}

void JobRecord::fail(const std::string& message) {
  if (recorder_) recorder_->fail(message);
}

void JobRecord::cancel() {
  if (recorder_) recorder_->cancel();
}

std::function<void()> recordedJob(std::string kind, std::function<void(JobRecord&)> body) {
  return [kind = std::move(kind), body = std::move(body)] {
    // Ctrl-C from here on cancels the job at its next check and the run is recorded as cancelled; without the
    // handler a Ctrl-C while the model loads would end the process and leave the run interrupted.
    (void)interruptToken();
    JobRecord run(kind);
    try {
      body(run);
      if (!run.unrecorded().empty()) throw Error(run.unrecorded());
    } catch (const Cancelled&) {
      run.cancel();
      throw;
    } catch (const c10::Error& e) {
      run.fail(e.what_without_backtrace());
      throw;
    } catch (const std::exception& e) {
      run.fail(e.what());
      throw;
    }
    // A body that returns without finish(): RunRecorder's destructor marks the run failed.
  };
}

void recordFinished(const RecordedJob& job) {
  if (!job.hasResults()) return;
  const RunStart start = job.runStart();
  JobRecord run(start.kind);
  run.begin(start);
  run.finish(job);
  if (!run.unrecorded().empty()) warn(run.unrecorded());
}

}  // namespace pareto::cli
