// `pareto-cli synthesize`: a random-weight Hugging Face checkpoint of a published configuration
// (core/export/SyntheticCheckpoint.h).
#include <CLI/CLI.hpp>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "checkpoint/ModelPresets.h"
#include "checkpoint/ShardPlan.h"
#include "export/SyntheticCheckpoint.h"

namespace pareto::cli {

void addSynthesizeCommand(CLI::App& app) {
  struct Args {
    SyntheticCheckpointOptions opts;
    std::string shardSize = "5GB";
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  std::string presets;
  for (const auto& n : knownModelPresets()) presets += (presets.empty() ? "" : ", ") + n;
  CLI::App* cmd = app.add_subcommand(
      "synthesize",
      "Write a Hugging Face checkpoint of a published configuration with random weights (linears and embedding "
      "N(0, 0.02^2), norms 1), as transformers writes one: config.json, generation_config.json, safetensors "
      "shards with an index. For speed and memory studies without the real weights; the same --seed gives the "
      "same bytes. Nothing is left behind on failure or Ctrl-C.");
  cmd->add_option("--preset", args->opts.preset, "Configuration: " + presets)->required();
  cmd->add_option("--out", args->opts.outDir, "Output folder (must not exist unless --overwrite)")->required();
  cmd->add_option("--layers", args->opts.layers, "Decoder layers to write (default: the preset's all)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--dtype", args->opts.dtype, "Weight dtype: bfloat16, float16 or float32")->capture_default_str();
  cmd->add_option("--seed", args->opts.seed, "Random seed")->capture_default_str();
  cmd->add_option("--shard-size", args->shardSize,
                  "Largest safetensors file (as transformers' max_shard_size: 5GB, 500MB, 2GiB, bytes)")
      ->capture_default_str();
  cmd->add_option("--tokenizer", args->opts.tokenizer,
                  "A tokenizer.json (or a folder holding one) to copy in; its ids must fit the vocabulary");
  cmd->add_flag("--overwrite", args->opts.overwrite, "Replace an existing folder that Pareto wrote");
  cmd->add_flag("--json", args->json, "Print one JSON object (out, layers, parameters, bytes, files, seconds)");
  cmd->callback([args] {
    args->opts.maxShardBytes = parseByteSize(args->shardSize);
    SyntheticCheckpointReport r = writeSyntheticCheckpoint(args->opts, terminalProgress(), &interruptToken());
    std::ostringstream text;
    text.precision(3);
    text << "wrote " << r.outDir << ": " << args->opts.preset << " with " << r.layers << " layers, "
         << r.parameters << " parameters in " << args->opts.dtype << " (" << std::fixed << r.bytes / 1e9
         << " GB) in " << r.seconds << " s; files:";
    for (const auto& f : r.files) text << " " << f;
    printResult(args->json,
                {{"out", r.outDir},
                 {"preset", args->opts.preset},
                 {"layers", r.layers},
                 {"parameters", r.parameters},
                 {"bytes", r.bytes},
                 {"files", r.files},
                 {"seconds", r.seconds}},
                text.str());
  });
}

}  // namespace pareto::cli
