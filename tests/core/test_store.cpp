// The experiment store: schema and migrations (from an empty file and from a version-1 file), the run life
// cycle through RunRecorder, the result-JSON rules, and what several processes do to one file: two writers at
// once lose nothing, and a writer killed with SIGKILL in the middle of a transaction leaves a consistent file
// whose run reads as interrupted, not finished.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "InputErrors.h"
#include "SharedData.h"
#include "store/ExperimentStore.h"
#include "store/MetricNames.h"
#include "store/ResultJson.h"
#include "store/RunRecorder.h"
#include "util/Error.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Direct SQL on the file, independent of the store's code: what another tool (or a version-1 Pareto) sees.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) ADD_FAILURE() << "cannot open " << path;
    sqlite3_busy_timeout(db_, 10000);
  }
  ~RawDb() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << (err ? err : "?");
      sqlite3_free(err);
    }
  }
  // The first column of the first row as text ("" when there is no row or it is NULL).
  std::string text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
      return {};
    }
    std::string out;
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0) != nullptr)
      out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return out;
  }
  int64_t number(const std::string& sql) { return std::stoll(text(sql).empty() ? "0" : text(sql)); }

 private:
  sqlite3* db_ = nullptr;
};

class Store : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::scratchDir("store"); }
  std::string db(const std::string& name = "pareto.db") { return dir_ + "/" + name; }
  static RunStart start(const std::string& kind = "perplexity") {
    RunStart s;
    s.kind = kind;
    s.recipe = {{"window", 128}};
    s.device = "cpu";
    s.versions = {{"pareto", "test"}};
    return s;
  }
  std::string dir_;
};

// Waits for a forked child; its exit code, or 128 + the signal that ended it.
int waitChild(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(Store, EmptyFileGetsEveryMigrationWalAndForeignKeys) {
  const std::string path = dir_ + "/nested/folder/pareto.db";   // the folder is created
  {
    ExperimentStore store(path);
    EXPECT_EQ(store.schemaVersion(), ExperimentStore::kSchemaVersion);
    EXPECT_EQ(store.path(), path);
  }
  RawDb raw(path);
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.number("SELECT count(*) FROM schema_version"), ExperimentStore::kSchemaVersion);
  EXPECT_EQ(raw.number("SELECT max(version) FROM schema_version"), 4);
  for (const char* table : {"models", "runs", "metrics", "module_stats", "curves", "benchmarks"})
    EXPECT_EQ(raw.number(std::string("SELECT count(*) FROM sqlite_master WHERE name='") + table + "'"), 1) << table;
  EXPECT_EQ(raw.number("SELECT count(*) FROM pragma_table_info('runs') WHERE name IN ('pid', 'host', 'output')"), 3);
  // Opening again applies nothing twice.
  ExperimentStore again(path);
  EXPECT_EQ(raw.number("SELECT count(*) FROM schema_version"), ExperimentStore::kSchemaVersion);
}

TEST_F(Store, Version1FileMigratesAndKeepsItsRuns) {
  {
    ExperimentStore v1(db(), 1);
    EXPECT_EQ(v1.schemaVersion(), 1);
  }
  {
    // What Pareto with schema 1 wrote: no pid, host or output columns.
    RawDb raw(db());
    EXPECT_EQ(raw.number("SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'pid'"), 0);
    raw.exec("INSERT INTO models (path, content_hash, architecture, size_bytes) "
             "VALUES ('/m/ref', 'abc', 'LlamaForCausalLM', 10)");
    raw.exec("INSERT INTO runs (kind, model_id, recipe, status, started_at, ended_at, versions, device) VALUES "
             "('perplexity', 1, '{\"window\": 64}', 'finished', 1700000000, 1700000010, '{}', 'cpu')");
    raw.exec("INSERT INTO metrics (run_id, name, value) VALUES (1, 'ppl', 12.5)");
    raw.exec("INSERT INTO curves (run_id, name, x, y) VALUES (1, 'loss', 0, 3.0), (1, 'loss', 1, 2.5)");
  }
  ExperimentStore store(db());
  EXPECT_EQ(store.schemaVersion(), ExperimentStore::kSchemaVersion);
  std::vector<RunSummary> runs = store.listRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, RunStatus::Finished);
  EXPECT_EQ(runs[0].modelPath, "/m/ref");
  EXPECT_DOUBLE_EQ(runs[0].metrics.at("ppl"), 12.5);
  EXPECT_DOUBLE_EQ(runs[0].endedAt - runs[0].startedAt, 10.0);
  RunDetails d = store.run(runs[0].id);
  EXPECT_EQ(d.recipe["window"], 64);
  ASSERT_EQ(d.curves.size(), 1u);
  EXPECT_EQ(d.curves[0].y, (std::vector<double>{3.0, 2.5}));
  // The new columns work for new runs.
  RunStart s = start("compress");
  s.output = "/tmp/out";
  RunRecorder rec(store, s);
  rec.finish();
  RunDetails n = store.run(rec.id());
  EXPECT_EQ(n.summary.output, "/tmp/out");
  EXPECT_EQ(n.summary.process.pid, static_cast<int64_t>(::getpid()));
  EXPECT_GT(n.summary.id, runs[0].id);
}

