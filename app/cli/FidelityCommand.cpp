#include <CLI/CLI.hpp>
#include <cmath>
#include <iomanip>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "calib/CalibrationSet.h"
#include "eval/DecodeFidelity.h"
#include "model/LoadedModel.h"

namespace pareto::cli {
namespace {

struct FidelityArgs {
  std::string dense, model, prompts;
  std::string device = "cpu", dtype = "float32";
  int64_t maxPrompts = 32;
  DecodeFidelityOptions fidelity;
  bool json = false;
};

nlohmann::json fidelityJson(const FidelityResult& r, const FidelityArgs& a, const LoadedModel& m) {
  return {{"decode_nll", r.decodeNll},
          {"dense_nll", r.denseNll},
          {"top1_agreement", r.top1Agreement},
          {"shared_prefix", r.sharedPrefixMean},
          {"shared_prefix_median", r.sharedPrefixMedian},
          {"shared_prefix_min", r.sharedPrefixMin},
          {"shared_prefix_max", r.sharedPrefixMax},
          {"full_match_fraction", r.fullMatchFraction},
          {"prompts", r.prompts},
          {"continuation_tokens", r.continuationTokens},
          {"settings",
           {{"dense", a.dense},
            {"model", a.model},
            {"prompts", a.prompts},
            {"max_new_tokens", a.fidelity.maxNewTokens},
            {"max_prompts", a.maxPrompts},
            {"batch", a.fidelity.batch},
            {"device", deviceDescription(m.model->options().device)},
            {"dtype", dtypeLabel(m.model->options().dtype)}}},
          {"seconds", r.seconds}};
}

std::string fidelityText(const FidelityResult& r, const FidelityArgs& a) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(4);
  o << "decode fidelity of " << a.model << " against " << a.dense << "\n";
  o << std::left << std::setw(26) << "" << std::right << std::setw(12) << "compressed" << std::setw(12) << "dense"
    << "\n";
  o << std::left << std::setw(26) << "decode NLL (nats/token)" << std::right << std::setw(12) << r.decodeNll
    << std::setw(12) << r.denseNll << "\n";
  o << std::left << std::setw(26) << "decode perplexity" << std::right << std::setw(12) << std::exp(r.decodeNll)
    << std::setw(12) << std::exp(r.denseNll) << "\n";
  o << std::left << std::setw(26) << "top-1 agreement" << std::right << std::setw(11) << std::setprecision(2)
    << 100 * r.top1Agreement << "%\n";
  o << std::left << std::setw(26) << "shared prefix (tokens)" << std::right << std::setprecision(1) << "mean "
    << r.sharedPrefixMean << ", median " << r.sharedPrefixMedian << ", min " << r.sharedPrefixMin << ", max "
    << r.sharedPrefixMax << "\n";
  o << std::setprecision(0) << 100 * r.fullMatchFraction << "% of " << r.prompts
    << " prompts reproduce the dense continuation in full; " << r.continuationTokens
    << " dense continuation tokens scored (at most " << a.fidelity.maxNewTokens << " per prompt); "
    << std::setprecision(1) << r.seconds << " s";
  return o.str();
}

}  // namespace

void addFidelityCommand(CLI::App& app) {
  auto args = std::make_shared<FidelityArgs>();
  CLI::App* cmd = app.add_subcommand(
      "fidelity", "Decode fidelity of a compressed model against its dense reference (decode NLL, top-1 "
                  "agreement, shared greedy prefix)");
  cmd->footer(
      "The dense model continues each prompt (BOS + prompt) greedily for up to --max-new-tokens tokens, stopping "
      "at EOS (which is kept and scored). On those tokens, teacher-forced:\n"
      "  decode_nll       the compressed model's mean NLL per continuation token, over all tokens of all prompts\n"
      "  dense_nll        the same for the dense model on its own tokens (the floor)\n"
      "  top1_agreement   fraction of continuation positions where the compressed model's argmax is the dense "
      "token\n"
      "  shared_prefix    leading tokens the compressed model's own greedy continuation shares with the dense one "
      "(mean over prompts; also median, min, max and full_match_fraction: prompts reproduced in full)");
  cmd->add_option("--dense", args->dense, "The dense reference model folder")->required();
  cmd->add_option("--model", args->model, "The compressed model folder (same architecture and tokenizer)")
      ->required();
  cmd->add_option("--prompts", args->prompts,
                  "Prompts file, one prompt per line; use prompts the model was not calibrated on")
      ->required();
  cmd->add_option("--max-new-tokens", args->fidelity.maxNewTokens, "Tokens the dense model generates per prompt")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--max-prompts", args->maxPrompts, "Use the first N prompts of the file (0: all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch", args->fidelity.batch, "Prompts generated and scored together (0: pick for the device)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", args->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Compute dtype of both models: float32, bfloat16 or float16 (CUDA)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json,
                "Print one JSON object (decode_nll, dense_nll, top1_agreement, shared_prefix, ...)");
  cmd->callback([args] {
    std::vector<std::string> prompts = readPrompts(args->prompts);
    if (args->maxPrompts > 0 && static_cast<int64_t>(prompts.size()) > args->maxPrompts)
      prompts.resize(static_cast<size_t>(args->maxPrompts));
    const RuntimeOptions runtime = makeRuntimeOptions(args->device, args->dtype);
    LoadedModel dense = loadModel(args->dense, runtime);
    LoadedModel compressed = loadModel(args->model, runtime);
    args->fidelity.eosTokenIds = dense.eosTokenIds;
    FidelityResult r = decodeFidelity(*dense.model, *compressed.model, comparablePromptIds(dense, compressed, prompts),
                                      args->fidelity, terminalProgress(), &interruptToken());
    printResult(args->json, fidelityJson(r, *args, dense), fidelityText(r, *args));
  });
}

}  // namespace pareto::cli
