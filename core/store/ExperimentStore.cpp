#include "store/ExperimentStore.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "store/MetricNames.h"
#include "store/Sqlite.h"
#include "util/Error.h"

namespace pareto {
namespace fs = std::filesystem;
using sqlite::BusyError;
using sqlite::Database;
using sqlite::OpenMode;
using sqlite::Statement;
using sqlite::Transaction;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Forward migrations: entry i takes a file from version i to version i + 1. Never edit a shipped entry (files
// in the wild are at its version); add a new one and raise kSchemaVersion.
const char* const kMigrations[] = {
    // 1: the tables of DESIGN.md.
    R"sql(
CREATE TABLE schema_version (
  version INTEGER PRIMARY KEY,
  applied_at REAL NOT NULL
);
CREATE TABLE models (
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  architecture TEXT NOT NULL DEFAULT '',
  size_bytes INTEGER NOT NULL DEFAULT 0,
  UNIQUE (path, content_hash)
);
-- AUTOINCREMENT: the id of a deleted run is never given to a new one, so "run 12" in a note stays unambiguous.
CREATE TABLE runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL,
  model_id INTEGER REFERENCES models(id) ON DELETE SET NULL,
  recipe TEXT NOT NULL DEFAULT '{}',
  status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'cancelled')),
  started_at REAL NOT NULL,
  ended_at REAL,
  versions TEXT NOT NULL DEFAULT '{}',
  device TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT ''
);
CREATE TABLE metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  value REAL,
  PRIMARY KEY (run_id, name)
);
CREATE TABLE module_stats (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  module TEXT NOT NULL,
  name TEXT NOT NULL,
  value REAL,
  PRIMARY KEY (run_id, module, name)
);
CREATE TABLE curves (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  x REAL NOT NULL,
  y REAL
);
CREATE INDEX curves_by_run ON curves (run_id, name);
CREATE TABLE benchmarks (
  id INTEGER PRIMARY KEY,
  run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE,
  device TEXT NOT NULL,
  kernel TEXT NOT NULL,
  shape TEXT NOT NULL,
  batch INTEGER NOT NULL DEFAULT 1,
  time_us REAL NOT NULL,
  gbps REAL,
  recorded_at REAL NOT NULL
);
)sql",
    // 2: who recorded a run (pid, host, process start) so that readers can tell a live run from one whose
    // process was killed; where compress wrote its folder; indexes for `runs list --kind/--model`, for deleting
    // models (the foreign key of runs) and for benchmark look-ups by device and kernel.
    R"sql(
ALTER TABLE runs ADD COLUMN pid INTEGER;
ALTER TABLE runs ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN process_start TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN output TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_by_kind ON runs (kind, started_at);
CREATE INDEX runs_by_model ON runs (model_id);
CREATE INDEX benchmarks_by_kernel ON benchmarks (device, kernel);
)sql",
    // 3: the recorder's boot and PID namespace (a pid means a process only within both) and a heartbeat that
    // the recorder refreshes while the run goes on, for readers that cannot check the pid.
    R"sql(
ALTER TABLE runs ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN pid_namespace TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN heartbeat_at REAL;
)sql",
    // 4: the user's tag and note of a run.
    R"sql(
ALTER TABLE runs ADD COLUMN tag TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT '';
)sql",
};
constexpr int kMigrationCount = static_cast<int>(sizeof kMigrations / sizeof kMigrations[0]);
static_assert(kMigrationCount == ExperimentStore::kSchemaVersion, "one migration per schema version");

const char* statusText(RunStatus s) {
  switch (s) {
    case RunStatus::Running: return "running";
    case RunStatus::Finished: return "finished";
    case RunStatus::Failed: return "failed";
    case RunStatus::Cancelled: return "cancelled";
    case RunStatus::Interrupted: return "interrupted";
  }
  return "running";
}

RunStatus parseStatus(const std::string& s) {
  if (s == "finished") return RunStatus::Finished;
  if (s == "failed") return RunStatus::Failed;
  if (s == "cancelled") return RunStatus::Cancelled;
  return RunStatus::Running;
}

nlohmann::json parseJsonColumn(const std::string& text) {
  if (text.empty()) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return text;   // written by hand or by another tool: keep what is there
  }
}

