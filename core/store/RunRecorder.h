// One run in the experiment store, from begin to end, RAII style: constructing it records the run as running;
// results collect in memory and finish() writes them together with the status "finished" in one transaction,
// so a run is either complete or has no results. A recorder destroyed without finish() (an exception, an early
// return) marks its run failed; cancel() marks it cancelled. A process killed outright leaves the run
// "running", which readers show as interrupted once the process is gone (ExperimentStore::listRuns). While the
// run goes on, a thread of the recorder refreshes its heartbeat every store.heartbeatInterval() on a
// connection of its own, for readers that cannot check the pid (another machine or PID namespace).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "store/ExperimentStore.h"
#include "util/Error.h"

namespace pareto {

class RunRecorder {
 public:
  // Begins the run (status running). Throws what ExperimentStore::beginRun throws.
  RunRecorder(ExperimentStore& store, const RunStart& start);
  // Marks the run failed when it was neither finished nor ended; never throws.
  ~RunRecorder();
  RunRecorder(const RunRecorder&) = delete;
  RunRecorder& operator=(const RunRecorder&) = delete;

  int64_t id() const { return id_; }
  bool ended() const { return ended_; }

  void metric(const std::string& name, double value) { results_.metrics.push_back({name, value}); }
  void moduleStat(const std::string& module, const std::string& name, double value) {
    results_.moduleStats.push_back({module, name, value});
  }
  void curve(Curve c) { results_.curves.push_back(std::move(c)); }
  void benchmark(const BenchmarkRow& row) { results_.benchmarks.push_back(row); }
  // Replaces the recipe/settings recorded at begin when the run is finished (values the job resolved).
  void setRecipe(nlohmann::json recipe) { results_.recipe = std::move(recipe); }
  RunResults& results() { return results_; }

  // Writes the results and status finished. If the write fails the run is marked failed and the error rethrown;
  // a lock that outlasts the store's finalWriteTimeout() is rethrown (sqlite::BusyError) with what became of
  // the run (still "running", so interrupted once this process ends: nothing can be written past the lock).
  void finish();
  void fail(const std::string& message);
  void cancel();

  // Runs body(*this) and finishes the run when it returns; Cancelled marks it cancelled, any other exception
  // failed with its message; the exception is rethrown either way.
  template <class Body>
  void run(Body&& body) {
    try {
      body(*this);
    } catch (const Cancelled&) {
      cancel();
      throw;
    } catch (const std::exception& e) {
      fail(e.what());
      throw;
    }
    finish();
  }

 private:
  void end(RunStatus status, const std::string& message) noexcept;

  class Heartbeat;

  ExperimentStore& store_;
  int64_t id_ = 0;
  std::unique_ptr<Heartbeat> heartbeat_;
  bool ended_ = false;
  RunResults results_;
};

}  // namespace pareto
