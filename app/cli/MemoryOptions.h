// --max-gpu-memory / --max-host-memory, shared by the commands that take memory budgets (model/MemoryBudget.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "model/MemoryBudget.h"

namespace pareto::cli {

struct MemoryOptions {
  std::string gpu, host;

  void add(CLI::App* cmd) {
    cmd->add_option("--max-gpu-memory", gpu,
                    "GPU memory the run may use, e.g. 8GiB or 24GB (default: the whole device). The model is "
                    "streamed block by block; a budget below what one block needs is refused with that size");
    cmd->add_option("--max-host-memory", host,
                    "Host memory the run may use beyond the process's own at the start, e.g. 24GiB (default: no "
                    "limit). What does not fit goes to a scratch file");
  }
  // For the commands that generate (fidelity, analyze): generation runs every layer for every token, so the model
  // is held whole and a budget it does not fit is refused before any weight is read.
  void addForGeneration(CLI::App* cmd) {
    cmd->add_option("--max-gpu-memory", gpu,
                    "GPU memory the run may use, e.g. 24GiB (default: the whole device). Generation holds the "
                    "models whole (it cannot stream block by block): a budget below what that needs is refused "
                    "before the weights are read, with the size");
    cmd->add_option("--max-host-memory", host,
                    "Host memory the run may use beyond the process's own at the start; on the CPU the models live "
                    "there, with the same check");
  }
  MemoryBudget budget() const { return MemoryBudget::parse(gpu, host); }
};

}  // namespace pareto::cli
