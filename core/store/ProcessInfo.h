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
  // /proc/sys/kernel/random/boot_id: one kernel, one boot (containers share their host's).
  std::string bootId;
  // readlink /proc/self/ns/pid ("pid:[4026531836]"): a pid names a process only inside its PID namespace. The
  // number is an inode, unique among the namespaces of one boot only (the host's is the same on every boot).
  std::string pidNamespace;
};

ProcessIdentity currentProcess();

enum class Liveness { Alive, Dead, Unknown };

// Alive / Dead only where the pid means the same process to us as to the recorder: the same boot and the same
// PID namespace (a record without these, from an older Pareto: the same host name). Unknown otherwise (another
// machine, a container with its own PID namespace, a record without a pid): the caller then needs another
// sign of life, the run's heartbeat.
Liveness processLiveness(const ProcessIdentity& recorded);

}  // namespace pareto