TEST_F(Store, RefusesNewerForeignAndNonDatabaseFiles) {
  { ExperimentStore store(db()); }
  { RawDb(db()).exec("INSERT INTO schema_version (version, applied_at) VALUES (99, 0)"); }
  try {
    ExperimentStore store(db());
    FAIL() << "a file from a newer Pareto was opened";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(db()));
    EXPECT_THAT(e.what(), HasSubstr("newer"));
  }

  { RawDb(db("other.db")).exec("CREATE TABLE notes (x TEXT)"); }
  try {
    ExperimentStore store(db("other.db"));
    FAIL() << "another application's database was taken over";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not a Pareto experiment database"));
  }

  std::ofstream(db("text.db")) << "this is not a database, just some text that is long enough to have a header\n";
  try {
    ExperimentStore store(db("text.db"));
    FAIL() << "a text file was opened as a database";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(db("text.db")));
  }
}

TEST_F(Store, RecorderLifeCycle) {
  ExperimentStore store(db());
  ModelIdentity model{"/models/ref", "0123456789abcdef", "LlamaForCausalLM", 1000};
  RunStart s = start();
  s.model = model;
  int64_t finished = 0, dropped = 0, cancelled = 0, failed = 0;
  {
    RunRecorder rec(store, s);
    finished = rec.id();
    EXPECT_EQ(store.run(finished).summary.status, RunStatus::Running);
    rec.metric("ppl", 21.5);
    rec.metric("nan_metric", NAN);
    rec.moduleStat("model.layers.0.mlp.up_proj", "sparsity", 0.5);
    rec.curve({"loss", {0, 1, 2}, {3.0, 2.0, 1.5}});
    rec.benchmark({"cpu", "dense_gemv", "192x512", 1, 12.5, 3.2});
    rec.setRecipe({{"window", 128}, {"resolved", true}});
    rec.finish();
    EXPECT_TRUE(rec.ended());
  }
  {
    RunRecorder rec(store, s);
    dropped = rec.id();
    rec.metric("ppl", 1.0);   // never finished: the destructor marks it failed and keeps no results
  }
  {
    RunRecorder rec(store, s);
    cancelled = rec.id();
    EXPECT_THROW(rec.run([](RunRecorder& r) {
      r.metric("ppl", 2.0);
      throw Cancelled();
    }),
                 Cancelled);
  }
  {
    RunRecorder rec(store, s);
    failed = rec.id();
    EXPECT_THROW(rec.run([](RunRecorder&) { throw InputError("/data/x.txt: no such file"); }), InputError);
  }

  RunDetails f = store.run(finished);
  EXPECT_EQ(f.summary.status, RunStatus::Finished);
  EXPECT_TRUE(std::isfinite(f.summary.endedAt));
  EXPECT_EQ(f.summary.modelPath, "/models/ref");
  EXPECT_EQ(f.summary.modelHash, "0123456789abcdef");
  EXPECT_EQ(f.summary.modelSize, 1000u);
  EXPECT_EQ(f.recipe["resolved"], true);
  EXPECT_FALSE(f.versions["sqlite"].get<std::string>().empty());
  ASSERT_EQ(f.metrics.size(), 2u);
  EXPECT_TRUE(std::isnan(f.summary.metrics.at("nan_metric")));
  EXPECT_DOUBLE_EQ(f.summary.metrics.at("ppl"), 21.5);
  ASSERT_EQ(f.moduleStats.size(), 1u);
  EXPECT_DOUBLE_EQ(f.moduleStats[0].value, 0.5);
  ASSERT_EQ(f.curves.size(), 1u);
  EXPECT_EQ(f.curves[0].x, (std::vector<double>{0, 1, 2}));
  ASSERT_EQ(f.benchmarks.size(), 1u);
  EXPECT_DOUBLE_EQ(f.benchmarks[0].gbps, 3.2);

  for (auto [id, status] : {std::pair{dropped, RunStatus::Failed}, std::pair{cancelled, RunStatus::Cancelled},
                            std::pair{failed, RunStatus::Failed}}) {
    RunDetails d = store.run(id);
    EXPECT_EQ(d.summary.status, status) << id;
    EXPECT_TRUE(d.metrics.empty()) << "a run that did not finish keeps no results (run " << id << ")";
    EXPECT_TRUE(std::isfinite(d.summary.endedAt));
  }
  EXPECT_THAT(store.run(failed).summary.error, HasSubstr("/data/x.txt"));
  EXPECT_THAT(store.run(dropped).summary.error, HasSubstr("without finishing"));

  // One model row for the four runs; filters by model path substring and by kind.
  EXPECT_EQ(RawDb(db()).number("SELECT count(*) FROM models"), 1);
  EXPECT_EQ(store.listRuns({"models/re", ""}).size(), 4u);
  EXPECT_EQ(store.listRuns({"elsewhere", ""}).size(), 0u);
  EXPECT_EQ(store.listRuns({"", "compress"}).size(), 0u);
  std::vector<RunSummary> all = store.listRuns();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all.front().id, failed);   // newest first

  EXPECT_THROW(store.beginRun(start("training")), InputError);
}

TEST_F(Store, DeleteTakesEverythingWithItAndIdsAreNotReused) {
  ExperimentStore store(db());
  RunRecorder a(store, start());
  a.metric("ppl", 3.0);
  a.curve({"c", {0, 1}, {1, 2}});
  a.moduleStat("m", "s", 1);
  a.benchmark({"cpu", "k", "1x1", 1, 1.0, NAN});
  a.finish();
  store.deleteRun(a.id());
  EXPECT_FALSE(store.hasRun(a.id()));
  RawDb raw(db());
  for (const char* table : {"metrics", "curves", "module_stats", "benchmarks"})
    EXPECT_EQ(raw.number(std::string("SELECT count(*) FROM ") + table), 0) << table;
  EXPECT_THROW(store.deleteRun(a.id()), InputError);
  try {
    store.run(a.id());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no run " + std::to_string(a.id())));
  }
  RunRecorder b(store, start());
  b.finish();
  EXPECT_GT(b.id(), a.id());
}

