// `pareto-cli export hf`: a compressed folder as a dense Hugging Face checkpoint (core/export/HfExport.h).
#include <CLI/CLI.hpp>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "export/HfExport.h"

namespace pareto::cli {

void addExportCommand(CLI::App& app) {
  CLI::App* exp = app.add_subcommand("export", "Exports that other tools read (see `export hf --help`)");
  exp->require_subcommand(1);
  struct Args {
    HfExportOptions opts;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = exp->add_subcommand(
      "hf",
      "Write a compressed folder as a dense Hugging Face checkpoint that transformers loads unchanged: pruned "
      "weights as zeros, quantized weights dequantized, in the source dtype; config.json, tokenizer and "
      "generation_config copied, pareto.json not. Nothing is left behind on failure or Ctrl-C.");
  cmd->add_option("--model", args->opts.modelDir, "Compressed model folder (written by compress)")->required();
  cmd->add_option("--out", args->opts.outDir, "Output folder (must not exist unless --overwrite)")->required();
  cmd->add_option("--dtype", args->opts.dtype,
                  "Weight dtype: float32, bfloat16 or float16 (default: the source's, from config.json)");
  cmd->add_flag("--overwrite", args->opts.overwrite, "Replace an existing output folder once the new one is complete");
  cmd->add_flag("--json", args->json, "Print one JSON object (out, dtype, tensors, densified_modules, bytes, files)");
  cmd->callback([args] {
    HfExportReport r = exportHuggingFace(args->opts, terminalProgress(), &interruptToken());
    std::ostringstream text;
    text.precision(3);
    text << "wrote " << r.outDir << ": " << r.tensors << " tensors in " << r.dtype << " (" << r.densifiedModules
         << " packed modules made dense), " << std::fixed << r.bytes / 1048576.0 << " MiB; files:";
    for (const auto& f : r.files) text << " " << f;
    printResult(args->json,
                {{"out", r.outDir},
                 {"dtype", r.dtype},
                 {"tensors", r.tensors},
                 {"densified_modules", r.densifiedModules},
                 {"bytes", r.bytes},
                 {"files", r.files},
                 {"seconds", r.seconds}},
                text.str());
  });
}

}  // namespace pareto::cli