// The columns listRuns and run() read, in this order. A file opened read-only keeps its schema version:
// columns added by later migrations read as their defaults.
std::string runColumns(int version) {
  std::string c =
      "r.id, r.kind, r.status, r.started_at, r.ended_at, r.model_id, m.path, m.content_hash, m.architecture, "
      "m.size_bytes, r.device, ";
  c += version >= 2 ? "r.output, r.error, r.pid, r.host, r.process_start, " : "'', r.error, NULL, '', '', ";
  c += version >= 3 ? "r.boot_id, r.pid_namespace, r.heartbeat_at, " : "'', '', NULL, ";
  c += version >= 4 ? "r.tag, r.note" : "'', ''";
  return c;
}
constexpr int kRunColumnCount = 21;

RunStatus statusNow(RunStatus stored, const ProcessIdentity& process, double heartbeatAt) {
  if (stored != RunStatus::Running) return stored;
  switch (processLiveness(process)) {
    case Liveness::Alive: return RunStatus::Running;
    case Liveness::Dead: return RunStatus::Interrupted;
    case Liveness::Unknown: break;
  }
  // Without a heartbeat (a run recorded by an older Pareto, or on another machine by one) nothing tells.
  if (std::isfinite(heartbeatAt) && now() - heartbeatAt > ExperimentStore::kHeartbeatStaleSeconds)
    return RunStatus::Interrupted;
  return RunStatus::Running;
}

RunSummary readRunRow(const Statement& s) {
  RunSummary r;
  r.id = s.getInt(0);
  r.kind = s.getText(1);
  r.status = parseStatus(s.getText(2));
  r.startedAt = s.getDouble(3);
  r.endedAt = s.getDouble(4);
  if (!s.isNull(5)) r.modelId = s.getInt(5);
  r.modelPath = s.getText(6);
  r.modelHash = s.getText(7);
  r.architecture = s.getText(8);
  r.modelSize = static_cast<uint64_t>(s.getInt(9));
  r.device = s.getText(10);
  r.output = s.getText(11);
  r.error = s.getText(12);
  r.process.pid = s.isNull(13) ? 0 : s.getInt(13);
  r.process.host = s.getText(14);
  r.process.startToken = s.getText(15);
  r.process.bootId = s.getText(16);
  r.process.pidNamespace = s.getText(17);
  r.heartbeatAt = s.getDouble(18);
  r.tag = s.getText(19);
  r.note = s.getText(20);
  r.status = statusNow(r.status, r.process, r.heartbeatAt);
  return r;
}

// What a reader that opened the file immutable (no locks) checks to know nobody wrote it since.
struct FileState {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtimeNs = 0, ctimeNs = 0;
  bool operator==(const FileState& o) const {
    return exists == o.exists && dev == o.dev && ino == o.ino && size == o.size && mtimeNs == o.mtimeNs &&
           ctimeNs == o.ctimeNs;
  }
  bool operator!=(const FileState& o) const { return !(*this == o); }
};