TEST_F(Store, BenchmarkHook) {
  ExperimentStore store(db());
  RunStart s = start("perplexity");   // the hook makes it a bench run whatever the caller says
  const int64_t id = recordBenchmarks(store, s, {{"NVIDIA H200", "bitmask_nm_gemv 2:4", "4096x14336", 1, 21.0, 2900.0},
                                                 {"NVIDIA H200", "dense_gemv", "4096x14336", 1, 30.0, 3900.0}});
  RunDetails d = store.run(id);
  EXPECT_EQ(d.summary.kind, "bench");
  EXPECT_EQ(d.summary.status, RunStatus::Finished);
  EXPECT_EQ(d.benchmarks.size(), 2u);
  std::vector<BenchmarkRow> rows = store.benchmarks("NVIDIA H200", "dense_gemv");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].timeUs, 30.0);
  store.addBenchmarks(std::nullopt, {{"cpu", "dense_gemv", "8x8", 2, 1.0, NAN}});
  EXPECT_EQ(store.benchmarks("cpu").size(), 1u);
  EXPECT_TRUE(std::isnan(store.benchmarks("cpu")[0].gbps));
  EXPECT_THROW(store.addBenchmarks(std::nullopt, {{"cpu", "", "8x8", 1, 1.0, NAN}}), InputError);
  // Each row comes back with the time the store wrote it, newest first.
  const double now = double(std::time(nullptr));
  for (const BenchmarkRow& r : store.benchmarks()) EXPECT_NEAR(r.recordedAt, now, 60) << r.kernel;
  for (const BenchmarkRow& r : store.run(id).benchmarks) EXPECT_NEAR(r.recordedAt, now, 60) << r.kernel;
}

// A run's tag and note: set (and replaced, and cleared) after the run, also on a finished one, without touching
// its results; read by listRuns and run(); refused for a run that does not exist and for a tag of two lines.
TEST_F(Store, TagAndNoteOfARun) {
  ExperimentStore store(db());
  RunRecorder rec(store, start("perplexity"));
  rec.results().metrics.push_back({"ppl", 12.5});
  rec.finish();
  EXPECT_EQ(store.run(rec.id()).summary.tag, "");
  store.setRunLabel(rec.id(), "baseline", "first try;\nwindow 128 as in the paper");
  RunDetails d = store.run(rec.id());
  EXPECT_EQ(d.summary.tag, "baseline");
  EXPECT_EQ(d.summary.note, "first try;\nwindow 128 as in the paper");
  EXPECT_EQ(d.summary.status, RunStatus::Finished);
  EXPECT_DOUBLE_EQ(d.summary.metrics.at("ppl"), 12.5);
  ASSERT_EQ(store.listRuns().size(), 1u);
  EXPECT_EQ(store.listRuns()[0].tag, "baseline");
  store.setRunLabel(rec.id(), "paper", "");
  EXPECT_EQ(store.listRuns()[0].tag, "paper");
  EXPECT_EQ(store.listRuns()[0].note, "");
  EXPECT_THAT(test::inputErrorOf([&] { store.setRunLabel(rec.id() + 1, "x", ""); }), HasSubstr("no run"));
  EXPECT_THAT(test::inputErrorOf([&] { store.setRunLabel(rec.id(), "two\nlines", ""); }), HasSubstr("one line"));
  EXPECT_THROW(ExperimentStore::openForReading(db()).setRunLabel(rec.id(), "x", ""), InputError);
}

// A store written before tags and notes existed (schema 3): read as it is by a reader (no tags), migrated by a
// writer with its runs kept, and then labelled.
TEST_F(Store, Version3FileGetsTagsAndNotesAndKeepsItsRuns) {
  int64_t id = 0;
  {
    ExperimentStore v3(db(), 3);
    RunRecorder rec(v3, start("perplexity"));
    rec.results().metrics.push_back({"ppl", 9.0});
    rec.finish();
    id = rec.id();
  }
  EXPECT_EQ(RawDb(db()).number("SELECT count(*) FROM pragma_table_info('runs') WHERE name IN ('tag', 'note')"), 0);
  {
    const ExperimentStore reader = ExperimentStore::openForReading(db());
    EXPECT_EQ(reader.schemaVersion(), 3);
    ASSERT_EQ(reader.listRuns().size(), 1u);
    EXPECT_EQ(reader.listRuns()[0].tag, "");
    EXPECT_DOUBLE_EQ(reader.listRuns()[0].metrics.at("ppl"), 9.0);
  }
  ExperimentStore store(db());
  EXPECT_EQ(store.schemaVersion(), 4);
  store.setRunLabel(id, "old", "recorded before tags");
  EXPECT_EQ(store.run(id).summary.note, "recorded before tags");
  EXPECT_DOUBLE_EQ(store.run(id).summary.metrics.at("ppl"), 9.0);
}

