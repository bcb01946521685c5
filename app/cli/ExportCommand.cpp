// `pareto-cli export hf | gguf | compressed-tensors`: options in, core's ExportJob (jobs/ExportJob.h) run, its
// report printed.
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

#include "CliSupport.h"
#include "Commands.h"
#include "jobs/ExportJob.h"

namespace pareto::cli {
namespace {

struct ExportArgs {
  ExportOptions opts;
  bool json = false;
};

std::shared_ptr<ExportArgs> exportArgs(ExportKind kind, const std::string& defaultType) {
  auto args = std::make_shared<ExportArgs>();
  args->opts.kind = kind;
  args->opts.type = defaultType;
  return args;
}

std::function<void()> runExport(std::shared_ptr<ExportArgs> args) {
  return [args] {
    ExportJob job(args->opts);
    job.run(terminalProgress(), interruptToken());
    printResult(args->json, job.result(), job.summary());
  };
}

}  // namespace

void addExportCommand(CLI::App& app) {
  CLI::App* exp = app.add_subcommand("export", "Exports that other tools read (see `export hf --help`, `export gguf --help`, `export compressed-tensors --help`)");
  exp->require_subcommand(1);
  auto args = exportArgs(ExportKind::HuggingFace, "");
  CLI::App* cmd = exp->add_subcommand(
      "hf",
      "Write a compressed folder as a dense Hugging Face checkpoint that transformers loads unchanged: pruned "
      "weights as zeros, quantized weights dequantized, in the source dtype; config.json, tokenizer and "
      "generation_config copied, pareto.json not. Nothing is left behind on failure or Ctrl-C.");
  cmd->add_option("--model", args->opts.modelDir, "Compressed model folder (written by compress)")->required();
  cmd->add_option("--out", args->opts.out, "Output folder (must not exist unless --overwrite)")->required();
  cmd->add_option("--dtype", args->opts.type,
                  "Weight dtype: float32, bfloat16 or float16 (default: the source's, from config.json)");
  cmd->add_flag("--overwrite", args->opts.overwrite, "Replace an existing output folder once the new one is complete");
  cmd->add_flag("--json", args->json, "Print one JSON object (out, dtype, tensors, densified_modules, bytes, files)");
  cmd->callback(runExport(args));

  auto gargs = exportArgs(ExportKind::Gguf, "auto");
  CLI::App* gcmd = exp->add_subcommand(
      "gguf",
      "Write a model folder (dense, or written by compress) as one GGUF file that llama.cpp loads: llama "
      "architecture metadata (Llama, Mistral, Qwen2/3), the byte-level BPE tokenizer from tokenizer.json, q/k rows "
      "permuted for llama.cpp's RoPE. Norms are written f32; the embedding and head keep the checkpoint's float "
      "type. Nothing is left behind on failure or Ctrl-C.");
  gcmd->add_option("--model", gargs->opts.modelDir, "Model folder (Hugging Face, or written by compress)")->required();
  gcmd->add_option("--out", gargs->opts.out, "Output .gguf file (must not exist unless --overwrite)")->required();
  gcmd->add_option("--type", gargs->opts.type,
                   "auto: each module as stored (dense in the checkpoint's float type; a module packed in a format "
                   "GGUF has no type for is refused, naming it); f32, f16, bf16: every weight in that float type; "
                   "q8_0, q4_0, q4_k, q6_k: the block linears requantized by round-to-nearest from their "
                   "(dequantized) weights (k-quants fall back to q4_0 / q8_0 for rows that are not whole 256-weight "
                   "super-blocks, and say so)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"}, CLI::ignore_case));
  gcmd->add_flag("--overwrite", gargs->opts.overwrite, "Replace an existing GGUF file that Pareto wrote");
  gcmd->add_flag("--json", gargs->json,
                 "Print one JSON object (out, type, architecture, tensors, bytes, tensors_by_type, "
                 "linear_bits_per_weight, notes)");
  gcmd->callback(runExport(gargs));

  auto cargs = exportArgs(ExportKind::CompressedTensors, "float16");
  CLI::App* ccmd = exp->add_subcommand(
      "compressed-tensors",
      "Write a compressed folder as a compressed-tensors \"pack-quantized\" checkpoint that vLLM and SGLang serve "
      "with their W4A16 / W8A16 kernels: each int4 / int8 module (groups, per channel, per tensor written per "
      "channel, GPTQ act-order) keeps Pareto's codes and scales exactly (int32 weight_packed, weight_scale, "
      "weight_zero_point when asymmetric, weight_shape); 2:4-pruned, unstructured and unquantized modules and "
      "lm_head are written dense (zeros in place) and listed in quantization_config.ignore. A module stored in a "
      "format compressed-tensors has no scheme for (3-bit, SpQR, 2:4 + int) is refused, naming it. config.json "
      "gets quantization_config; tokenizer and generation_config are copied. Nothing is left behind on failure or "
      "Ctrl-C.");
  ccmd->add_option("--model", cargs->opts.modelDir, "Compressed model folder (written by compress)")->required();
  ccmd->add_option("--out", cargs->opts.out, "Output folder (must not exist unless --overwrite)")->required();
  ccmd->add_option("--dtype", cargs->opts.type,
                   "dtype of the scales and the dense tensors, which vLLM runs in: float16 keeps Pareto's fp16 "
                   "scales exact; bfloat16 or float32, or source (config.json's dtype; bfloat16 rounds the scales "
                   "and the report says how many changed)")
      ->capture_default_str()
      ->check(CLI::IsMember({"float16", "bfloat16", "float32", "source"}));
  ccmd->add_flag("--overwrite", cargs->opts.overwrite,
                 "Replace an existing output folder that Pareto wrote, once the new one is complete");
  ccmd->add_flag("--json", cargs->json,
                 "Print one JSON object (out, dtype, tensors, quantized_modules, dense_modules, schemes, ignore, "
                 "bytes, files, notes)");
  ccmd->callback(runExport(cargs));
}

}  // namespace pareto::cli
