#include <CLI/CLI.hpp>
#include <memory>

#include "CliSupport.h"
#include "Commands.h"
#include "model/ModelSummary.h"

namespace pareto::cli {

void addInspectCommand(CLI::App& app) {
  struct Args {
    std::string model;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a model folder's architecture, parameter count and tensors "
                                                "(reads headers only; no weights are loaded)");
  cmd->add_option("--model", args->model, "Hugging Face model folder (config.json + safetensors)")->required();
  cmd->add_flag("--json", args->json, "Print one JSON object instead of text");
  cmd->callback([args] {
    ModelSummary s = summarizeModel(args->model);
    printResult(args->json, toJson(s), toText(s));
  });
}

}  // namespace pareto::cli
