#include "store/Sqlite.h"

#include <sqlite3.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "util/Error.h"

namespace pareto::sqlite {
namespace {

// Problems with the user's file (not a database, damaged, not writable) are input errors; everything else
// (a lock held too long, a full disk, a bug in our SQL) is an engine error.
bool isUserFileProblem(int rc) {
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return true;
    default:
      return false;
  }
}

std::string shortSql(const std::string& sql) {
  std::string s = sql.substr(0, 80);
  for (char& c : s)
    if (c == '\n') c = ' ';
  return sql.size() > 80 ? s + "..." : s;
}

// Every SQLite database starts with these 16 bytes; an empty file is a new database.
bool hasSqliteHeaderOrIsEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return true;   // missing or unreadable: SQLite reports that itself
  char header[16] = {};
  in.read(header, sizeof header);
  const std::streamsize n = in.gcount();
  return n == 0 || (n == 16 && std::memcmp(header, "SQLite format 3", 16) == 0);
}

// file: URI for a path (RFC 3986 escapes, so '?', '#' and '%' in a folder name stay part of the path).
std::string fileUri(const std::string& path, const char* query) {
  static const char hex[] = "0123456789ABCDEF";
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (std::isalnum(c) != 0 || std::strchr("/-._~", c) != nullptr) {
      uri += static_cast<char>(c);
    } else {
      uri += '%';
      uri += hex[c >> 4];
      uri += hex[c & 15];
    }
  }
  return uri + "?" + query;
}

}  // namespace

Database::Database(const std::string& path, int busyTimeoutMs, OpenMode mode) : path_(path), mode_(mode) {
  if (mode != OpenMode::Memory && !hasSqliteHeaderOrIsEmpty(path))
    throw InputError(fileMessage(path, "not an SQLite database (it does not start with SQLite's file header)"));
  int flags = SQLITE_OPEN_NOMUTEX;
  std::string name = path;
  switch (mode) {
    case OpenMode::ReadWriteCreate: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE; break;
    case OpenMode::ReadWrite: flags |= SQLITE_OPEN_READWRITE; break;
    case OpenMode::ReadOnly: flags |= SQLITE_OPEN_READONLY; break;
    case OpenMode::Immutable:
      flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
      name = fileUri(path, "immutable=1");
      break;
    case OpenMode::Memory:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY;
      name = ":memory:";
      break;
  }
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw InputError(fileMessage(path, "cannot open the experiment database: " + msg));
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busyTimeoutMs);
}

void Database::setBusyTimeout(int ms) { sqlite3_busy_timeout(db_, ms); }

Database::~Database() {
  // Statements are finalized by their owners first; close_v2 defers the close if one is still alive.
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

void Database::fail(int rc, const std::string& what) const {
  std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  if ((rc & 0xff) == SQLITE_NOTADB) throw InputError(fileMessage(path_, "not an SQLite database (" + what + ": " + msg + ")"));
  if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
    throw BusyError(fileMessage(path_, what + ": " + msg + " (another process held the database longer than the busy timeout)"));
  const std::string text = fileMessage(path_, what + ": " + msg);
  if (isUserFileProblem(rc)) throw InputError(text);
  throw Error(text);
}

void Database::exec(const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    sqlite3_free(err);
    fail(rc, shortSql(sql));
  }
}

int64_t Database::lastInsertId() const { return sqlite3_last_insert_rowid(db_); }
int Database::changes() const { return sqlite3_changes(db_); }

Statement::Statement(const Database& db, const std::string& sql) : db_(db), sql_(sql) {
  const int rc = sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &stmt_, nullptr);
  if (rc != SQLITE_OK) db_.fail(rc, "preparing " + shortSql(sql));
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) db_.fail(rc, "binding " + shortSql(sql_));
  return *this;
}

Statement& Statement::bind(int index, double value) {
  const int rc = std::isnan(value) ? sqlite3_bind_null(stmt_, index) : sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) db_.fail(rc, "binding " + shortSql(sql_));
  return *this;
}

Statement& Statement::bind(int index, const std::string& value) {
  const int rc = sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_.fail(rc, "binding " + shortSql(sql_));
  return *this;
}

Statement& Statement::bindNull(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) db_.fail(rc, "binding " + shortSql(sql_));
  return *this;
}

Statement& Statement::bind(int index, const std::optional<int64_t>& value) {
  return value ? bind(index, *value) : bindNull(index);
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail(rc, shortSql(sql_));
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::isNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
int64_t Statement::getInt(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::getDouble(int column) const {
  if (isNull(column)) return std::numeric_limits<double>::quiet_NaN();
  return sqlite3_column_double(stmt_, column);
}

std::string Statement::getText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

Transaction::Transaction(Database& db, bool immediate) : db_(db) { db_.exec(immediate ? "BEGIN IMMEDIATE" : "BEGIN"); }

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace pareto::sqlite
