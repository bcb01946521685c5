// Which process wrote a run, so that a reader can tell a run that is still going from one whose process died
// (killed, crashed, machine rebooted) and left it "running" forever.
#pragma once

#include <cstdint>
#include <string>

namespace pareto {

struct ProcessIdentity {
  int64_t pid = 0;
  std::string host;
  // "<boot id>:<start time in clock ticks>" from /proc: a pid alone is reused, and after a reboot every pid is.
  // Empty where /proc is not available.
  std::string startToken;
};

ProcessIdentity currentProcess();

enum class Liveness { Alive, Dead, Unknown };

// Alive / Dead for a process of this host; Unknown for another host (or a run recorded without a pid).
Liveness processLiveness(const ProcessIdentity& recorded);

}  // namespace pareto
