#include "CliSupport.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "util/Error.h"

namespace pareto::cli {

void printResult(bool json, const nlohmann::json& result, const std::string& text) {
  if (json)
    std::cout << result.dump() << std::endl;
  else
    std::cout << text << std::endl;
}

ProgressCallback terminalProgress() {
  if (::isatty(STDERR_FILENO) == 0) return {};
  return [](const ProgressUpdate& u) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(u.fraction * kWidth + 0.5);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, ' ');
    std::fprintf(stderr, "\r%s [%s] %3d%% %s\033[K", u.stage.c_str(), bar.c_str(), static_cast<int>(u.fraction * 100),
                 u.message.c_str());
    if (u.fraction >= 1.0) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

namespace {
CancelToken gInterrupt;

extern "C" void onInterrupt(int) {
  if (gInterrupt.isCancelled()) std::_Exit(130);
  gInterrupt.cancel();
}
}  // namespace

const CancelToken& interruptToken() {
  static const bool installed = [] {
    std::signal(SIGINT, onInterrupt);
    return true;
  }();
  (void)installed;
  return gInterrupt;
}

void writeResultFile(const std::string& path, const nlohmann::json& result) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << result.dump(2) << "\n";
  if (!out) throw InputError(fileMessage(path, "could not be written"));
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
