// Allocation failures turned into one error that names the stage and the memory asked for. LibTorch reports a
// CUDA tensor that does not fit as c10::OutOfMemoryError ("CUDA out of memory. Tried to allocate 2.00 GiB ...")
// and, on 1.13, a CPU one as a plain c10::Error ("DefaultCPUAllocator: can't allocate memory: you tried to
// allocate N bytes"); neither says what Pareto was doing. Wrapping each stage (loading, calibration,
// compression, generation) gives "calibration: out of memory asking for 2.00 GiB; ..." instead, and the process
// stays usable: the failed stage's tensors are released as the exception unwinds, so the GUI or a later command
// can go on (with a smaller batch, say).
#pragma once

#include <string>
#include <utility>

#include "util/Error.h"

namespace pareto {

class OutOfMemory : public Error {
 public:
  OutOfMemory(std::string stage, std::string requested, const std::string& message)
      : Error(message), stage_(std::move(stage)), requested_(std::move(requested)) {}
  const std::string& stage() const { return stage_; }          // e.g. "calibration" or "calibration / generation"
  const std::string& requested() const { return requested_; }  // e.g. "2.00 GiB"; "" when the library did not say

 private:
  std::string stage_;
  std::string requested_;
};

// Must be called inside a catch handler: throws OutOfMemory naming `stage` (and `hint`, what the user can change)
// when the exception being handled is an allocation failure, prefixes the stage of an OutOfMemory from an inner
// stage, and rethrows anything else unchanged.
[[noreturn]] void rethrowAsOutOfMemory(const std::string& stage, const std::string& hint);

// Refuses, before anything is allocated, work whose buffers (`bytes`, an estimate) are larger than this
// machine's physical memory: such a request can only end in an allocation failure after minutes of swapping.
// Throws OutOfMemory naming the stage, the size and `hint`.
void requireHostMemory(const std::string& stage, double bytes, const std::string& hint);

// Runs f() as `stage`: allocation failures inside become OutOfMemory (see above).
template <class F>
decltype(auto) guardMemory(const std::string& stage, const std::string& hint, F&& f) {
  try {
    return f();
  } catch (...) {
    rethrowAsOutOfMemory(stage, hint);
  }
}

}  // namespace pareto
