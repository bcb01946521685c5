#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>

#include "CliSupport.h"
#include "Commands.h"
#include "ModelOptions.h"
#include "calib/DecodeCalibration.h"
#include "jobs/GenerateJob.h"
#include "model/LoadedModel.h"
#include "util/Error.h"

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
    std::string prompts, out;
    int64_t batch = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Continue a prompt (BOS + prompt) with the KV cache, greedily or by sampling; stops at EOS. With --prompts "
      "and --out: continue every line of a prompts file and write the token ids as a continuations file (JSON "
      "lines {\"prompt\": [ids], \"continuation\": [ids]}), which a recipe's decode calibration reads as "
      "\"continuations\" where the model is too large to generate");
  args->model.add(cmd);
  auto* prompt = cmd->add_option("--prompt", args->prompt, "Text to continue");
  auto* prompts = cmd->add_option("--prompts", args->prompts, "A prompts file (one prompt a line) to continue line by line");
  auto* out = cmd->add_option("--out", args->out, "With --prompts: the continuations file to write (must not exist)");
  cmd->add_option("--batch", args->batch, "With --prompts: prompts generated together (0: pick for the device)")
      ->check(CLI::NonNegativeNumber);
  prompt->excludes(prompts);
  prompts->needs(out);
  out->needs(prompts);
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
  cmd->callback([args, temp, topK, topP, seed, prompt] {
    // Sampling is on as soon as any sampling option is given; otherwise greedy.
    args->gen.sampling.greedy = temp->count() + topK->count() + topP->count() + seed->count() == 0;
    validate(args->gen.sampling);
    if (!args->prompts.empty()) {
      if (std::filesystem::exists(args->out))
        throw InputError(fileMessage(args->out, "already exists; choose another --out"));
      LoadedModel m = loadModel(args->model.model, makeRuntimeOptions(args->model.device, args->model.dtype));
      DecodeCalibrationOptions o;
      o.maxNewTokens = args->gen.maxNewTokens;
      o.sampling = args->gen.sampling;
      o.batch = args->batch;
      o.eosTokenIds = m.eosTokenIds;
      if (!args->noBos) o.bosTokenId = m.config.bosTokenId;
      const std::vector<std::string> lines = readPrompts(args->prompts);
      const std::vector<PromptContinuation> records =
          generateContinuations(*m.model, *m.tokenizer, lines, o, terminalProgress(), &interruptToken());
      writeContinuationsFile(args->out, records, lines);
      int64_t tokens = 0;
      for (const auto& r : records) tokens += static_cast<int64_t>(r.continuation.size());
      printResult(args->json, {{"out", args->out}, {"prompts", records.size()}, {"tokens", tokens}},
                  "wrote " + args->out + ": " + std::to_string(records.size()) + " continuations, " +
                      std::to_string(tokens) + " tokens");
      return;
    }
    if (prompt->count() == 0) throw InputError("give --prompt TEXT, or --prompts FILE with --out FILE");
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
