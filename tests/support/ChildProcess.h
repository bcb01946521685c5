// pareto-cli as a child process, for tests of what a user sees from outside: exit codes, signals, limits set
// between fork and exec, a pseudo-terminal. Tests that use it define PARETO_CLI_PATH.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace pareto::test {

struct Child {
  pid_t pid = -1;
  int output = -1;   // stderr of the child (a pipe, or the master side of a pseudo-terminal)
};

// Starts pareto-cli with `args`; stdout goes to `stdoutPath`. `inChild` runs between fork and exec (limits,
// signal dispositions, a terminal); it must only make async-signal-safe calls.
inline Child spawnCli(const std::vector<std::string>& args, int stderrFd, const std::function<void()>& inChild,
                      const char* stdoutPath = "/dev/null") {
  std::vector<std::string> argv = {PARETO_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  Child c;
  c.pid = ::fork();
  if (c.pid == 0) {
    inChild();
    ::dup2(stderrFd, STDERR_FILENO);
    const int out = ::open(stdoutPath, O_WRONLY);
    ::dup2(out, STDOUT_FILENO);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  return c;
}

// Reads fd until it closes or `stopAt` appears (when given) or the deadline passes; returns what was read.
inline std::string readUntil(int fd, const std::string& stopAt, double seconds) {
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;   // closed (EIO on a pseudo-terminal whose other side is gone)
    text.append(buf, static_cast<size_t>(n));
    if (!stopAt.empty() && text.find(stopAt) != std::string::npos) break;
  }
  return text;
}

// Waits for the child (killing it after `seconds`); its exit status, or 1000 + the signal that ended it (not the
// shell's 128 + signal, which would make death by SIGINT look like a clean exit 130).
inline int waitExit(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    ::usleep(50 * 1000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

}  // namespace pareto::test
