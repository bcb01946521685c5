#include "compress/SolveTimings.h"

#include "model/Device.h"

namespace pareto {
namespace {

thread_local SolveTimings* current = nullptr;

}  // namespace

SolveTimings::Scope::Scope(SolveTimings* timings) : previous_(current) { current = timings; }
SolveTimings::Scope::~Scope() { current = previous_; }

SolveTimings::Step::Step(const char* name, const at::Tensor& onDevice, Until until)
    : timings_(current), name_(name), device_(onDevice.defined() ? onDevice.device() : c10::Device(c10::kCPU)),
      until_(until), start_(std::chrono::steady_clock::now()) {}

SolveTimings::Step::~Step() {
  if (timings_ == nullptr) return;
  try {
    if (until_ == Until::DeviceDone) synchronizeCurrentStream(device_);
    timings_->add(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  } catch (...) {
    // A device error is the solver's to report (it resurfaces at its next call); a step ending in it, during an
    // exception's unwinding too, records nothing.
  }
}

void SolveTimings::add(const std::string& step, double seconds) {
  const std::lock_guard<std::mutex> lock(mutex_);
  seconds_[step] += seconds;
}

std::map<std::string, double> SolveTimings::totals() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return seconds_;
}

}  // namespace pareto
