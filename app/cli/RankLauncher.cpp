#include "RankLauncher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "util/Error.h"

namespace pareto::cli {
namespace {

volatile sig_atomic_t gForward = 0;

// A signal sent to the launcher alone (kill, a scheduler) is forwarded; one from the terminal (si_code
// SI_KERNEL) already reached every rank in the foreground process group.
void onSignal(int sig, siginfo_t* info, void*) {
  if (info == nullptr || info->si_code == SI_USER || info->si_code == SI_QUEUE) gForward = sig;
}

std::vector<std::string> ownArguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == '\0') {
      args.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  if (args.empty()) throw Error("cannot read this process's arguments from /proc/self/cmdline");
  return args;
}

// The arguments without `option N` / `option=N`.
std::vector<std::string> withoutOption(const std::vector<std::string>& args, const std::string& option) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == option) {
      ++i;
      continue;
    }
    if (args[i].rfind(option + "=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

int freeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("cannot open a socket for the rendezvous: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw Error("cannot find a free port on 127.0.0.1 for the rendezvous: " + why);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string statusText(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "killed by signal " + std::to_string(sig) + (name != nullptr ? std::string(" (") + name + ")" : "");
  }
  return "status " + std::to_string(status);
}

}  // namespace

void runRanks(int processes, const std::string& option) {
  const std::vector<std::string> base = withoutOption(ownArguments(), option);
  const std::string master = "127.0.0.1:" + std::to_string(freeLoopbackPort());

  struct sigaction sa {};
  sa.sa_sigaction = onSignal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);

  std::vector<pid_t> pids(static_cast<size_t>(processes), -1);
  for (int r = 0; r < processes; ++r) {
    std::vector<std::string> args = base;
    for (const std::string& a : {std::string("--rank"), std::to_string(r), std::string("--world-size"),
                                 std::to_string(processes), std::string("--master"), master})
      args.push_back(a);
    if (r > 0) {
      args.push_back("--quiet");
      args.push_back("--no-record");
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string localRank = std::to_string(r);
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGKILL);
      throw Error(std::string("cannot start rank ") + std::to_string(r) + ": " + std::strerror(errno));
    }
    if (pid == 0) {
      ::setenv("LOCAL_RANK", localRank.c_str(), 1);
      for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
      ::execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "pareto-cli: cannot start rank %d: %s\n", r, std::strerror(errno));
      ::_exit(127);
    }
    pids[static_cast<size_t>(r)] = pid;
  }

  // Waits for every rank; the first that fails stops the others and decides the outcome.
  int failedRank = -1, failedStatus = 0;
  bool cancelling = false;   // a signal was passed on: the ranks stop together at their next check
  auto cancelledStatus = [](int status) {
    return WIFEXITED(status) && (WEXITSTATUS(status) == 128 + SIGINT || WEXITSTATUS(status) == 128 + SIGTERM ||
                                 WEXITSTATUS(status) == 128 + SIGHUP);
  };
  std::chrono::steady_clock::time_point stopAt = std::chrono::steady_clock::time_point::max();
  size_t running = pids.size();
  while (running > 0) {
    if (gForward != 0) {
      const int sig = gForward;
      gForward = 0;
      cancelling = true;
      for (pid_t p : pids)
        if (p > 0) ::kill(p, sig);
    }
    if (std::chrono::steady_clock::now() > stopAt)
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGKILL);
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    int rank = -1;
    for (size_t r = 0; r < pids.size(); ++r)
      if (pids[r] == pid) {
        rank = static_cast<int>(r);
        pids[r] = -1;
      }
    if (rank < 0) continue;
    --running;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) continue;
    // A rank that crashed (a signal neither the launcher nor a user sent) is the cause, even when a rank it left
    // waiting was reaped first.
    const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    const bool crashed = sig != 0 && sig != SIGINT && sig != SIGTERM && sig != SIGHUP &&
                         std::chrono::steady_clock::now() < stopAt;
    if (failedRank >= 0) {
      if (crashed && !WIFSIGNALED(failedStatus)) {
        failedRank = rank;
        failedStatus = status;
      }
      continue;
    }
    failedRank = rank;
    failedStatus = status;
    // A cancelled rank: the others agreed on the cancel at the same check and are stopping. A failed one: the
    // others fail on their own at their next collective, and SIGTERM stops them at their next check too. Either
    // way they get time to remove what they staged before SIGKILL.
    if (!cancelling && !cancelledStatus(status))
      for (pid_t p : pids)
        if (p > 0) ::kill(p, SIGTERM);
    stopAt = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  }
  if (failedRank < 0) return;
  // The ranks said "cancelled" themselves; the launcher ends with their status (130 Ctrl-C, 143 SIGTERM, ...).
  if (cancelledStatus(failedStatus) || (cancelling && WIFSIGNALED(failedStatus))) {
    std::fflush(stdout);
    std::exit(WIFEXITED(failedStatus) ? WEXITSTATUS(failedStatus) : 128 + WTERMSIG(failedStatus));
  }
  const std::string what = "rank " + std::to_string(failedRank) + " of " + std::to_string(processes) + " stopped (" +
                           statusText(failedStatus) + "), so the job was stopped on every rank";
  if (WIFEXITED(failedStatus) && WEXITSTATUS(failedStatus) == 2) throw InputError(what);
  throw Error(what);
}

}  // namespace pareto::cli
