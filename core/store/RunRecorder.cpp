#include "store/RunRecorder.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "store/Sqlite.h"

namespace pareto {

// Writes "still alive" into the run's row until stopped. A missed beat costs nothing (readers allow twelve),
// so failures are ignored and the busy timeout is short: stopping never waits long for a lock.
class RunRecorder::Heartbeat {
 public:
  Heartbeat(std::string path, int64_t runId, std::chrono::milliseconds interval)
      : path_(std::move(path)), runId_(runId), interval_(interval), thread_([this] { loop(); }) {}
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void loop() {
    std::unique_ptr<sqlite::Database> db;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, interval_, [this] { return stop_; })) {
      lock.unlock();
      try {
        if (!db) db = std::make_unique<sqlite::Database>(path_, 1000, sqlite::OpenMode::ReadWrite);
        sqlite::Statement s(*db, "UPDATE runs SET heartbeat_at = ?2 WHERE id = ?1 AND status = 'running'");
        s.bind(1, runId_).bind(2, std::chrono::duration<double>(
                                      std::chrono::system_clock::now().time_since_epoch()).count());
        s.run();
      } catch (const std::exception&) {
        db.reset();   // reopened for the next beat
      }
      lock.lock();
    }
  }

  const std::string path_;
  const int64_t runId_;
  const std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;   // last: started once the members it uses exist
};

RunRecorder::RunRecorder(ExperimentStore& store, const RunStart& start) : store_(store), id_(store.beginRun(start)) {
  heartbeat_ = std::make_unique<Heartbeat>(store.path(), id_, store.heartbeatInterval());
}

RunRecorder::~RunRecorder() {
  if (!ended_) end(RunStatus::Failed, "ended without finishing (an error or an early return)");
}

void RunRecorder::finish() {
  if (ended_) return;
  try {
    store_.finishRun(id_, results_);
  } catch (const sqlite::BusyError& e) {
    // The lock that stopped the results stops any other write too: marking the run failed would only wait
    // for it once more.
    ended_ = true;
    results_ = {};
    heartbeat_.reset();
    throw sqlite::BusyError(std::string(e.what()) + "; run " + std::to_string(id_) +
                            " stays \"running\" and reads as interrupted once this process ends");
  } catch (const std::exception& e) {
    end(RunStatus::Failed, std::string("recording the results failed: ") + e.what());
    throw;
  }
  ended_ = true;
  heartbeat_.reset();
}

void RunRecorder::fail(const std::string& message) { end(RunStatus::Failed, message); }

void RunRecorder::cancel() { end(RunStatus::Cancelled, "cancelled"); }

void RunRecorder::end(RunStatus status, const std::string& message) noexcept {
  if (ended_) return;
  ended_ = true;
  results_ = {};
  try {
    store_.endRun(id_, status, message);
  } catch (...) {
    // Called from destructors and error paths, where a second exception would terminate the process. The run
    // stays "running" and reads as interrupted once this process is gone.
  }
  heartbeat_.reset();
}

}  // namespace pareto
