// How pareto-cli jobs record themselves in the experiment store (core/store): the global --db FILE and
// --no-record options, and a wrapper that turns a subcommand's body into a recorded run (running → finished,
// failed with the error, or cancelled on Ctrl-C). History must never cost a result: when the default database
// cannot be used the job runs anyway with a warning; only a database the user named (--db, PARETO_DB) that
// cannot be opened stops the job before it starts.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/ExperimentStore.h"

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

// A recipe file as re-runnable JSON: its document with calibration paths made absolute (they resolve against
// the recipe's folder, which a recipe printed by `runs show --recipe` no longer lives in). Never throws: an
// unreadable recipe is recorded as {"recipe_file": PATH} and compress itself reports the problem.
nlohmann::json rerunnableRecipe(const std::string& recipePath);

// An absolute path for settings (a relative one means nothing once the run is looked at from elsewhere).
std::string absolutePath(const std::string& path);

class JobRecord {
 public:
  explicit JobRecord(std::string kind);
  ~JobRecord();
  JobRecord(const JobRecord&) = delete;
  JobRecord& operator=(const JobRecord&) = delete;

  // Records the run as running: the model folder's identity, the device, the job's settings (compress: the
  // recipe) and, for compress, the output folder.
  void begin(const std::string& modelDir, const std::string& device, nlohmann::json settings,
             const std::string& output = "");
  // Records the result JSON the command prints (core/store/ResultJson.h) and marks the run finished.
  void finish(const nlohmann::json& result);
  // Benchmark rows written with the run when it finishes (for bench commands).
  void benchmark(const BenchmarkRow& row);
  // The recorder, or nullptr when nothing is recorded (--no-record, or the database was unusable).
  RunRecorder* recorder() { return recorder_.get(); }

  void fail(const std::string& message);
  void cancel();
  // Why finish() could not record the result (the final write failed after its retries); "" when it did.
  const std::string& unrecorded() const { return unrecorded_; }

 private:
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

// The hook for benchmark commands: rows recorded as one finished bench run (nothing with --no-record).
void recordBenchmarks(const std::vector<BenchmarkRow>& rows, const std::string& device,
                      const nlohmann::json& settings = nlohmann::json::object());

}  // namespace pareto::cli
