// Thin RAII wrappers over the SQLite C API, private to core/store: a connection, a prepared statement and a
// write transaction. Every failure becomes an Error (or InputError for a file that is not a usable database)
// whose message names the database file and the statement that failed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "util/Error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace pareto::sqlite {

// Another connection held a lock longer than the busy timeout (SQLITE_BUSY, SQLITE_LOCKED): the one failure
// that waiting longer can cure.
class BusyError : public Error {
 public:
  using Error::Error;
};

enum class OpenMode {
  ReadWriteCreate,   // the file is created when missing
  ReadWrite,         // the file must exist
  ReadOnly,          // SQLITE_OPEN_READONLY: locks and WAL as usual, nothing is ever written to the database
  // ?immutable=1: no locks, no -wal or -shm files, so it opens in a folder where they cannot be created. Only
  // correct while nobody writes the file; ExperimentStore checks that around every read.
  Immutable,
  Memory,            // an empty in-memory database standing in for a file that does not exist
};

class Database {
 public:
  // busyTimeoutMs: how long a statement waits for another process's lock before failing with "database is
  // locked". A file that exists, is not empty and does not start with SQLite's header is refused here, before
  // SQLite sees it (InputError "<file>: not an SQLite database").
  Database(const std::string& path, int busyTimeoutMs, OpenMode mode = OpenMode::ReadWriteCreate);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements without results; throws naming the file and the SQL.
  void exec(const std::string& sql);
  const std::string& path() const { return path_; }
  OpenMode mode() const { return mode_; }
  sqlite3* handle() const { return db_; }
  void setBusyTimeout(int ms);
  int64_t lastInsertId() const;
  int changes() const;
  // Throws Error "<file>: <what>: <sqlite message>" (InputError for corrupt, non-database or unwritable files,
  // BusyError for a lock held too long).
  [[noreturn]] void fail(int rc, const std::string& what) const;

 private:
  std::string path_;
  OpenMode mode_;
  sqlite3* db_ = nullptr;
};

class Statement {
 public:
  Statement(const Database& db, const std::string& sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binding is 1-based, as in SQLite. A NaN double binds as NULL (SQLite turns NaN into NULL anyway).
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, const std::string& value);
  Statement& bindNull(int index);
  Statement& bind(int index, const std::optional<int64_t>& value);

  // Advances to the next row; false when done. Throws on errors.
  bool step();
  // Runs a statement that returns no rows.
  void run();
  // Makes the statement reusable with new bindings.
  void reset();

  bool isNull(int column) const;
  int64_t getInt(int column) const;
  double getDouble(int column) const;   // NULL reads as NaN
  std::string getText(int column) const;

 private:
  const Database& db_;
  std::string sql_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE ... COMMIT for writes; rolled back when destroyed without commit(). IMMEDIATE takes the write
// lock at BEGIN, where busy_timeout applies: a deferred transaction that reads first and then writes can fail at
// once with SQLITE_BUSY when another process wrote in between, and no amount of waiting fixes that. Readers
// pass immediate = false: a deferred transaction gives several SELECTs one consistent snapshot (WAL).
class Transaction {
 public:
  explicit Transaction(Database& db, bool immediate = true);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace pareto::sqlite
