// Where a module solve's time goes, summed over the modules of a compress (its `pass_stages_s` "solve: ..."
// entries): the OBS solvers' shared steps (the inputs' copies and checks, the damped inverse, the column sweep)
// record their seconds into the timings the calling thread has set with a Scope. A step ends with a
// synchronisation of the current stream of its tensor's device, so device work counts in the step that queued it;
// a host step (the sweep's parts, a lazy block at a time) does not synchronise: it counts the time the thread
// spent queueing that part's work, or blocked in it, so that synchronising 32-112 times a module does not change
// what is measured. Without a Scope a step records nothing and synchronises nothing.
//
// Why: an 8B's GPTQ solve took ~1.5 s a 4096-column module whatever its rows, and 2.1x that at 14336 columns,
// where its arithmetic (a 4096² Cholesky, one triangular solve, 32 lazy blocks) is milliseconds; seven modules
// at once on their own threads and streams overlapped ~3.8 of them. These figures say which step holds the time.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>

namespace pareto {

class SolveTimings {
 public:
  // Sets the timings the steps of this thread record into, for the scope's lifetime (nested scopes restore the
  // outer one).
  class Scope {
   public:
    explicit Scope(SolveTimings* timings);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    SolveTimings* previous_;
  };
  // One step, from construction to destruction, on `onDevice`'s device.
  enum class Until { DeviceDone, HostDone };
  class Step {
   public:
    Step(const char* name, const at::Tensor& onDevice, Until until = Until::DeviceDone);
    ~Step();
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;

   private:
    SolveTimings* timings_;
    const char* name_;
    c10::Device device_;
    Until until_;
    std::chrono::steady_clock::time_point start_;
  };

  void add(const std::string& step, double seconds);
  std::map<std::string, double> totals() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, double> seconds_;
};

}  // namespace pareto
