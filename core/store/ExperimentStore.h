// The experiment store (DESIGN.md "Storage"): one SQLite file that every pareto-cli job and GUI run records
// itself in, so runs can be listed, compared, exported and re-run later. Several processes (the GUI and a few
// CLIs) may use the same file at once: WAL mode lets readers run beside a writer, busy_timeout makes writers
// wait for each other instead of failing, and every write is one IMMEDIATE transaction, so a process killed at
// any point leaves either all of a write or none of it.
//
// Tables: models, runs, metrics, module_stats, curves, benchmarks, and schema_version (one row per applied
// migration; migrations only go forward). A run's tag and note are the user's: set at any time, also on a
// finished run, whose results stay as they were recorded. SQLite stays inside the .cpp files.
//
// An ExperimentStore is one connection: use it from one thread at a time. Another thread (the GUI's worker)
// opens its own on the same file; connections coordinate exactly as processes do.
//
// Reading commands open the file with openForReading(): never created, migrated or written, so a database in
// a read-only folder (or owned by someone else) can still be listed.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "store/ModelIdentity.h"
#include "store/ProcessInfo.h"

namespace pareto {

// The kinds of run the store knows (DESIGN.md): compress, perplexity, fidelity, drift, hessian, bench.
const std::vector<std::string>& runKinds();

// Running, finished, failed and cancelled are stored; Interrupted is what a reader sees for a run stored as
// running whose process is gone (killed, crashed): it will never finish. Gone means: the pid says so where it
// can (same boot and PID namespace as the reader), else the run's heartbeat is older than
// ExperimentStore::kHeartbeatStaleSeconds.
enum class RunStatus { Running, Finished, Failed, Cancelled, Interrupted };
const char* runStatusName(RunStatus status);

struct Metric {
  std::string name;
  double value = 0;   // NaN is stored as NULL and read back as NaN
};

struct ModuleStat {
  std::string module, name;
  double value = 0;
};

struct Curve {
  std::string name;
  std::vector<double> x, y;   // same length
};

struct BenchmarkRow {
  std::string device;   // "NVIDIA H200"
  std::string kernel;   // "bitmask_nm_gemv 2:4"
  std::string shape;    // "4096x14336"
  int64_t batch = 1;
  double timeUs = 0;    // per call
  double gbps = std::numeric_limits<double>::quiet_NaN();   // achieved bandwidth; NaN when not meaningful
  double recordedAt = 0;   // seconds since the Unix epoch, as the store wrote the row (ignored when adding one)
};

// Everything a finished run stores besides its row; written together with the "finished" status.
struct RunResults {
  std::vector<Metric> metrics;
  std::vector<ModuleStat> moduleStats;
  std::vector<Curve> curves;
  std::vector<BenchmarkRow> benchmarks;
  std::optional<nlohmann::json> recipe;   // replaces the recipe/settings given at begin (e.g. resolved values)
};

struct RunStart {
  std::string kind;                                  // one of runKinds()
  std::optional<ModelIdentity> model;                // the model the run is about (compress: its source)
  nlohmann::json recipe = nlohmann::json::object();  // compress: the recipe; other kinds: the job's settings
  nlohmann::json versions = nlohmann::json::object();// {"pareto": ..., "libtorch": ...}; sqlite is added
  std::string device;                                // "cpu", "NVIDIA H200"
  std::string output;                                // compress: the output folder
};

struct RunSummary {
  int64_t id = 0;
  std::string kind;
  RunStatus status = RunStatus::Running;
  double startedAt = 0;                                       // seconds since the Unix epoch
  double endedAt = std::numeric_limits<double>::quiet_NaN();  // NaN while running or when interrupted
  std::optional<int64_t> modelId;
  std::string modelPath, modelHash, architecture;
  uint64_t modelSize = 0;
  std::string device, output, error;
  ProcessIdentity process;                                    // who recorded it
  double heartbeatAt = std::numeric_limits<double>::quiet_NaN();  // last sign of life of a running run (NaN: none)
  std::string tag, note;   // the user's, set after the run (setRunLabel); "" when none
  std::map<std::string, double> metrics;
};

struct RunDetails {
  RunSummary summary;
  nlohmann::json recipe, versions;
  std::vector<Metric> metrics;   // by name
  std::vector<ModuleStat> moduleStats;   // in insertion order
  std::vector<Curve> curves;     // by name
  std::vector<BenchmarkRow> benchmarks;
};

struct RunFilter {
  std::string model;   // a substring of the model folder's path (empty: any)
  std::string kind;    // exact (empty: any)
};

// $PARETO_DB, else $XDG_DATA_HOME/pareto/pareto.db, else ~/.local/share/pareto/pareto.db (XDG base directories).
std::string defaultStorePath();

class ExperimentStore {
 public:
  static constexpr int kSchemaVersion = 4;
  static constexpr int kBusyTimeoutMs = 15000;
  // The write that ends a run keeps retrying a lock held by another process this long (the busy timeout
  // alone gives up after kBusyTimeoutMs and would leave the run "running" with its results lost).
  static constexpr int kFinalWriteTimeoutMs = 120000;
  // A running run's recorder writes its heartbeat this often; a reader that cannot check the pid declares the
  // run interrupted when the heartbeat is older than kHeartbeatStaleSeconds (twelve missed beats: a writer
  // waits up to kBusyTimeoutMs for each, and clocks of machines sharing a file differ by seconds).
  static constexpr int kHeartbeatIntervalMs = 10000;
  static constexpr double kHeartbeatStaleSeconds = 120;

