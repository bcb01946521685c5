#include <CLI/CLI.hpp>
#include <algorithm>
#include <iomanip>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "ComparisonOptions.h"
#include "RunRecording.h"
#include "jobs/AnalyzeJob.h"

namespace pareto::cli {
namespace {

struct DriftArgs {
  ComparisonOptions compare;
  ActivationDriftOptions drift;
  bool json = false;
};

std::string driftText(const ActivationDriftResult& r, const DriftArgs& a) {
  std::ostringstream o;
  o << "activation drift D(l,t) = |h_c - h_d| / |h_d| of " << a.compare.model << " against " << a.compare.dense << "\n";
  o << std::left << std::setw(22) << "layer input" << std::right << std::setw(14) << "free plateau" << std::setw(9)
    << "to 90%" << std::setw(16) << "forced plateau" << std::setw(9) << "to 90%" << "\n";
  int64_t worstFree = 0, worstForced = 0;
  for (int64_t l = 0; l < r.layers; ++l) {
    std::string label = std::to_string(l);
    if (l == 0) label += " (embeddings)";
    if (l == r.layers - 1) label = "final norm";
    const auto& f = r.free.summary[static_cast<size_t>(l)];
    const auto& t = r.forced.summary[static_cast<size_t>(l)];
    worstFree = std::max(worstFree, f.stepsTo90);
    worstForced = std::max(worstForced, t.stepsTo90);
    o << std::left << std::setw(22) << label << std::right << std::fixed << std::setprecision(4) << std::setw(14)
      << f.plateau << std::setw(9) << f.stepsTo90 << std::setw(16) << t.plateau << std::setw(9) << t.stepsTo90
      << "\n";
  }
  auto reached = [](const DriftCurves& c) {
    return std::count_if(c.counts.begin(), c.counts.end(), [](int64_t n) { return n > 0; });
  };
  o << "plateau: mean D over the last quarter of the steps; to 90%: first decode step t with D >= 0.9 plateau "
       "(at most "
    << worstFree << " free, " << worstForced << " forced)\n";
  o << r.prompts << " prompts, " << r.steps << " steps asked; steps reached: " << reached(r.free) << " free, "
    << reached(r.forced) << " forced; prompts at the last step: " << r.free.counts.back() << " free, "
    << r.forced.counts.back() << " forced; " << std::setprecision(1) << r.seconds << " s";
  return o.str();
}

}  // namespace

void addDriftSubcommand(CLI::App& analyze) {
  auto args = std::make_shared<DriftArgs>();
  CLI::App* cmd = analyze.add_subcommand(
      "drift", "Activation drift D(l,t) of a compressed model against its dense reference, per layer and decode "
               "step, free-running and teacher-forced");
  cmd->footer(
      "D(l,t) = |h_c - h_d| / |h_d| for the input hidden state of layer l at decode step t, averaged over prompts.\n"
      "  step t      the forward pass that consumes generated token t (position promptLen + t); the prefill is not "
      "a step. A prompt whose continuation ends at EOS counts only at the steps it reaches (EOS is never "
      "consumed); counts gives the prompts averaged at each step\n"
      "  free        each model consumes its own greedy tokens\n"
      "  forced      both consume the dense model's tokens (teacher-forced)\n"
      "  rows        0..L-1: the inputs of blocks 0..L-1 (row 0: the embeddings); row L: the final norm's input\n"
      "  plateau     mean D over the last quarter of the steps reached\n"
      "  steps_to_90 first step with D >= 90% of the plateau");
  args->compare.add(cmd);
  cmd->add_option("--steps", args->drift.steps, "Decode steps measured (tokens each model generates)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--batch", args->drift.batch, "Prompts generated and run together (0: pick for the device)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", args->json,
                "Print one JSON object (layers, steps, free and forced [layer][step] matrices with null where no "
                "prompt reached a step, plateau, steps_to_90, counts)");
  cmd->callback(recordedJob("drift", [args](JobRecord& run) {
    const ComparisonOptions& c = args->compare;
    AnalyzeOptions options =
        AnalyzeOptions::activationDrift(c.dense, c.model, c.prompts, c.maxPrompts, c.device, c.dtype, args->drift);
    options.budget = c.memory.budget();
    AnalyzeJob job(std::move(options));
    run.run(job);
    printResult(args->json, job.result(), driftText(*job.report().drift, *args));
  }));
}

}  // namespace pareto::cli
