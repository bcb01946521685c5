// Options shared by the commands that compare a compressed model with its dense reference on prompts
// (fidelity, analyze drift): the two folders, the prompts, the device and dtype, and the memory budgets.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "MemoryOptions.h"
#include "jobs/AnalyzeJob.h"

namespace pareto::cli {

struct ComparisonOptions {
  std::string dense, model, prompts;
  std::string device = "cpu", dtype = kDefaultComputeDtype;
  int64_t maxPrompts = 32;
  MemoryOptions memory;

  void add(CLI::App* cmd);

  // Reads the prompts (the first maxPrompts), loads both models on the device; throws InputError, also when the
  // generation of `what` (`batch` prompts at a time, `maxNewTokens` each) does not fit the memory budgets.
  Comparison load(int64_t batch, int64_t maxNewTokens, const std::string& what) const;
  nlohmann::json settings(const LoadedModel& dense) const;
};

}  // namespace pareto::cli
