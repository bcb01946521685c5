// Error types shared by the engine. Every message names the file, tensor or module it is about, because a
// user staring at "invalid shape" has nothing to act on.
#pragma once

#include <stdexcept>
#include <string>

namespace pareto {

// Something the engine could not do (a bug, an unsupported device, a failed allocation).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Something wrong with what the user gave us: a missing or corrupt file, a bad config, a bad option.
// pareto-cli maps it to exit code 2.
class InputError : public Error {
 public:
  using Error::Error;
};

// Thrown by long jobs when their CancelToken fires; nothing partial is left behind.
class Cancelled : public Error {
 public:
  Cancelled() : Error("cancelled") {}
};

// "<file>: <what>" — the common shape of file-related messages.
std::string fileMessage(const std::string& file, const std::string& what);

}  // namespace pareto