// One set of metric names (store/MetricNames.h): compress runs the workbench recorded under its old names read
// under today's, wherever the store is read (listRuns and run); today's name wins where a run holds both; other
// kinds keep names that are only old names of compress metrics ("seconds" of a fidelity run).
TEST_F(Store, OldMetricNamesReadUnderTodaysNames) {
  ExperimentStore store(db());
  const std::map<std::string, double> old = {{"linear_bpw", 4.5}, {"model_bpw", 5.0}, {"dense_linear_bpw", 16.0},
                                             {"dense_decode_nll", 0.9}, {"seconds", 12.0}, {"ppl", 21.0}};
  int64_t gui = 0, both = 0, fidelity = 0;
  {
    RunRecorder rec(store, start("compress"));
    gui = rec.id();
    for (const auto& [name, value] : old) rec.metric(name, value);
    rec.finish();
  }
  {
    RunRecorder rec(store, start("compress"));
    both = rec.id();
    rec.metric("linear_bpw", 1.0);
    rec.metric(metric::kLinearBitsPerWeight, 2.0);
    rec.metric("seconds", 3.0);
    rec.metric(metric::kSeconds, 4.0);
    rec.finish();
  }
  {
    RunRecorder rec(store, start("fidelity"));
    fidelity = rec.id();
    rec.metric("seconds", 7.0);
    rec.metric("dense_nll", 0.5);
    rec.finish();
  }
  const std::map<std::string, double> today = {{"linear_bits_per_weight", 4.5}, {"model_bits_per_weight", 5.0},
                                               {"dense_linear_bits_per_weight", 16.0}, {"dense_nll", 0.9},
                                               {"timings.total_s", 12.0}, {"ppl", 21.0}};
  EXPECT_EQ(store.run(gui).summary.metrics, today);
  std::map<std::string, double> listed;
  for (const RunSummary& r : store.listRuns())
    if (r.id == gui) listed = r.metrics;
  EXPECT_EQ(listed, today);
  std::vector<std::string> names;
  for (const Metric& m : store.run(gui).metrics) names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dense_linear_bits_per_weight", "dense_nll", "linear_bits_per_weight",
                                             "model_bits_per_weight", "ppl", "timings.total_s"}));
  EXPECT_EQ(store.run(both).summary.metrics,
            (std::map<std::string, double>{{metric::kLinearBitsPerWeight, 2.0}, {metric::kSeconds, 4.0}}));
  EXPECT_EQ(store.run(fidelity).summary.metrics, (std::map<std::string, double>{{"seconds", 7.0}, {"dense_nll", 0.5}}));
  EXPECT_EQ(metric::canonicalMetricName("compress", "linear_bpw"), metric::kLinearBitsPerWeight);
  EXPECT_EQ(metric::canonicalMetricName("fidelity", "seconds"), "seconds");
  EXPECT_EQ(metric::canonicalMetricName("compress", "ppl"), "ppl");
}

TEST(ResultJson, NumbersArraysAndNamedObjects) {
  nlohmann::json result = nlohmann::json::parse(R"({
    "ppl": 12.5, "converged": true, "out": "/tmp/x",
    "timings": {"total_s": 3.0},
    "counts": [4, 4, 3],
    "free": [[0.1, 0.2, null], [0.3, null, 0.5]],
    "modules": [{"name": "model.layers.0.mlp.up_proj", "sparsity": 0.5, "quant": {"bits": 4}, "method": "rtn"}],
    "settings": {"window": 64}
  })");
  RunResults r;
  r.recipe = nlohmann::json{{"text", "/data/t.txt"}};
  addResultsFromJson(r, result);
  std::map<std::string, double> metrics;
  for (const auto& m : r.metrics) metrics[m.name] = m.value;
  EXPECT_EQ(metrics, (std::map<std::string, double>{{"ppl", 12.5}, {"converged", 1.0}, {"timings.total_s", 3.0}}));
  ASSERT_EQ(r.curves.size(), 3u);
  EXPECT_EQ(r.curves[0].name, "counts");
  EXPECT_EQ(r.curves[0].y, (std::vector<double>{4, 4, 3}));
  EXPECT_EQ(r.curves[1].name, "free[0]");
  EXPECT_EQ(r.curves[1].x, (std::vector<double>{0, 1}));   // the null step is no point
  EXPECT_EQ(r.curves[2].x, (std::vector<double>{0, 2}));
  ASSERT_EQ(r.moduleStats.size(), 2u);
  EXPECT_EQ(r.moduleStats[0].module, "model.layers.0.mlp.up_proj");
  EXPECT_EQ(r.moduleStats[0].name, "quant.bits");
  EXPECT_EQ(r.moduleStats[1].name, "sparsity");
  EXPECT_EQ(*r.recipe, (nlohmann::json{{"text", "/data/t.txt"}, {"window", 64}}));
}

TEST_F(Store, DefaultPathFollowsXdg) {
  struct Env {
    std::string name;
    std::optional<std::string> old;
    explicit Env(std::string n) : name(std::move(n)) {
      if (const char* v = std::getenv(name.c_str())) old = v;
    }
    ~Env() { old ? ::setenv(name.c_str(), old->c_str(), 1) : ::unsetenv(name.c_str()); }
  } db("PARETO_DB"), xdg("XDG_DATA_HOME"), home("HOME");
  ::setenv("PARETO_DB", "/x/explicit.db", 1);
  ::setenv("XDG_DATA_HOME", "/xdg", 1);
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(defaultStorePath(), "/x/explicit.db");
  ::unsetenv("PARETO_DB");
  EXPECT_EQ(defaultStorePath(), "/xdg/pareto/pareto.db");
  ::setenv("XDG_DATA_HOME", "relative/is/ignored", 1);
  EXPECT_EQ(defaultStorePath(), "/home/u/.local/share/pareto/pareto.db");
  ::unsetenv("XDG_DATA_HOME");
  EXPECT_EQ(defaultStorePath(), "/home/u/.local/share/pareto/pareto.db");
}

