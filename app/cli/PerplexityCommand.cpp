#include <CLI/CLI.hpp>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "MemoryOptions.h"
#include "ModelOptions.h"
#include "RunRecording.h"
#include "eval/EvalMemory.h"
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
    MemoryOptions memory;
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
  args->memory.add(cmd);
  cmd->add_option("--scratch-dir", args->ppl.scratchDir,
                  "Folder for the hidden states' scratch file when a streamed model's do not fit the budgets "
                  "(default: the system's temporary folder)");
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
    const MemoryBudget budget = args->memory.budget();
    // Under a budget the folders are opened streamed (headers only) until the plan says whether they fit whole.
    const WeightResidency opening = budget.limited() ? WeightResidency::Streamed : WeightResidency::Whole;
    LoadedModel m = loadModel(args->model.model, runtime, opening);
    std::unique_ptr<LoadedModel> dense;
    std::vector<TokenId> ids;
    if (args->dense.empty()) {
      ids = encodeTextFile(*m.tokenizer, args->text, /*addSpecialTokens=*/false);
    } else {
      dense = std::make_unique<LoadedModel>(loadModel(args->dense, runtime, opening));
      ids = comparableTextIds(*dense, m, args->text);
    }
    std::optional<EvalMemoryPlan> plan;
    if (budget.limited()) {
      const int64_t W = args->ppl.window;
      int64_t windows = static_cast<int64_t>(ids.size()) / W;
      if (args->ppl.maxWindows > 0) windows = std::min(windows, args->ppl.maxWindows);
      const int64_t batch = args->ppl.batch > 0 ? args->ppl.batch : (runtime.device.is_cuda() ? 16 : 4);
      plan = planEvalMemory(m.config, runtime, budget, dense ? 2 : 1, windows, W, std::min(batch, std::max<int64_t>(windows, 1)));
      args->ppl.activations = plan->placement;
      if (!plan->streamed) {
        m = loadModel(args->model.model, runtime);
        if (dense) *dense = loadModel(args->dense, runtime);
      }
      std::fprintf(stderr, "pareto-cli: memory: %s\n", plan->summary().c_str());
    }
    if (dense) args->ppl.dense = dense->model.get();
    GpuMemoryLimit gpuLimit(runtime.device, budget.gpuBytes);
    PerplexityResult r = computePerplexity(*m.model, ids, args->ppl, terminalProgress(), &interruptToken());
    nlohmann::json j = {{"ppl", r.ppl},         {"windows", r.windows},           {"tokens", r.tokens},
                        {"window", r.window},   {"scored_tokens", r.scoredTokens}, {"mean_nll", r.meanNll},
                        {"device", deviceDescription(m.model->options().device)},
                        {"dtype", dtypeLabel(m.model->options().dtype)}};
    if (plan) j["memory"] = {{"streamed", plan->streamed}, {"plan", plan->summary()}, {"peak_host_bytes", hostPeakResidentBytes()},
                             {"peak_gpu_bytes", gpuPeakBytes(runtime.device)}};
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
