#include "RunRecording.h"

#include <c10/util/Exception.h>
#include <torch/version.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "CliSupport.h"
#include "compress/Recipe.h"
#include "model/Device.h"
#include "store/ModelIdentity.h"
#include "store/ResultJson.h"
#include "store/RunRecorder.h"
#include "util/Error.h"
#include "util/Version.h"

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
  std::cerr << "pareto-cli: warning: " << what << " (this run is not recorded; --no-record skips recording)\n";
}

std::string describeDevice(const std::string& device) {
  try {
    return deviceDescription(parseDevice(device));
  } catch (const std::exception&) {
    return device;   // the job itself reports a device it cannot use
  }
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

RunStart runStart(const std::string& kind, const std::string& device) {
  RunStart s;
  s.kind = kind;
  s.device = describeDevice(device);
  s.versions = {{"pareto", paretoVersion()}, {"libtorch", TORCH_VERSION}};
  return s;
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

std::string absolutePath(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec);
  return ec ? std::filesystem::absolute(path).string() : p.string();
}

nlohmann::json rerunnableRecipe(const std::string& recipePath) {
  try {
    Recipe recipe = Recipe::fromFile(recipePath);
    nlohmann::json doc = recipe.document;
    if (recipe.calibration && doc.contains("calibration") && doc["calibration"].is_object()) {
      const char* key = recipe.calibration->source == "text" ? "text" : "prompts";
      if (doc["calibration"].contains(key)) doc["calibration"][key] = absolutePath(recipe.calibration->file);
    }
    return doc;
  } catch (const std::exception&) {
    return {{"recipe_file", absolutePath(recipePath)}};
  }
}

JobRecord::JobRecord(std::string kind) : kind_(std::move(kind)) {}
JobRecord::~JobRecord() = default;

void JobRecord::begin(const std::string& modelDir, const std::string& device, nlohmann::json settings,
                      const std::string& output) {
  store_ = openForRecording();
  if (!store_) return;
  RunStart s = runStart(kind_, device);
  try {
    s.model = identifyModel(modelDir);
  } catch (const InputError&) {
    // A folder that is not a model: the job fails on it in a moment and the run records why.
  }
  // Settings name the model too (a job's own settings JSON may hold the path as typed, relative); a compress
  // recipe must stay a recipe that compress accepts, so its model lives only in the models table.
  if (kind_ != "compress" && settings.is_object()) settings["model"] = absolutePath(modelDir);
  settings_ = settings;
  s.recipe = std::move(settings);
  s.output = absolutePath(output);
  try {
    recorder_ = std::make_unique<RunRecorder>(*store_, s);
  } catch (const std::exception& e) {
    warn(e.what());
    store_.reset();
  }
}

void JobRecord::finish(const nlohmann::json& result) {
  if (!recorder_) return;
  RunResults& r = recorder_->results();
  addResultsFromJson(r, result);
  if (r.recipe) {
    // The job's resolved settings add to those recorded at begin, which win: their paths are absolute.
    nlohmann::json merged = *r.recipe;
    merged.update(settings_);
    r.recipe = merged;
  }
  try {
    recorder_->finish();
  } catch (const std::exception& e) {
    // The job is done and prints its result; the command still fails once it has (recordedJob), so a script
    // never takes a run that reads "interrupted" in the store for a recorded one.
    unrecorded_ = std::string("the result was not recorded: ") + e.what();
    return;
  }
  if (::isatty(STDERR_FILENO) != 0)
    std::cerr << "pareto-cli: recorded as run " << recorder_->id() << " in " << store_->path() << "\n";
}

void JobRecord::benchmark(const BenchmarkRow& row) {
  if (recorder_) recorder_->benchmark(row);
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

void recordBenchmarks(const std::vector<BenchmarkRow>& rows, const std::string& device,
                      const nlohmann::json& settings) {
  std::unique_ptr<ExperimentStore> store = openForRecording();
  if (!store) return;
  RunStart s = runStart("bench", device);
  s.recipe = settings.is_object() ? settings : nlohmann::json::object();
  try {
    pareto::recordBenchmarks(*store, s, rows);
  } catch (const std::exception& e) {
    warn(e.what());
  }
}

}  // namespace pareto::cli