TEST_F(Store, ProcessLiveness) {
  ProcessIdentity me = currentProcess();
  EXPECT_EQ(processLiveness(me), Liveness::Alive);
  ASSERT_FALSE(me.pidNamespace.empty()) << "no /proc/self/ns/pid";
  ASSERT_FALSE(me.bootId.empty()) << "no boot id";
  // A record from before boot ids and namespaces were kept: decided by the host name, as then.
  ProcessIdentity legacy = me;
  legacy.bootId.clear();
  legacy.pidNamespace.clear();
  EXPECT_EQ(processLiveness(legacy), Liveness::Alive);
  legacy.host = me.host + "-elsewhere";
  EXPECT_EQ(processLiveness(legacy), Liveness::Unknown);
  // Another PID namespace (a container sharing the file) or another boot: the pid means nothing here, even
  // for a pid that is not running here, and even under our host name.
  ProcessIdentity container = me;
  container.pidNamespace = "pid:[1]";
  container.pid = 999999999;
  EXPECT_EQ(processLiveness(container), Liveness::Unknown);
  ProcessIdentity otherBoot = me;
  otherBoot.bootId = "00000000-0000-0000-0000-000000000000";
  otherBoot.pid = 999999999;
  EXPECT_EQ(processLiveness(otherBoot), Liveness::Unknown);
  // Same boot and namespace under another host name (a container with the host's PID namespace): the pid decides.
  ProcessIdentity renamed = me;
  renamed.host = me.host + "-elsewhere";
  EXPECT_EQ(processLiveness(renamed), Liveness::Alive);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_EQ(waitChild(child), 0);
  ProcessIdentity gone = me;
  gone.pid = child;
  EXPECT_EQ(processLiveness(gone), Liveness::Dead);
  // This pid with another start time: the pid was reused, the recorder is gone.
  ASSERT_FALSE(me.startToken.empty()) << "no boot id or /proc/self/stat";
  ProcessIdentity reused = me;
  reused.startToken = me.startToken + "0";
  EXPECT_EQ(processLiveness(reused), Liveness::Dead);
}

// Two processes create the file at the same moment (both migrate) and then record runs as fast as they can;
// every run and every metric of both must be there.
TEST_F(Store, TwoProcessesWritingAtOnceLoseNothing) {
  constexpr int kRuns = 100, kMetrics = 20;
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> children;
  for (int c = 0; c < 2; ++c) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(gate[1]);
      char byte;
      (void)::read(gate[0], &byte, 1);   // returns when the parent closes its end: both start together
      try {
        ExperimentStore store(db());
        for (int i = 0; i < kRuns; ++i) {
          RunStart s = start();
          s.recipe = {{"writer", c}, {"i", i}};
          RunRecorder rec(store, s);
          for (int m = 0; m < kMetrics; ++m) rec.metric("m" + std::to_string(m), c * 1000 + i + m / 100.0);
          rec.curve({"c", {0, 1, 2}, {1, 2, 3}});
          rec.finish();
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", c, e.what());
        ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);
  for (pid_t pid : children) EXPECT_EQ(waitChild(pid), 0);

  ExperimentStore store(db());
  std::vector<RunSummary> runs = store.listRuns();
  ASSERT_EQ(runs.size(), size_t{2 * kRuns});
  for (const auto& r : runs) {
    EXPECT_EQ(r.status, RunStatus::Finished) << r.id;
    EXPECT_EQ(r.metrics.size(), size_t{kMetrics}) << r.id;
  }
  RawDb raw(db());
  EXPECT_EQ(raw.number("SELECT count(*) FROM metrics"), 2 * kRuns * kMetrics);
  EXPECT_EQ(raw.number("SELECT count(*) FROM curves"), 2 * kRuns * 3);
  EXPECT_EQ(raw.number("SELECT count(DISTINCT json_extract(recipe, '$.writer') || '/' || "
                       "json_extract(recipe, '$.i')) FROM runs"),
            2 * kRuns);
  EXPECT_EQ(raw.number("SELECT count(*) FROM schema_version"), ExperimentStore::kSchemaVersion);
}

// A child begins a run and is killed with SIGKILL while it writes a large result in one transaction. The file
// must pass integrity_check, hold none of the half-written result, keep the run "running" (read as interrupted)
// and take new runs.
TEST_F(Store, KilledWriterLeavesConsistentFileAndUnfinishedRun) {
  { ExperimentStore init(db()); }
  int ids[2];
  ASSERT_EQ(::pipe(ids), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ids[0]);
    try {
      ExperimentStore store(db());
      RunRecorder rec(store, start("compress"));
      const int64_t id = rec.id();
      (void)::write(ids[1], &id, sizeof id);
      // About 100 MB of curve points: SQLite spills the open transaction into the WAL long before it commits.
      Curve big{"big", std::vector<double>(4'000'000), std::vector<double>(4'000'000, 1.0)};
      for (size_t i = 0; i < big.x.size(); ++i) big.x[i] = static_cast<double>(i);
      rec.curve(std::move(big));
      rec.finish();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  ::close(ids[1]);
  int64_t id = 0;
  ASSERT_EQ(::read(ids[0], &id, sizeof id), static_cast<ssize_t>(sizeof id));
  ::close(ids[0]);
  // Kill once the WAL holds megabytes of the uncommitted transaction (the begin commit is a few KB).
  const std::string wal = db() + "-wal";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::error_code ec;
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(wal, ec) && fs::file_size(wal, ec) > (4u << 20)) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(waitChild(pid), 128 + SIGKILL) << "the writer finished before it was killed; raise the result size";

  {
    RawDb raw(db());
    EXPECT_EQ(raw.text("PRAGMA integrity_check"), "ok");
    EXPECT_EQ(raw.text("PRAGMA foreign_key_check"), "");
    EXPECT_EQ(raw.text("SELECT status FROM runs WHERE id = " + std::to_string(id)), "running");
    EXPECT_EQ(raw.text("SELECT ended_at FROM runs WHERE id = " + std::to_string(id)), "");
    EXPECT_EQ(raw.number("SELECT count(*) FROM curves"), 0) << "half a transaction reached the file";
  }
  ExperimentStore store(db());
  RunDetails d = store.run(id);
  EXPECT_EQ(d.summary.status, RunStatus::Interrupted);
  EXPECT_EQ(d.summary.process.pid, static_cast<int64_t>(pid));
  EXPECT_EQ(store.listRuns().at(0).status, RunStatus::Interrupted);
  RunRecorder next(store, start());
  next.metric("ppl", 1.0);
  next.finish();
  EXPECT_EQ(store.run(next.id()).summary.status, RunStatus::Finished);
}

}  // namespace
}  // namespace pareto