  // Opens the file (creating it and its folder), turns on WAL and foreign keys and migrates it forward to
  // targetVersion (tests pass 1 to make a version-1 file). Throws InputError naming the file when it is not a
  // database, is damaged, cannot be written (a read-only file or folder: the error says so), or was written by
  // a newer Pareto (a schema version above kSchemaVersion).
  explicit ExperimentStore(const std::string& path, int targetVersion = kSchemaVersion);
  // Opens the file for reading only (SQLITE_OPEN_READONLY): nothing is created, migrated or written, and an
  // older schema is read as it is. A missing file reads as an empty store. In a folder where SQLite cannot
  // create the -wal and -shm files that a WAL reader needs, and none exist (no connection has the file open),
  // the file is opened immutable and each read checks that the file did not change while it ran (else it
  // reads again). Write methods throw InputError. Throws like the constructor for unusable files.
  static ExperimentStore openForReading(const std::string& path);
  ~ExperimentStore();
  ExperimentStore(ExperimentStore&&) noexcept;
  ExperimentStore& operator=(ExperimentStore&&) noexcept;

  const std::string& path() const;
  int schemaVersion() const;
  bool readOnly() const;
  // How long the final write of a run retries a lock (kFinalWriteTimeoutMs) and how often a recorder writes
  // its heartbeat (kHeartbeatIntervalMs); RunRecorder reads both.
  void setFinalWriteTimeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds finalWriteTimeout() const;
  void setHeartbeatInterval(std::chrono::milliseconds interval);
  std::chrono::milliseconds heartbeatInterval() const;
  // Applies the migrations above the file's version up to targetVersion, each in its own transaction (so a
  // crash between two leaves a file at a valid version); a no-op when it is already there.
  void migrate(int targetVersion = kSchemaVersion);

  // A new run with status running, the model (added to models if new) and this process's identity.
  // Throws InputError for an unknown kind.
  int64_t beginRun(const RunStart& start);
  // Results, status finished and the end time in one transaction: a finished run is always complete. A lock
  // held by another process is retried with backoff for finalWriteTimeout(); then it throws
  // sqlite::BusyError (an Error) saying how long it waited.
  void finishRun(int64_t runId, const RunResults& results);
  // Failed or cancelled, with a message; no results are kept (a run is never half-written).
  void endRun(int64_t runId, RunStatus status, const std::string& message);

  // Benchmark rows of a bench run (or none: runId nullopt) in one transaction.
  void addBenchmarks(std::optional<int64_t> runId, const std::vector<BenchmarkRow>& rows);
  // Newest first; empty filters match everything.
  std::vector<BenchmarkRow> benchmarks(const std::string& device = "", const std::string& kernel = "") const;

  // Newest first, with their metrics; Interrupted where a running run's process is gone.
  std::vector<RunSummary> listRuns(const RunFilter& filter = {}) const;
  // Throws InputError "<db>: no run N".
  RunDetails run(int64_t runId) const;
  bool hasRun(int64_t runId) const;
  // The run and everything recorded with it. Throws InputError when it does not exist.
  void deleteRun(int64_t runId);
  // The user's tag (a short word to filter by: "baseline", "paper") and note (free text) of a run, replacing
  // those it had ("" clears). Throws InputError when the run does not exist or the tag holds a line break.
  void setRunLabel(int64_t runId, const std::string& tag, const std::string& note);

 private:
  ExperimentStore() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Records a finished bench run holding `rows` in one call: the hook benchmark commands use.
int64_t recordBenchmarks(ExperimentStore& store, const RunStart& start, const std::vector<BenchmarkRow>& rows);

}  // namespace pareto
