// pareto-cli bench decode: tokens per second of the decode loop (core/decode/DecodeBenchmark.h) for a model
// folder or a synthetic model in one or more weight formats, run as core's benchmark job. Prints the table last (or one JSON object with
// --json), can write the JSON to a file, and records the rows in the run store.
#include <CLI/CLI.hpp>

#include <memory>

#include "CliSupport.h"
#include "Commands.h"
#include "checkpoint/ModelPresets.h"
#include "jobs/BenchmarkJob.h"

namespace pareto::cli {

void addBenchDecodeCommand(CLI::App& bench) {
  struct Args {
    std::string model, synthetic, formats = "dense", headFormat = "dense", contexts = "512", batches = "1";
    int64_t newTokens = 256;
    std::string device = "cuda", dtype;
    int runs = 5;
    int64_t layers = 0;
    uint64_t seed = 0;
    double outliers = 0.01;
    bool eager = false, breakdown = false;
    double temperature = 0, topP = 1.0;
    int64_t topK = 0;
    std::string output;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  std::string presets;
  for (const auto& n : knownModelPresets()) presets += (presets.empty() ? "" : ", ") + n;
  CLI::App* cmd = bench.add_subcommand(
      "decode",
      "Time the decode loop: static KV cache, one step captured in a CUDA graph and replayed per token, the next "
      "token chosen on the device (greedy, or sampled with --temperature/--top-k/--top-p). Each run starts from the same context and generates --new-tokens tokens per "
      "sequence; the median of --runs runs is reported as tokens/s (all sequences), ms per token, bytes read per "
      "token (weights + KV cache), GB/s and the fraction of the measured copy bandwidth. A model folder runs in "
      "the formats it stores (a `compress` output stays packed); a synthetic model is a published configuration "
      "with random weights made on the device in each --format. With --device cpu the kernels' float64 "
      "references run eagerly (slow: use a small model, --layers 1 and few tokens).");
  auto* model = cmd->add_option("--model", args->model, "Model folder (dense, or a compress output)");
  auto* synthetic = cmd->add_option("--synthetic", args->synthetic, "Synthetic model: " + presets);
  model->excludes(synthetic);
  cmd->add_option("--format", args->formats,
                  "Weight formats of the synthetic model's linears, comma-separated: dense, bitmask-N:M, "
                  "int8-channel, int4-gG, spqr-2bit/3bit/4bit, bitmask-N:M+int4-gG")
      ->capture_default_str();
  cmd->add_option("--head-format", args->headFormat,
                  "Synthetic: the output head's format (as a recipe's \"lm_head\" block stores it), e.g. "
                  "int8-channel or int4-g128; dense is the configuration's head (tied or not)")
      ->capture_default_str();
  cmd->add_option("--context", args->contexts, "Tokens already in the cache when timing starts, comma-separated")
      ->capture_default_str();
  cmd->add_option("--new-tokens", args->newTokens, "Tokens generated per sequence in each timed run")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--batch", args->batches, "Sequences decoded together, comma-separated, each 1..16")
      ->capture_default_str();
  cmd->add_option("--device", args->device, "cuda or cpu")->capture_default_str()->check(CLI::IsMember({"cuda", "cpu"}));
  cmd->add_option("--dtype", args->dtype, "float16 or bfloat16 (default: float16 on CUDA, bfloat16 on the CPU)")
      ->check(CLI::IsMember({"float16", "bfloat16", "fp16", "bf16"}));
  cmd->add_option("--runs", args->runs, "Timed runs (median reported; one warm-up run first)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--layers", args->layers, "Synthetic: use this many layers instead of the model's (0: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--spqr-outliers", args->outliers, "Outlier fraction of synthetic SpQR weights")
      ->capture_default_str()->check(CLI::Range(0.0, 0.5));
  cmd->add_option("--seed", args->seed, "Seed of the random weights, context and prompt")->capture_default_str();
  cmd->add_flag("--eager", args->eager, "Launch every kernel of every step instead of replaying a CUDA graph");
  cmd->add_flag("--breakdown", args->breakdown,
                "Also time each part of the step alone (linears, attention, norms+activation, output head)");
  cmd->add_option("--temperature", args->temperature,
                  "Sample each token on the device at this temperature (> 0) instead of taking the argmax")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--top-k", args->topK, "With --temperature: sample among the K most likely tokens (0: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", args->topP,
                  "With --temperature: sample among the smallest set of tokens whose probability reaches P");
  cmd->add_option("--output", args->output, "Also write the JSON result to this file");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of the table");
  cmd->callback([args] {
    DecodeBenchOptions o;
    o.formats = splitList(args->formats);
    o.headFormat = args->headFormat;
    o.contexts = parseIntList(args->contexts, "--context");
    o.batches = parseIntList(args->batches, "--batch");
    o.newTokens = args->newTokens;
    o.device = args->device;
    o.dtype = args->dtype;
    o.runs = args->runs;
    o.layers = args->layers;
    o.seed = args->seed;
    o.spqrOutlierFraction = args->outliers;
    o.useGraph = !args->eager;
    o.breakdown = args->breakdown;
    o.temperature = args->temperature;
    o.topK = args->topK;
    o.topP = args->topP;
    BenchmarkOptions options;
    options.modelDir = args->model;
    options.synthetic = args->synthetic;
    options.device = o.device;
    options.decode = o;
    runBenchmark(options, args->output, args->json);
  });
}

}  // namespace pareto::cli