namespace pareto {
namespace {

// A full disk while a run's result is written: the child's file size limit (RLIMIT_FSIZE, SIGXFSZ ignored so that
// write() fails with EFBIG) stops the WAL part way through a large result. The write must fail with an error,
// the earlier finished run must be intact, the file must pass integrity_check, and no run of the child may read
// as finished.
TEST_F(Store, FullDiskWhileWritingKeepsThePreviousRunsIntact) {
  int64_t earlier = 0;
  {
    ExperimentStore store(db());
    RunRecorder rec(store, start());
    rec.metric("ppl", 12.5);
    rec.finish();
    earlier = rec.id();
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const rlim_t limit = rlim_t(std::filesystem::file_size(db()) + (256 << 10));
    rlimit r{limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &r);
    ::signal(SIGXFSZ, SIG_IGN);
    try {
      ExperimentStore store(db());
      RunRecorder rec(store, start());
      std::vector<double> xs(400000), ys(400000);  // ~10 MB of curve rows, far past the limit
      for (size_t i = 0; i < xs.size(); ++i) xs[i] = ys[i] = double(i);
      rec.curve({"big", xs, ys});
      rec.finish();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "writer: %s\n", e.what());
      ::_exit(3);  // the expected outcome: the write failed and said so
    }
    ::_exit(0);
  }
  EXPECT_EQ(waitChild(child), 3) << "a write past the file size limit must fail";
  {
    RawDb raw(db());
    EXPECT_EQ(raw.text("PRAGMA integrity_check"), "ok");
    EXPECT_EQ(raw.text("SELECT status FROM runs WHERE id = " + std::to_string(earlier)), "finished");
    EXPECT_EQ(raw.text("SELECT value FROM metrics WHERE run_id = " + std::to_string(earlier) + " AND name = 'ppl'"),
              "12.5");
    EXPECT_EQ(raw.text("SELECT count(*) FROM runs WHERE status = 'finished'"), "1");
    EXPECT_EQ(raw.text("SELECT count(*) FROM curves WHERE name = 'big'"), "0");
  }
  ExperimentStore store(db());  // and the file still takes new runs
  RunRecorder rec(store, start());
  rec.finish();
  EXPECT_EQ(store.listRuns().size(), 3u);
}

}  // namespace
}  // namespace pareto

#include <sched.h>
#include <sys/stat.h>