FileState fileState(const std::string& path) {
  struct stat st {};
  FileState f;
  if (::stat(path.c_str(), &st) != 0) return f;
  f.exists = true;
  f.dev = st.st_dev;
  f.ino = st.st_ino;
  f.size = st.st_size;
  f.mtimeNs = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  f.ctimeNs = int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return f;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Why SQLite cannot write here, in words, when the permissions tell; empty when they do not (root, or a
// problem of another kind).
std::string unwritableReason(const std::string& path) {
  const std::string dir = fs::absolute(path).parent_path().string();
  if (::access(dir.c_str(), W_OK) != 0)
    return "its folder " + dir + " is not writable (SQLite creates " + fs::path(path).filename().string() +
           "-wal and -shm beside the database)";
  if (exists(path) && ::access(path.c_str(), W_OK) != 0) return "the file is read-only";
  return {};
}

}  // namespace

const std::vector<std::string>& runKinds() {
  static const std::vector<std::string> kinds = {"compress", "perplexity", "fidelity", "drift", "hessian", "bench"};
  return kinds;
}

const char* runStatusName(RunStatus status) { return statusText(status); }

std::string defaultStorePath() {
  if (const char* p = std::getenv("PARETO_DB"); p != nullptr && *p != '\0') return p;
  // XDG: a relative XDG_DATA_HOME is invalid and must be ignored.
  if (const char* x = std::getenv("XDG_DATA_HOME"); x != nullptr && *x == '/')
    return (fs::path(x) / "pareto" / "pareto.db").string();
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0')
    throw InputError("no place for the experiment database: HOME is not set (give --db FILE or set PARETO_DB)");
  return (fs::path(home) / ".local" / "share" / "pareto" / "pareto.db").string();
}

struct ExperimentStore::Impl {
  std::string path;
  std::unique_ptr<Database> conn;
  Database& db() const { return *conn; }
  bool readOnly = false;
  int schema = 0;              // of the open file, read at open (read-only stores never migrate)
  FileState opened;            // immutable or in-memory readers: the file as it was when opened
  std::chrono::milliseconds finalWriteTimeout{kFinalWriteTimeoutMs};
  std::chrono::milliseconds heartbeatInterval{kHeartbeatIntervalMs};

  int version() const {
    Statement t(db(), "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
    t.step();
    if (t.getInt(0) == 0) return 0;
    Statement v(db(), "SELECT coalesce(max(version), 0) FROM schema_version");
    v.step();
    return static_cast<int>(v.getInt(0));
  }

  void checkVersion(int version) const {
    if (version > kSchemaVersion)
      throw InputError(fileMessage(path, "schema version " + std::to_string(version) +
                                             " was written by a newer Pareto (this one knows up to " +
                                             std::to_string(kSchemaVersion) + "); upgrade Pareto or use another --db"));
    if (version == 0) {
      Statement tables(db(), "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
      tables.step();
      if (tables.getInt(0) > 0)
        throw InputError(fileMessage(path, "has tables but no schema_version: not a Pareto experiment database"));
    }
  }

  void requireWritable() const {
    if (readOnly)
      throw InputError(fileMessage(path, "opened read-only (for reading runs); it cannot record or delete runs"));
  }

  // A reading connection: immutable while no -wal or rollback journal exists (then no connection has the file
  // open for writing, and opening it immutable creates no -wal/-shm files even where the folder would allow
  // it), a plain read-only one while they exist (SQLite reads a WAL it cannot write since 3.22), an empty
  // in-memory store for a file that does not exist.
  void openReading() {
    opened = fileState(path);
    if (!opened.exists) {
      conn = std::make_unique<Database>(path, kBusyTimeoutMs, OpenMode::Memory);
      for (int v = 0; v < kMigrationCount; ++v) db().exec(kMigrations[v]);
      schema = kSchemaVersion;
      return;
    }
    const bool journal = exists(path + "-wal") || exists(path + "-journal");
    conn = std::make_unique<Database>(path, kBusyTimeoutMs, journal ? OpenMode::ReadOnly : OpenMode::Immutable);
    try {
      Transaction tx(db(), /*immediate=*/false);
      schema = version();
      checkVersion(schema);
      tx.commit();
    } catch (const InputError&) {
      throw;
    } catch (const Error& e) {
      const std::string why = unwritableReason(path);
      if (why.empty()) throw;
      throw InputError(fileMessage(path, "cannot be read: " + why + " and a -wal file of a writer is there but "
                                             "no -shm file [" + e.what() + "]"));
    }
  }

  bool unchangedSinceOpened() const { return fileState(path) == opened && !exists(path + "-wal"); }

  // Runs a read. A reader that holds no locks (immutable, or in memory for a missing file) checks that the
  // file is as it was when opened, before and after: a writer that came in between means reopening and
  // reading again, since an immutable connection would not see its changes (or could see half of them).
  template <class F>
  auto read(F&& f) -> decltype(f()) {
    for (int attempt = 1;; ++attempt) {
      const OpenMode mode = db().mode();
      if (mode != OpenMode::Immutable && mode != OpenMode::Memory) return f();
      if (unchangedSinceOpened()) {
        try {
          auto result = f();
          if (unchangedSinceOpened()) return result;
        } catch (const Error&) {
          if (unchangedSinceOpened()) throw;   // a real problem of the file, not a torn read
        }
      }
      if (attempt == 50)
        throw Error(fileMessage(path, "changed while being read, 50 times in a row; try again"));
      if (attempt > 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      openReading();
    }
  }

  int64_t modelId(const ModelIdentity& m) {
    Statement insert(db(),
                     "INSERT INTO models (path, content_hash, architecture, size_bytes) VALUES (?1, ?2, ?3, ?4) "
                     "ON CONFLICT (path, content_hash) DO UPDATE SET architecture = excluded.architecture, "
                     "size_bytes = excluded.size_bytes");
    insert.bind(1, m.path).bind(2, m.contentHash).bind(3, m.architecture).bind(4, static_cast<int64_t>(m.sizeBytes));
    insert.run();
    Statement find(db(), "SELECT id FROM models WHERE path = ?1 AND content_hash = ?2");
    find.bind(1, m.path).bind(2, m.contentHash);
    find.step();
    return find.getInt(0);
  }

  void requireRun(int64_t runId) const {
    Statement s(db(), "SELECT 1 FROM runs WHERE id = ?1");
    s.bind(1, runId);
    if (!s.step()) throw InputError(fileMessage(path, "no run " + std::to_string(runId)));
  }

  void insertBenchmarks(std::optional<int64_t> runId, const std::vector<BenchmarkRow>& rows) {
    Statement s(db(),
                "INSERT INTO benchmarks (run_id, device, kernel, shape, batch, time_us, gbps, recorded_at) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    const double t = now();
    for (const auto& b : rows) {
      if (b.kernel.empty() || !std::isfinite(b.timeUs) || b.timeUs < 0)
        throw InputError(fileMessage(path, "benchmark row of kernel \"" + b.kernel +
                                               "\" needs a kernel name and a finite time"));
      s.bind(1, runId).bind(2, b.device).bind(3, b.kernel).bind(4, b.shape).bind(5, b.batch).bind(6, b.timeUs);
      s.bind(7, b.gbps).bind(8, t);
      s.run();
      s.reset();
    }
  }
};

ExperimentStore::ExperimentStore(const std::string& path, int targetVersion) {
  if (path.empty()) throw InputError("no experiment database file given");
  const fs::path parent = fs::absolute(path).parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw InputError(fileMessage(parent.string(), "cannot create the folder of the experiment database: " +
                                                          ec.message()));
  impl_ = std::make_unique<Impl>();
  impl_->path = path;
  try {
    impl_->conn = std::make_unique<Database>(path, kBusyTimeoutMs);
    Database& db = impl_->db();
    // Foreign keys are off by default in SQLite and per connection; without them deleting a run would orphan
    // its metrics. WAL lets the GUI read while a CLI writes; switching needs a write lock once per file, for
    // which the busy timeout (set when opening) waits.
    db.exec("PRAGMA foreign_keys = ON");
    // SQLite does not call the busy handler for the journal-mode switch (it needs an exclusive lock, and
    // waiting there could deadlock), so two processes opening a new file at once can see SQLITE_BUSY
    // immediately: retry that for as long as the busy timeout would have waited. Any other failure (not a
    // database, damaged, not writable) is final.
    for (int attempt = 0;; ++attempt) {
      try {
        Statement mode(db, "PRAGMA journal_mode = WAL");
        mode.step();
        break;
      } catch (const BusyError&) {
        if (attempt >= kBusyTimeoutMs / 10) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      // A file system without shared memory (some network mounts) keeps the rollback journal; the store still
      // works there, only readers wait for writers.
    }
    // In WAL mode NORMAL never corrupts the file and loses nothing on a process crash (only on power loss),
    // which is what two processes sharing a file need.
    db.exec("PRAGMA synchronous = NORMAL");
    migrate(targetVersion);
  } catch (const BusyError&) {
    throw;
  } catch (const Error& e) {
    const std::string why = unwritableReason(path);
    if (why.empty()) throw;
    throw InputError(fileMessage(path, "cannot record runs here: " + why +
                                           "; `pareto-cli runs list/show/compare/export` can still read it [" +
                                           e.what() + "]"));
  }
}

ExperimentStore ExperimentStore::openForReading(const std::string& path) {
  if (path.empty()) throw InputError("no experiment database file given");
  ExperimentStore store;
  store.impl_ = std::make_unique<Impl>();
  store.impl_->path = path;
  store.impl_->readOnly = true;
  store.impl_->openReading();
  return store;
}

ExperimentStore::~ExperimentStore() = default;
ExperimentStore::ExperimentStore(ExperimentStore&&) noexcept = default;
ExperimentStore& ExperimentStore::operator=(ExperimentStore&&) noexcept = default;

const std::string& ExperimentStore::path() const { return impl_->path; }

int ExperimentStore::schemaVersion() const {
  return impl_->readOnly ? impl_->read([&] { return impl_->version(); }) : impl_->version();
}

bool ExperimentStore::readOnly() const { return impl_->readOnly; }
void ExperimentStore::setFinalWriteTimeout(std::chrono::milliseconds t) { impl_->finalWriteTimeout = t; }
std::chrono::milliseconds ExperimentStore::finalWriteTimeout() const { return impl_->finalWriteTimeout; }
void ExperimentStore::setHeartbeatInterval(std::chrono::milliseconds t) { impl_->heartbeatInterval = t; }
std::chrono::milliseconds ExperimentStore::heartbeatInterval() const { return impl_->heartbeatInterval; }

void ExperimentStore::migrate(int targetVersion) {
  if (targetVersion < 1 || targetVersion > kSchemaVersion)
    throw Error("experiment store: no schema version " + std::to_string(targetVersion));
  impl_->requireWritable();
  Database& db = impl_->db();
  for (;;) {
    // The version is read inside the write transaction: two processes opening a new file at once both wait
    // here, and the second one finds the migration already applied.
    Transaction tx(db);
    const int version = impl_->version();
    impl_->checkVersion(version);
    impl_->schema = version;
    if (version >= targetVersion) return;
    db.exec(kMigrations[version]);
    Statement mark(db, "INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)");
    mark.bind(1, int64_t{version + 1}).bind(2, now());
    mark.run();
    tx.commit();
  }
}

int64_t ExperimentStore::beginRun(const RunStart& start) {
  impl_->requireWritable();
  const auto& kinds = runKinds();
  if (std::find(kinds.begin(), kinds.end(), start.kind) == kinds.end())
    throw InputError(fileMessage(path(), "unknown run kind \"" + start.kind + "\""));
  nlohmann::json versions = start.versions.is_object() ? start.versions : nlohmann::json::object();
  versions["sqlite"] = sqlite3_libversion();
  const ProcessIdentity me = currentProcess();
  Database& db = impl_->db();
  Transaction tx(db);
  std::optional<int64_t> model;
  if (start.model) model = impl_->modelId(*start.model);
  Statement s(db,
              "INSERT INTO runs (kind, model_id, recipe, status, started_at, versions, device, output, pid, host, "
              "process_start, boot_id, pid_namespace, heartbeat_at) "
              "VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?4)");
  s.bind(1, start.kind).bind(2, model).bind(3, start.recipe.dump()).bind(4, now()).bind(5, versions.dump());
  s.bind(6, start.device).bind(7, start.output).bind(8, me.pid).bind(9, me.host).bind(10, me.startToken);
  s.bind(11, me.bootId).bind(12, me.pidNamespace);
  s.run();
  const int64_t id = db.lastInsertId();
  tx.commit();
  return id;
}

void ExperimentStore::finishRun(int64_t runId, const RunResults& results) {
  impl_->requireWritable();
  Database& db = impl_->db();
  auto write = [&] {
    Transaction tx(db);
    impl_->requireRun(runId);
    {
      Statement s(db, "INSERT OR REPLACE INTO metrics (run_id, name, value) VALUES (?1, ?2, ?3)");
      for (const auto& m : results.metrics) {
        s.bind(1, runId).bind(2, m.name).bind(3, m.value);
        s.run();
        s.reset();
      }
    }
    {
      Statement s(db, "INSERT OR REPLACE INTO module_stats (run_id, module, name, value) VALUES (?1, ?2, ?3, ?4)");
      for (const auto& m : results.moduleStats) {
        s.bind(1, runId).bind(2, m.module).bind(3, m.name).bind(4, m.value);
        s.run();
        s.reset();
      }
    }
    {
      Statement s(db, "INSERT INTO curves (run_id, name, x, y) VALUES (?1, ?2, ?3, ?4)");
      for (const auto& c : results.curves) {
        if (c.x.size() != c.y.size())
          throw Error(fileMessage(path(), "curve " + c.name + " has " + std::to_string(c.x.size()) + " x and " +
                                              std::to_string(c.y.size()) + " y values"));
        for (size_t i = 0; i < c.x.size(); ++i) {
          if (std::isnan(c.x[i])) continue;
          s.bind(1, runId).bind(2, c.name).bind(3, c.x[i]).bind(4, c.y[i]);
          s.run();
          s.reset();
        }
      }
    }
    impl_->insertBenchmarks(runId, results.benchmarks);
    if (results.recipe) {
      Statement s(db, "UPDATE runs SET recipe = ?2 WHERE id = ?1");
      s.bind(1, runId).bind(2, results.recipe->dump());
      s.run();
    }
    Statement s(db, "UPDATE runs SET status = 'finished', ended_at = ?2, error = '' WHERE id = ?1");
    s.bind(1, runId).bind(2, now());
    s.run();
    tx.commit();
  };
  // The results exist only in this process: a lock that outlasts the busy timeout (another process's long
  // transaction, a sqlite3 shell left in BEGIN) is waited out, up to finalWriteTimeout, before they are lost.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point begin = Clock::now(), deadline = begin + impl_->finalWriteTimeout;
  std::chrono::milliseconds pause(50);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    db.setBusyTimeout(static_cast<int>(std::clamp<int64_t>(left, 0, kBusyTimeoutMs)));
    try {
      write();
      db.setBusyTimeout(kBusyTimeoutMs);
      return;
    } catch (const BusyError& e) {
      if (Clock::now() + pause >= deadline) {
        db.setBusyTimeout(kBusyTimeoutMs);
        const double waited = std::chrono::duration<double>(Clock::now() - begin).count();
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.0f", waited);
        throw BusyError(std::string(e.what()) + "; gave up after retrying for " + seconds + " s");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(2000));
    }
  }
}

void ExperimentStore::endRun(int64_t runId, RunStatus status, const std::string& message) {
  if (status != RunStatus::Failed && status != RunStatus::Cancelled)
    throw Error("experiment store: endRun takes failed or cancelled, not " + std::string(statusText(status)));
  impl_->requireWritable();
  Database& db = impl_->db();
  Transaction tx(db);
  impl_->requireRun(runId);
  Statement s(db, "UPDATE runs SET status = ?2, ended_at = ?3, error = ?4 WHERE id = ?1");
  s.bind(1, runId).bind(2, std::string(statusText(status))).bind(3, now()).bind(4, message);
  s.run();
  tx.commit();
}

void ExperimentStore::addBenchmarks(std::optional<int64_t> runId, const std::vector<BenchmarkRow>& rows) {
  impl_->requireWritable();
  Transaction tx(impl_->db());
  if (runId) impl_->requireRun(*runId);
  impl_->insertBenchmarks(runId, rows);
  tx.commit();
}

std::vector<BenchmarkRow> ExperimentStore::benchmarks(const std::string& device, const std::string& kernel) const {
  return impl_->read([&] {
    Statement s(impl_->db(),
                "SELECT device, kernel, shape, batch, time_us, gbps, recorded_at FROM benchmarks WHERE (?1 = '' OR "
                "device = ?1) "
                "AND (?2 = '' OR kernel = ?2) ORDER BY recorded_at DESC, id DESC");
    s.bind(1, device).bind(2, kernel);
    std::vector<BenchmarkRow> rows;
    while (s.step())
      rows.push_back({s.getText(0), s.getText(1), s.getText(2), s.getInt(3), s.getDouble(4), s.getDouble(5), s.getDouble(6)});
    return rows;
  });
}

std::vector<RunSummary> ExperimentStore::listRuns(const RunFilter& filter) const {
  return impl_->read([&] {
    Database& db = impl_->db();
    const std::string where =
        " FROM runs r LEFT JOIN models m ON m.id = r.model_id WHERE (?1 = '' OR instr(m.path, ?1) > 0) AND "
        "(?2 = '' OR r.kind = ?2)";
    // One snapshot for both queries, so a run finishing in between cannot show without its metrics.
    Transaction tx(db, /*immediate=*/false);
    std::vector<RunSummary> runs;
    std::map<int64_t, size_t> index;
    {
      Statement s(db, "SELECT " + runColumns(impl_->schema) + where + " ORDER BY r.id DESC");
      s.bind(1, filter.model).bind(2, filter.kind);
      while (s.step()) {
        index[s.getInt(0)] = runs.size();
        runs.push_back(readRunRow(s));
      }
    }
    Statement s(db, "SELECT x.run_id, x.name, x.value FROM metrics x WHERE x.run_id IN (SELECT r.id" + where + ")");
    s.bind(1, filter.model).bind(2, filter.kind);
    while (s.step()) {
      auto it = index.find(s.getInt(0));
      if (it != index.end()) {
        RunSummary& run = runs[it->second];
        metric::addStoredMetric(run.metrics, run.kind, s.getText(1), s.getDouble(2));
      }
    }
    tx.commit();
    return runs;
  });
}

bool ExperimentStore::hasRun(int64_t runId) const {
  return impl_->read([&] {
    Statement s(impl_->db(), "SELECT 1 FROM runs WHERE id = ?1");
    s.bind(1, runId);
    return s.step();
  });
}

RunDetails ExperimentStore::run(int64_t runId) const {
  return impl_->read([&] {
    Database& db = impl_->db();
    Transaction tx(db, /*immediate=*/false);
    RunDetails d;
    {
      Statement s(db, "SELECT " + runColumns(impl_->schema) +
                          ", r.recipe, r.versions FROM runs r LEFT JOIN models m ON m.id = r.model_id WHERE r.id = ?1");
      s.bind(1, runId);
      if (!s.step()) throw InputError(fileMessage(impl_->path, "no run " + std::to_string(runId)));
      d.summary = readRunRow(s);
      d.recipe = parseJsonColumn(s.getText(kRunColumnCount));
      d.versions = parseJsonColumn(s.getText(kRunColumnCount + 1));
    }
    {
      Statement s(db, "SELECT name, value FROM metrics WHERE run_id = ?1 ORDER BY name");
      s.bind(1, runId);
      while (s.step()) metric::addStoredMetric(d.summary.metrics, d.summary.kind, s.getText(0), s.getDouble(1));
      for (const auto& [name, value] : d.summary.metrics) d.metrics.push_back({name, value});
    }
    {
      Statement s(db, "SELECT module, name, value FROM module_stats WHERE run_id = ?1 ORDER BY rowid");
      s.bind(1, runId);
      while (s.step()) d.moduleStats.push_back({s.getText(0), s.getText(1), s.getDouble(2)});
    }
    {
      Statement s(db, "SELECT name, x, y FROM curves WHERE run_id = ?1 ORDER BY name, rowid");
      s.bind(1, runId);
      while (s.step()) {
        const std::string name = s.getText(0);
        if (d.curves.empty() || d.curves.back().name != name) d.curves.push_back({name, {}, {}});
        d.curves.back().x.push_back(s.getDouble(1));
        d.curves.back().y.push_back(s.getDouble(2));
      }
    }
    {
      Statement s(db,
                  "SELECT device, kernel, shape, batch, time_us, gbps, recorded_at FROM benchmarks WHERE run_id = ?1 "
                  "ORDER BY id");
      s.bind(1, runId);
      while (s.step())
        d.benchmarks.push_back({s.getText(0), s.getText(1), s.getText(2), s.getInt(3), s.getDouble(4), s.getDouble(5), s.getDouble(6)});
    }
    tx.commit();
    return d;
  });
}

void ExperimentStore::deleteRun(int64_t runId) {
  impl_->requireWritable();
  Database& db = impl_->db();
  Transaction tx(db);
  impl_->requireRun(runId);
  // Metrics, module stats, curves and benchmarks go with it (ON DELETE CASCADE).
  Statement s(db, "DELETE FROM runs WHERE id = ?1");
  s.bind(1, runId);
  s.run();
  tx.commit();
}

void ExperimentStore::setRunLabel(int64_t runId, const std::string& tag, const std::string& note) {
  impl_->requireWritable();
  if (tag.find_first_of("\r\n") != std::string::npos)
    throw InputError(fileMessage(impl_->path, "run " + std::to_string(runId) + ": a tag is one line"));
  Database& db = impl_->db();
  Transaction tx(db);
  impl_->requireRun(runId);
  Statement s(db, "UPDATE runs SET tag = ?2, note = ?3 WHERE id = ?1");
  s.bind(1, runId).bind(2, tag).bind(3, note);
  s.run();
  tx.commit();
}

int64_t recordBenchmarks(ExperimentStore& store, const RunStart& start, const std::vector<BenchmarkRow>& rows) {
  RunStart s = start;
  s.kind = "bench";
  const int64_t id = store.beginRun(s);
  RunResults results;
  results.benchmarks = rows;
  try {
    store.finishRun(id, results);
  } catch (const std::exception& e) {
    try {
      store.endRun(id, RunStatus::Failed, e.what());
    } catch (const std::exception&) {
      // The first error is the one worth reporting; the run then reads as interrupted.
    }
    throw;
  }
  return id;
}

}  // namespace pareto
