#include <CLI/CLI.hpp>
#include <memory>

#include "CliSupport.h"
#include "Commands.h"
#include "ModelOptions.h"
#include "jobs/GenerateJob.h"

namespace pareto::cli {

void addGenerateCommand(CLI::App& app) {
  struct Args {
    ModelOptions model;
    std::string prompt;
    GenerationOptions gen;
    bool greedy = false;
    bool noBos = false;
    bool json = false;
    std::string runtime = "eager";
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "Continue a prompt (BOS + prompt) with the KV cache, greedily or by sampling; stops at EOS");
  args->model.add(cmd);
  cmd->add_option("--prompt", args->prompt, "Text to continue")->required();
  cmd->add_option("--max-new-tokens", args->gen.maxNewTokens, "Most tokens to generate")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  auto* greedy = cmd->add_flag("--greedy", args->greedy, "Always take the most likely token (the default)");
  auto* temp = cmd->add_option("--temperature", args->gen.sampling.temperature, "Sampling temperature (> 0)");
  auto* topK = cmd->add_option("--top-k", args->gen.sampling.topK, "Sample among the K most likely tokens (0: all)");
  auto* topP = cmd->add_option("--top-p", args->gen.sampling.topP,
                               "Sample among the smallest set of tokens whose probability reaches P");
  auto* seed = cmd->add_option("--seed", args->gen.sampling.seed, "Random seed for sampling");
  for (auto* o : {temp, topK, topP, seed}) o->excludes(greedy);
  cmd->add_flag("--no-bos", args->noBos, "Do not put the model's BOS token first");
  cmd->add_flag("--json", args->json, "Print one JSON object (ids of the new tokens, text)");
  cmd->add_option("--runtime", args->runtime,
                  "eager: LibTorch ops, a compressed folder's packed modules unpacked to dense weights; packed: the "
                  "packed modules stay packed and run on their kernels (CUDA) or the kernels' references (CPU); "
                  "graph: the decode runtime (fused ops, packed modules, on CUDA one step captured in a CUDA graph "
                  "and replayed, sampling on the device; float16/bfloat16)")
      ->capture_default_str()->check(CLI::IsMember({"eager", "packed", "graph"}));
  cmd->callback([args, temp, topK, topP, seed] {
    // Sampling is on as soon as any sampling option is given; otherwise greedy.
    args->gen.sampling.greedy = temp->count() + topK->count() + topP->count() + seed->count() == 0;
    validate(args->gen.sampling);
    GenerateOptions o;
    o.modelDir = args->model.model;
    o.device = args->model.device;
    o.dtype = args->model.dtype;
    o.runtime = args->runtime;
    o.prompt = args->prompt;
    o.addBos = !args->noBos;
    o.generation = args->gen;
    GenerateJob job(o);
    job.run({}, interruptToken());
    const std::vector<TokenId>& out = job.report().sequences.at(0).tokens;
    std::string text = job.model(0).tokenizer->decode(out);
    printResult(args->json, {{"ids", out}, {"text", text}}, text);
  });
}

}  // namespace pareto::cli