namespace pareto {
namespace {

std::string fileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

using test::inputErrorOf;

// A file that is not SQLite fails at once (no retry loop) with the file named, for writing and reading opens.
TEST_F(Store, NotAnSqliteFileFailsAtOnceNamingTheFile) {
  std::ofstream(db("text.db")) << "this is not a database, just some text that is long enough to have a header\n";
  std::ofstream(db("short.db")) << "abc";
  {
    std::string fake("SQLite format 3\0", 16);
    fake += std::string(4096, '\x7f');
    std::ofstream(db("garbage.db"), std::ios::binary) << fake;
  }
  for (const std::string name : {"text.db", "short.db", "garbage.db"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string rw = inputErrorOf([&] { ExperimentStore s(db(name)); });
    const std::string ro = inputErrorOf([&] { ExperimentStore::openForReading(db(name)).listRuns(); });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_THAT(rw, HasSubstr(db(name) + ": not an SQLite database")) << name;
    if (name != "garbage.db") EXPECT_THAT(ro, HasSubstr(db(name) + ": not an SQLite database")) << name;
    EXPECT_THAT(ro, HasSubstr(db(name))) << name;
    EXPECT_LT(seconds, 3.0) << name << ": the open retried instead of failing";
  }
}

// Reading opens never write: an older schema stays as it is, no -wal/-shm files appear, the bytes do not
// change, a missing file stays missing, and writing through a reading store is refused.
TEST_F(Store, ReadingOpensReadOnlyAndCreatesNothing) {
  {
    ExperimentStore v2(db(), 2);
    RawDb(db()).exec("INSERT INTO runs (kind, status, started_at, ended_at, pid, host) "
                     "VALUES ('perplexity', 'finished', 1700000000, 1700000010, 1, 'h')");
  }
  ASSERT_FALSE(fs::exists(db() + "-wal"));
  const std::string before = fileBytes(db());
  {
    ExperimentStore reader = ExperimentStore::openForReading(db());
    EXPECT_TRUE(reader.readOnly());
    EXPECT_EQ(reader.schemaVersion(), 2);
    ASSERT_EQ(reader.listRuns().size(), 1u);
    EXPECT_EQ(reader.run(1).summary.status, RunStatus::Finished);
    EXPECT_FALSE(fs::exists(db() + "-wal"));
    EXPECT_FALSE(fs::exists(db() + "-shm"));
    EXPECT_THAT(inputErrorOf([&] { reader.beginRun(start()); }), HasSubstr("read-only"));
    EXPECT_THAT(inputErrorOf([&] { reader.deleteRun(1); }), HasSubstr("read-only"));
  }
  EXPECT_EQ(fileBytes(db()), before);
  EXPECT_FALSE(fs::exists(db() + "-wal"));
  EXPECT_FALSE(fs::exists(db() + "-shm"));

  ExperimentStore missing = ExperimentStore::openForReading(db("missing.db"));
  EXPECT_TRUE(missing.listRuns().empty());
  EXPECT_THAT(inputErrorOf([&] { missing.run(3); }), HasSubstr(db("missing.db") + ": no run 3"));
  EXPECT_FALSE(fs::exists(db("missing.db")));
}

// A reader opened while nobody wrote (immutable, no locks) sees what a writer adds afterwards, and a reader
// opened beside a live writer (its -wal exists) reads through the WAL.
TEST_F(Store, ReadersSeeWritesThatComeLater) {
  { ExperimentStore init(db()); }
  ExperimentStore reader = ExperimentStore::openForReading(db("missing-yet.db"));
  EXPECT_TRUE(reader.listRuns().empty());
  ExperimentStore early = ExperimentStore::openForReading(db());
  EXPECT_TRUE(early.listRuns().empty());
  ExperimentStore writer(db());
  RunRecorder a(writer, start());
  a.finish();
  EXPECT_EQ(early.listRuns().size(), 1u);
  ExperimentStore beside = ExperimentStore::openForReading(db());   // -wal exists now
  RunRecorder b(writer, start());
  b.finish();
  EXPECT_EQ(beside.listRuns().size(), 2u);
  EXPECT_EQ(early.listRuns().size(), 2u);
  ExperimentStore later(db("missing-yet.db"));
  RunRecorder c(later, start());
  c.finish();
  EXPECT_EQ(reader.listRuns().size(), 1u);
}

// A database in a folder this process cannot write: reading commands list it, recording fails with an error
// that says why. As root, chmod does not stop writes, so the checks run in a child that gave up root.
TEST_F(Store, ReadOnlyFolderCanBeListedButNotRecordedIn) {
  char tmpl[] = "/tmp/pareto-ro-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, path = dir + "/pareto.db";
  {
    ExperimentStore store(path);
    RunRecorder rec(store, start());
    rec.metric("ppl", 7.0);
    rec.finish();
  }
  ASSERT_FALSE(fs::exists(path + "-wal"));
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(77);
    try {
      ExperimentStore reader = ExperimentStore::openForReading(path);
      const auto runs = reader.listRuns();
      if (runs.size() != 1 || runs[0].metrics.at("ppl") != 7.0) ::_exit(10);
      (void)reader.run(runs[0].id);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "reader: %s\n", e.what());
      ::_exit(11);
    }
    try {
      ExperimentStore writer(path);
      ::_exit(12);
    } catch (const InputError& e) {
      const std::string m = e.what();
      std::fprintf(stderr, "writer (expected): %s\n", m.c_str());
      if (m.find(path) == std::string::npos || m.find("not writable") == std::string::npos) ::_exit(13);
    }
    ::_exit(fs::exists(path + "-shm") || fs::exists(path + "-wal") ? 14 : 0);
  }
  const int rc = waitChild(child);
  ::chmod(dir.c_str(), 0755);
  fs::remove_all(dir);
  if (rc == 77) GTEST_SKIP() << "running as root and cannot drop to uid 65534: a read-only folder cannot be made";
  EXPECT_EQ(rc, 0) << "10: wrong runs, 11: reading failed, 12: writing opened, 13: unclear error, 14: files created";
}

// Another process holds the write lock: finish() waits for it (beyond the busy timeout, up to the final-write
// timeout); when it never comes free, finish() says so and the run stays running, results not half-written.
TEST_F(Store, FinalWriteWaitsForALockAndReportsWhenItCannot) {
  auto holdLock = [&](int ms, int ready) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      sqlite3* raw = nullptr;
      sqlite3_open(db().c_str(), &raw);
      sqlite3_exec(raw, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
      (void)::write(ready, "x", 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      sqlite3_exec(raw, "COMMIT", nullptr, nullptr, nullptr);
      sqlite3_close(raw);
      ::_exit(0);
    }
    char byte;
    EXPECT_EQ(::read(ready - 1, &byte, 1), 1);
    return pid;
  };
  ExperimentStore store(db());
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  ASSERT_EQ(pipeFds[1], pipeFds[0] + 1);

  RunRecorder ok(store, start());
  ok.metric("ppl", 3.0);
  store.setFinalWriteTimeout(std::chrono::seconds(20));
  pid_t holder = holdLock(1500, pipeFds[1]);
  ok.finish();
  EXPECT_EQ(waitChild(holder), 0);
  EXPECT_EQ(store.run(ok.id()).summary.status, RunStatus::Finished);

  RunRecorder stuck(store, start());
  stuck.metric("ppl", 4.0);
  store.setFinalWriteTimeout(std::chrono::milliseconds(800));
  holder = holdLock(4000, pipeFds[1]);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    stuck.finish();
    ADD_FAILURE() << "finish() succeeded under a lock held longer than its timeout";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(db()));
    EXPECT_THAT(e.what(), HasSubstr("database is locked"));
    EXPECT_THAT(e.what(), HasSubstr("gave up after retrying"));
    EXPECT_THAT(e.what(), HasSubstr("stays \"running\""));
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.5);
  EXPECT_EQ(waitChild(holder), 0);
  RawDb raw(db());
  EXPECT_EQ(raw.text("SELECT status FROM runs WHERE id = " + std::to_string(stuck.id())), "running");
  EXPECT_EQ(raw.number("SELECT count(*) FROM metrics WHERE run_id = " + std::to_string(stuck.id())), 0);
  ::close(pipeFds[0]);
  ::close(pipeFds[1]);
}

