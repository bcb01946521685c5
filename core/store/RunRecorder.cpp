#include "store/RunRecorder.h"

namespace pareto {

RunRecorder::RunRecorder(ExperimentStore& store, const RunStart& start) : store_(store), id_(store.beginRun(start)) {}

RunRecorder::~RunRecorder() {
  if (!ended_) end(RunStatus::Failed, "ended without finishing (an error or an early return)");
}

void RunRecorder::finish() {
  if (ended_) return;
  try {
    store_.finishRun(id_, results_);
  } catch (const std::exception& e) {
    end(RunStatus::Failed, std::string("recording the results failed: ") + e.what());
    throw;
  }
  ended_ = true;
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
}

}  // namespace pareto
