#include <CLI/CLI.hpp>
#include <cmath>
#include <iomanip>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "ComparisonOptions.h"
#include "RunRecording.h"
#include "eval/DecodeFidelity.h"
#include "model/LoadedModel.h"
#include "store/MetricNames.h"

namespace pareto::cli {
namespace {

struct FidelityArgs {
  ComparisonOptions compare;
  DecodeFidelityOptions fidelity;
  bool json = false;
};

nlohmann::json fidelityJson(const FidelityResult& r, const FidelityArgs& a, const LoadedModel& m) {
  nlohmann::json settings = a.compare.settings(m);
  settings["max_new_tokens"] = a.fidelity.maxNewTokens;
  settings["batch"] = a.fidelity.batch;
  return {{"decode_nll", r.decodeNll},
          {"dense_nll", r.denseNll},
          {"top1_agreement", r.top1Agreement},
          {metric::kDecodeKlMean, r.klMean},
          {metric::kDecodeKlP99, r.klP99},
          {"shared_prefix", r.sharedPrefixMean},
          {"shared_prefix_median", r.sharedPrefixMedian},
          {"shared_prefix_min", r.sharedPrefixMin},
          {"shared_prefix_max", r.sharedPrefixMax},
          {"full_match_fraction", r.fullMatchFraction},
          {"prompts", r.prompts},
          {"continuation_tokens", r.continuationTokens},
          {"settings", settings},
          {"seconds", r.seconds}};
}

std::string fidelityText(const FidelityResult& r, const FidelityArgs& a) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(4);
  o << "decode fidelity of " << a.compare.model << " against " << a.compare.dense << "\n";
  o << std::left << std::setw(26) << "" << std::right << std::setw(12) << "compressed" << std::setw(12) << "dense"
    << "\n";
  o << std::left << std::setw(26) << "decode NLL (nats/token)" << std::right << std::setw(12) << r.decodeNll
    << std::setw(12) << r.denseNll << "\n";
  o << std::left << std::setw(26) << "decode perplexity" << std::right << std::setw(12) << std::exp(r.decodeNll)
    << std::setw(12) << std::exp(r.denseNll) << "\n";
  o << std::left << std::setw(26) << "top-1 agreement" << std::right << std::setw(11) << std::setprecision(2)
    << 100 * r.top1Agreement << "%\n";
  o << std::left << std::setw(26) << "KL to dense (nats/token)" << std::right << std::setprecision(4) << "mean "
    << r.klMean << ", 99th percentile " << r.klP99 << "\n";
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
      "  decode_kl_mean   KL(P_dense || P_compressed) over the full vocabulary at those positions, mean (nats); "
      "decode_kl_p99 its 99th percentile (llama.cpp's --kl-divergence statistics)\n"
      "  shared_prefix    leading tokens the compressed model's own greedy continuation shares with the dense one "
      "(mean over prompts; also median, min, max and full_match_fraction: prompts reproduced in full)");
  args->compare.add(cmd);
  cmd->add_option("--max-new-tokens", args->fidelity.maxNewTokens, "Tokens the dense model generates per prompt")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--batch", args->fidelity.batch, "Prompts generated and scored together (0: pick for the device)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", args->json,
                "Print one JSON object (decode_nll, dense_nll, top1_agreement, shared_prefix, ...)");
  cmd->callback(recordedJob("fidelity", [args](JobRecord& run) {
    run.begin(args->compare.model, args->compare.device,
              {{"dense", absolutePath(args->compare.dense)}, {"prompts", absolutePath(args->compare.prompts)},
               {"max_prompts", args->compare.maxPrompts}, {"max_new_tokens", args->fidelity.maxNewTokens},
               {"dtype", args->compare.dtype}});
    const GpuMemoryLimit gpuLimit(makeRuntimeOptions(args->compare.device, args->compare.dtype).device,
                                  args->compare.memory.budget().gpuBytes);
    Comparison l = args->compare.load(args->fidelity.batch, args->fidelity.maxNewTokens, "decode fidelity");
    const LoadedModel& dense = l.dense;
    args->fidelity.eosTokenIds = dense.eosTokenIds;
    FidelityResult r = decodeFidelity(*dense.model, *l.compressed.model, l.promptIds,
                                      args->fidelity, terminalProgress(), &interruptToken());
    const nlohmann::json result = fidelityJson(r, *args, dense);
    run.finish(result);
    printResult(args->json, result, fidelityText(r, *args));
  }));
}

}  // namespace pareto::cli