// A running run whose pid cannot be checked here (another PID namespace or boot) is decided by its heartbeat:
// running while it is fresh, interrupted once older than the bound; the recorder keeps it fresh.
TEST_F(Store, HeartbeatDecidesRunsWhosePidCannotBeChecked) {
  ExperimentStore store(db());
  store.setHeartbeatInterval(std::chrono::milliseconds(50));
  RunRecorder live(store, start());
  RawDb raw(db());
  const std::string id = std::to_string(live.id());
  EXPECT_EQ(raw.text("SELECT pid_namespace FROM runs WHERE id = " + id), currentProcess().pidNamespace);
  EXPECT_EQ(raw.text("SELECT boot_id FROM runs WHERE id = " + id), currentProcess().bootId);
  raw.exec("UPDATE runs SET pid_namespace = 'pid:[1]', pid = 999999999, heartbeat_at = 0 WHERE id = " + id);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const double beat = std::stod(raw.text("SELECT heartbeat_at FROM runs WHERE id = " + id));
  EXPECT_GT(beat, static_cast<double>(std::time(nullptr)) - 5) << "the recorder did not refresh its heartbeat";
  EXPECT_EQ(store.run(live.id()).summary.status, RunStatus::Running);

  const double now = static_cast<double>(std::time(nullptr));
  auto row = [&](double heartbeat) {
    raw.exec("INSERT INTO runs (kind, status, started_at, pid, host, boot_id, pid_namespace, heartbeat_at) VALUES "
             "('perplexity', 'running', 0, 999999999, 'h', 'b', 'pid:[1]', " + std::to_string(heartbeat) + ")");
    return std::stoll(raw.text("SELECT max(id) FROM runs"));
  };
  const int64_t fresh = row(now - 5), stale = row(now - ExperimentStore::kHeartbeatStaleSeconds - 30);
  EXPECT_EQ(store.run(fresh).summary.status, RunStatus::Running);
  EXPECT_EQ(store.run(stale).summary.status, RunStatus::Interrupted);
  EXPECT_EQ(ExperimentStore::openForReading(db()).run(stale).summary.status, RunStatus::Interrupted);
  live.finish();
  EXPECT_EQ(store.run(live.id()).summary.status, RunStatus::Finished);
}

// A real second PID namespace (unprivileged, through a user namespace) records a run that must read as
// running from here while it runs; before, its pid (1 there) was checked here and the run read interrupted.
TEST_F(Store, RunInAnotherPidNamespaceReadsRunningWhileItRuns) {
  { ExperimentStore init(db()); }
  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    ::close(release[1]);   // else the inner writer would never see the parent close its end
    if (::unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0 && ::unshare(CLONE_NEWPID) != 0) ::_exit(77);
    const pid_t inner = ::fork();
    if (inner < 0) ::_exit(78);
    if (inner == 0) {
      try {
        ExperimentStore store(db());
        RunRecorder rec(store, start());
        const int64_t id = rec.id();
        (void)::write(ready[1], &id, sizeof id);
        char byte;
        (void)::read(release[0], &byte, 1);
        rec.finish();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "inner writer: %s\n", e.what());
        ::_exit(3);
      }
      ::_exit(0);
    }
    ::_exit(waitChild(inner));
  }
  ::close(ready[1]);
  ::close(release[0]);
  int64_t id = 0;
  const ssize_t n = ::read(ready[0], &id, sizeof id);
  if (n != static_cast<ssize_t>(sizeof id)) {
    ::close(release[1]);
    const int rc = waitChild(child);
    if (rc == 77) GTEST_SKIP() << "unshare(CLONE_NEWPID) is not permitted here";
    FAIL() << "the writer in the new namespace exited with " << rc;
  }
  {
    ExperimentStore store(db());
    RunDetails d = store.run(id);
    EXPECT_EQ(d.summary.process.pid, 1) << "not in a new PID namespace";
    EXPECT_NE(d.summary.process.pidNamespace, currentProcess().pidNamespace);
    EXPECT_EQ(d.summary.status, RunStatus::Running);
    EXPECT_EQ(ExperimentStore::openForReading(db()).listRuns().at(0).status, RunStatus::Running);
  }
  ::close(release[1]);
  EXPECT_EQ(waitChild(child), 0);
  EXPECT_EQ(ExperimentStore(db()).run(id).summary.status, RunStatus::Finished);
  ::close(ready[0]);
}

}  // namespace
}  // namespace pareto
