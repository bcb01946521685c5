#include "CliSupport.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "util/Error.h"
#include "util/FileSystem.h"

namespace pareto::cli {

void printErrorLine(const std::string& line) {
  std::fflush(stderr);   // what stdio still holds goes first, in order
  const std::string whole = line + "\n";
  size_t done = 0;
  while (done < whole.size()) {
    const ssize_t n = ::write(STDERR_FILENO, whole.data() + done, whole.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;   // stderr closed or full: nothing left to tell
    done += static_cast<size_t>(n);
  }
}

std::string terminalSafe(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    // C1 controls (U+0080..U+009F) are 0xC2 0x80..0x9F in UTF-8; some terminals act on them like ESC [.
    const bool c1 = c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F || c1) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c1 ? static_cast<unsigned char>(text[++i]) : c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void printResult(bool json, const nlohmann::json& result, const std::string& text) {
  // JSON escapes every control character itself.
  if (json)
    std::cout << result.dump() << "\n";
  else
    std::cout << terminalSafe(text) << "\n";
  checkStdout();
}

void checkStdout() {
  errno = 0;
  std::cout.flush();
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (failed) {
    const int err = errno != 0 ? errno : EIO;
    std::cout.clear();
    throw Error(std::string("standard output: write failed (") + std::strerror(err) + "); the result was not printed");
  }
}

namespace {

bool gQuiet = false;

// Plain progress for logs and batch jobs: a line per update, at most one every 2 s (and each stage's first and
// last), so a four-hour compression shows it is alive without flooding the log.
ProgressCallback progressLines() {
  struct State {
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last;
    std::string stage;
    bool printed = false;
  };
  auto state = std::make_shared<State>();
  return [state](const ProgressUpdate& u) {
    const auto now = std::chrono::steady_clock::now();
    const bool newStage = u.stage != state->stage;
    if (!newStage && u.fraction < 1.0 && state->printed && now - state->last < std::chrono::seconds(2)) return;
    state->stage = u.stage;
    state->last = now;
    state->printed = true;
    const double elapsed = std::chrono::duration<double>(now - state->start).count();
    std::fprintf(stderr, "pareto-cli: [%7.1fs] %s %3d%% %s\n", elapsed, terminalSafe(u.stage).c_str(),
                 static_cast<int>(u.fraction * 100), terminalSafe(u.message).c_str());
    std::fflush(stderr);
  };
}

}  // namespace

void setQuiet(bool quiet) { gQuiet = quiet; }

ProgressCallback terminalProgress() {
  if (gQuiet) return {};
  if (::isatty(STDERR_FILENO) == 0) return progressLines();
  return [](const ProgressUpdate& u) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(u.fraction * kWidth + 0.5);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, ' ');
    std::fprintf(stderr, "\r%s [%s] %3d%% %s\033[K", terminalSafe(u.stage).c_str(), bar.c_str(),
                 static_cast<int>(u.fraction * 100), terminalSafe(u.message).c_str());
    if (u.fraction >= 1.0) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

namespace {
CancelToken gInterrupt;
volatile std::sig_atomic_t gSignal = 0;

extern "C" void onInterrupt(int sig) {
  if (gInterrupt.isCancelled()) std::_Exit(128 + sig);
  gSignal = sig;
  gInterrupt.cancel();
}
}  // namespace

const CancelToken& interruptToken() {
  static const bool installed = [] {
    // SIGTERM (a scheduler, `kill`, systemd) and SIGHUP (a closed terminal) end a job as Ctrl-C does: at its next
    // check, with its output removed and its run recorded as cancelled.
    struct sigaction sa {};
    sa.sa_handler = onInterrupt;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
    return true;
  }();
  (void)installed;
  return gInterrupt;
}

int cancelledExitCode() { return 128 + (gSignal != 0 ? static_cast<int>(gSignal) : SIGINT); }

const char* cancelSignalName() {
  switch (gSignal) {
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "Ctrl-C";
  }
}

void writeResultFile(const std::string& path, const nlohmann::json& result) {
  if (path.empty()) return;
  writeFileAtomically(path, result.dump(2) + "\n");
}

std::vector<int64_t> parseIntList(const std::string& text, const std::string& option) {
  std::vector<int64_t> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      values.push_back(v);
    } catch (const std::exception&) {
      throw InputError(option + ": \"" + item + "\" is not a whole number (expected e.g. 1,2,4)");
    }
  }
  if (values.empty()) throw InputError(option + ": no values given");
  return values;
}

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) items.push_back(item);
  return items;
}

}  // namespace pareto::cli
