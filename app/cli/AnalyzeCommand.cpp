#include <CLI/CLI.hpp>
#include <iomanip>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "MemoryOptions.h"
#include "ModelOptions.h"
#include "RunRecording.h"
#include "jobs/AnalyzeJob.h"

namespace pareto::cli {
namespace {

std::string studyText(const HessianStudyResult& r) {
  std::ostringstream o;
  size_t width = 6;
  for (const auto& m : r.modules) width = std::max(width, m.name.size());
  o << std::left << std::setw(static_cast<int>(width)) << "module" << std::right << std::setw(12) << "δ text"
    << std::setw(12) << "δ decode" << std::setw(9) << "ratio" << "\n";
  o << std::fixed << std::setprecision(4);
  for (const auto& m : r.modules)
    o << std::left << std::setw(static_cast<int>(width)) << m.name << std::right << std::setw(11) << m.text.delta
      << std::setw(11) << m.decode.delta << std::setw(9) << std::setprecision(2) << m.ratio() << std::setprecision(4)
      << "\n";
  o << std::setprecision(1) << "decode calibration is closer to the held-out decode Hessian for "
    << 100 * r.summary.fractionDecodeSmaller << "% of " << r.summary.modules << " modules; median δ(text)/δ(decode) "
    << std::setprecision(2) << r.summary.medianRatio << " (" << r.textTokens << " text tokens, " << r.decodeTokens
    << " decode tokens from " << r.calibrationPrompts << " prompts, target " << r.targetTokens << " tokens from "
    << r.targetPrompts << " held-out prompts; " << std::setprecision(1) << r.seconds << " s)";
  return o.str();
}

}  // namespace

void addAnalyzeCommand(CLI::App& app) {
  CLI::App* analyze = app.add_subcommand("analyze", "Analyses of a dense model (see `analyze hessian --help`)");
  analyze->require_subcommand(1);
  addDriftSubcommand(*analyze);
  struct Args {
    ModelOptions model;
    HessianStudyOptions study;
    MemoryOptions memory;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = analyze->add_subcommand(
      "hessian",
      "Hessian discrepancy per linear: δ = ‖H_t^-1/2 (H_c − H_t) H_t^-1/2‖₂ of a text-calibration and a "
      "decode-calibration Hessian H_c against the decode-time Hessian H_t of held-out prompts (the prompts file is "
      "split in two seeded, disjoint halves). Reports the fraction of modules where decode calibration is closer "
      "and the median ratio δ(text)/δ(decode).");
  args->model.add(cmd);
  args->memory.addForGeneration(cmd);
  cmd->add_option("--text", args->study.textFile, "Text file for teacher-forced calibration")->required();
  cmd->add_option("--prompts", args->study.promptsFile, "Prompts file, one prompt per line")->required();
  cmd->add_option("--calib-tokens", args->study.calibTokens, "Tokens reaching each calibration Hessian")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--target-tokens", args->study.targetTokens, "Decode tokens of the held-out target (0: same)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--window", args->study.window, "Text calibration window")->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  cmd->add_option("--max-new-tokens", args->study.maxNewTokens, "Tokens generated per prompt")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--seed", args->study.seed, "Seed for the prompt split, prompt order and text windows")
      ->capture_default_str();
  cmd->add_option("--damp", args->study.discrepancy.damp, "Damping of H_t as a fraction of its mean diagonal")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--batch", args->study.batch, "Sequences per forward pass (0: pick for the device)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", args->json, "Print one JSON object (modules, fraction_decode_smaller, median_ratio, ...)");
  cmd->callback(recordedJob("hessian", [args](JobRecord& run) {
    AnalyzeOptions options =
        AnalyzeOptions::hessianStudy(args->model.model, args->model.device, args->model.dtype, args->study);
    options.budget = args->memory.budget();
    AnalyzeJob job(std::move(options));
    run.run(job);
    printResult(args->json, job.result(), studyText(*job.report().hessian));
  }));
}

}  // namespace pareto::cli
