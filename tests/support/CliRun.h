// pareto-cli run to completion through the shell (arguments as one string, as a user types them): exit code,
// stdout and stderr. Tests that use it define PARETO_CLI_PATH; for signals, limits or a terminal, ChildProcess.h.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "SharedData.h"

namespace pareto::test {

struct RunResult {
  int exitCode = -1;
  std::string out, err;
};

inline RunResult runCli(const std::string& args) {
  const std::string errFile = scratchDir("cli-stderr") + "/err.txt";
  const std::string cmd = std::string(PARETO_CLI_PATH) + " " + args + " 2>" + errFile;
  RunResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(errFile);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

}  // namespace pareto::test
