#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "ModelOptions.h"
#include "eval/Score.h"
#include "model/LoadedModel.h"

namespace pareto::cli {

void addScoreCommand(CLI::App& app) {
  struct Args {
    ModelOptions model;
    std::string prompt;
    bool noBos = false;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "score", "Teacher-forced score of BOS + prompt: summed next-token NLL and the top 10 next tokens");
  args->model.add(cmd);
  cmd->add_option("--prompt", args->prompt, "Text to score")->required();
  cmd->add_flag("--no-bos", args->noBos, "Do not put the model's BOS token first");
  cmd->add_flag("--json", args->json, "Print one JSON object (ids, nll_sum, last_top10)");
  cmd->callback([args] {
    LoadedModel m = loadModel(args->model.model, makeRuntimeOptions(args->model.device, args->model.dtype));
    std::vector<TokenId> ids = m.promptIds(args->prompt, !args->noBos);
    ScoreResult r = scoreSequence(*m.model, ids);
    nlohmann::json top = nlohmann::json::array();
    std::ostringstream text;
    text << "ids      ";
    for (TokenId id : ids) text << " " << id;
    text << "\nnll_sum   " << r.nllSum << " over " << (ids.size() - 1) << " predictions\nnext tokens:";
    for (TokenId id : r.lastTop10) {
      top.push_back(id);
      text << "\n  " << id << "  " << m.tokenizer->decode({id}) << "  (logit "
           << r.lastLogits[id].item<float>() << ")";
    }
    printResult(args->json, {{"ids", ids}, {"nll_sum", r.nllSum}, {"last_top10", top}}, text.str());
  });
}

}  // namespace pareto::cli
