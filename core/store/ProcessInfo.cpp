#include "store/ProcessInfo.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <fstream>
#include <sstream>

namespace pareto {
namespace {

std::string hostName() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf) != 0) return {};
  buf[HOST_NAME_MAX] = '\0';
  return buf;
}

std::string bootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// Fields 3 (state) and 22 (start time in clock ticks since boot) of /proc/PID/stat. The command name (field 2)
// may contain spaces and parentheses, so fields are counted from the last ')'. A zombie (killed, not yet
// reaped by its parent) counts as gone: it will never finish the run.
std::string startTicks(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return {};
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return {};
    if (i == 3 && (field == "Z" || field == "X")) return "gone";
  }
  return field;
}

std::string startToken(int64_t pid) {
  const std::string boot = bootId(), ticks = startTicks(pid);
  if (boot.empty() || ticks.empty()) return {};
  return boot + ":" + ticks;
}

std::string pidNamespace() {
  char buf[256];
  const ssize_t n = ::readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<size_t>(n));
}

// Decides by the pid, for a record whose pid means the same process here as where it was written.
Liveness byPid(const ProcessIdentity& recorded) {
  if (!recorded.startToken.empty()) {
    // The same pid after a reboot, or reused by a process that started at another time: the recorder is gone.
    // No /proc entry at all: fall through to kill(), which tells a vanished process from an unreadable /proc.
    const std::string now = startToken(recorded.pid);
    if (!now.empty()) return now == recorded.startToken ? Liveness::Alive : Liveness::Dead;
  }
  if (::kill(static_cast<pid_t>(recorded.pid), 0) == 0) return Liveness::Alive;
  return errno == ESRCH ? Liveness::Dead : Liveness::Alive;   // EPERM: it exists, owned by someone else
}

}  // namespace

ProcessIdentity currentProcess() {
  ProcessIdentity p;
  p.pid = static_cast<int64_t>(::getpid());
  p.host = hostName();
  p.startToken = startToken(p.pid);
  p.bootId = bootId();
  p.pidNamespace = pidNamespace();
  return p;
}

Liveness processLiveness(const ProcessIdentity& recorded) {
  if (recorded.pid <= 0) return Liveness::Unknown;
  if (!recorded.bootId.empty() || !recorded.pidNamespace.empty()) {
    // The host name says nothing here: containers often share their host's, and a container with the host's
    // PID namespace may have its own. Either both match (the pid is ours to check) or we cannot know.
    const std::string boot = bootId(), ns = pidNamespace();
    if (boot.empty() || ns.empty() || recorded.bootId != boot || recorded.pidNamespace != ns) return Liveness::Unknown;
    return byPid(recorded);
  }
  if (recorded.host.empty() || recorded.host != hostName()) return Liveness::Unknown;
  return byPid(recorded);
}

}  // namespace pareto
