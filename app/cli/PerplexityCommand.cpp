#include <CLI/CLI.hpp>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "ModelOptions.h"
#include "RunRecording.h"
#include "eval/Perplexity.h"
#include "model/LoadedModel.h"
#include "store/MetricNames.h"
#include "util/Json.h"

namespace pareto::cli {

void addPerplexityCommand(CLI::App& app) {
  struct Args {
    ModelOptions model;
    std::string text;
    std::string dense;
    PerplexityOptions ppl;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity",
      "Perplexity of a text file: non-overlapping windows of W tokens, each scored on its own without BOS "
      "(the GPTQ/SparseGPT protocol); ppl = exp(mean NLL over the W-1 predictions per window)");
  args->model.add(cmd);
  cmd->add_option("--text", args->text, "UTF-8 text file to score")->required();
  cmd->add_option("--dense", args->dense,
                  "The dense model the scored one was compressed from (same vocabulary and tokenizer): also report "
                  "the KL divergence KL(P_dense || P_model) over the full vocabulary at every scored position, "
                  "its mean (kl_mean) and 99th percentile (kl_p99), as llama.cpp's --kl-divergence does, and the "
                  "dense model's perplexity on the same windows (dense_ppl)");
  cmd->add_option("--window", args->ppl.window, "Window length W in tokens")->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  cmd->add_option("--max-windows", args->ppl.maxWindows, "Score at most N windows (0: all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch", args->ppl.batch, "Windows per forward pass (0: pick for the device)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", args->json,
                "Print one JSON object (ppl, windows, tokens, window, ...; with --dense also kl_mean, kl_p99, "
                "dense_ppl)");
  cmd->callback(recordedJob("perplexity", [args](JobRecord& run) {
    nlohmann::json settings = {{"text", absolutePath(args->text)}, {"window", args->ppl.window},
                               {"max_windows", args->ppl.maxWindows}, {"batch", args->ppl.batch},
                               {"dtype", args->model.dtype}};
    if (!args->dense.empty()) settings["dense"] = absolutePath(args->dense);
    run.begin(args->model.model, args->model.device, settings);
    const RuntimeOptions runtime = makeRuntimeOptions(args->model.device, args->model.dtype);
    LoadedModel m = loadModel(args->model.model, runtime);
    std::unique_ptr<LoadedModel> dense;
    std::vector<TokenId> ids;
    if (args->dense.empty()) {
      ids = encodeTextFile(*m.tokenizer, args->text, /*addSpecialTokens=*/false);
    } else {
      dense = std::make_unique<LoadedModel>(loadModel(args->dense, runtime));
      ids = comparableTextIds(*dense, m, args->text);
      args->ppl.dense = dense->model.get();
    }
    PerplexityResult r = computePerplexity(*m.model, ids, args->ppl, terminalProgress(), &interruptToken());
    nlohmann::json j = {{"ppl", r.ppl},         {"windows", r.windows},           {"tokens", r.tokens},
                        {"window", r.window},   {"scored_tokens", r.scoredTokens}, {"mean_nll", r.meanNll},
                        {"device", deviceDescription(m.model->options().device)},
                        {"dtype", dtypeLabel(m.model->options().dtype)}};
    std::ostringstream text;
    text.precision(6);
    text << "perplexity " << r.ppl << " over " << r.windows << " windows of " << r.window << " tokens ("
         << r.scoredTokens << " predictions; the text has " << r.tokens << " tokens)";
    if (r.klToDense) {
      j[metric::kKlMean] = r.klToDense->mean;
      j[metric::kKlP99] = r.klToDense->p99;
      j[metric::kDensePerplexity] = *r.densePpl;
      text << "\nKL divergence to the dense model (nats per position): mean " << r.klToDense->mean << ", 99th "
           << "percentile " << r.klToDense->p99 << "; dense perplexity " << *r.densePpl;
    }
    run.finish(j);
    printResult(args->json, j, text.str());
  }));
}

}  // namespace pareto::cli
