// `pareto-cli search`: the per-module sensitivity of every candidate, the front of allocations under a budget of
// bits per weight, bytes or predicted tokens per second, and the chosen allocation as a recipe compress runs as
// it is (core/search).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "RunRecording.h"
#include "compress/RecipeEstimate.h"
#include "model/Device.h"
#include "jobs/DeviceBandwidth.h"
#include "jobs/SearchJob.h"
#include "util/Error.h"
#include "util/FileSystem.h"

namespace pareto::cli {
namespace {

using nlohmann::json;

// What tokens/s is predicted from (jobs/DeviceBandwidth.h, search/DecodeTimeModel.h): this device's stored
// kernel benchmarks (single GEMVs from `bench kernels --per-shape`, else whole steps), else its stored copy
// bandwidth (`bench copy`), measured and stored now when there is none; and the model's own measured dense decode
// step (`bench decode --model DIR`) where the store has one.
DecodeBandwidth predictionBandwidth(const std::string& device, const std::string& modelDir) {
  const c10::Device d = parseDevice(device);
  std::unique_ptr<ExperimentStore> store;
  std::string problem;
  try {
    store = std::make_unique<ExperimentStore>(recordingDisabled() ? openStoreForReading() : openStore());
  } catch (const std::exception& e) {
    problem = e.what();   // no usable store: measured now, for this search alone
  }
  const StoredCopyBandwidth copy = copyBandwidthForPredictions(store.get(), d, /*fresh=*/false, &problem);
  DecodeBandwidth b = decodeBandwidth(copy, copy.device, store.get());
  if (store) addDenseDecodeStep(b, *store, copy.device, modelDir);
  if (!problem.empty()) b.source += " (not stored: " + (recordingDisabled() ? "--no-record" : problem) + ")";
  return b;
}

json pointJson(const SearchPoint& p) {
  return {{"estimated_loss", p.loss}, {"bytes", p.bytes}, {"linear_bits_per_weight", p.bitsPerWeight},
          {"predicted_tokens_per_second", p.tokensPerSecond}};
}

std::string pointRow(const SearchPoint& p) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(3) << std::setw(9) << p.bitsPerWeight << std::setw(13) << p.bytes
    << std::scientific << std::setprecision(4) << std::setw(14) << p.loss << std::fixed << std::setprecision(1)
    << std::setw(11) << p.tokensPerSecond;
  return s.str();
}

std::string bpwTag(double bpw) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3fbpw", bpw);
  return text;
}

}  // namespace

void addSearchCommand(CLI::App& app) {
  struct Args {
    std::string model, recipe, out, outDir, device = "cpu", dtype = kDefaultComputeDtype;
    double bpw = NAN, bytes = NAN, tokS = NAN;
    size_t frontier = 0;
    int64_t batch = 0;
    bool json = false, noRefine = false;
    int64_t refineWindows = -1, refineModules = -1;
    std::string refineReference, table;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "search",
      "Search the trade-off: for every block linear and every candidate (BASE.json's \"candidates\", by default "
      "dense, rtn int8 per channel, gptq int4 g64/g128, gptq int3 g128, SpQR 3-bit, SparseGPT 2:4, 2:4 + gptq int4 "
      "and the GGUF grids q8_0, q4_k, q4_0), the estimated loss tr(ΔW H ΔWᵀ) of the candidate's solution against "
      "the calibration Hessian of the dense model (H: the mean of x xᵀ over calibration tokens), scaled per module "
      "by the KL to dense of replacing that module alone by a reference candidate (see --no-refine), so that the "
      "estimate is a predicted KL in nats comparable across modules; then one "
      "candidate per module minimising the summed estimated loss under the budget (an exact multiple-choice "
      "knapsack that gives the whole front in one sweep). Writes the chosen allocation as an ordinary recipe "
      "(BASE.json's calibration block + one override per module) that `compress` runs as it is, and prints the "
      "predicted front: bits per weight over the block linears, bytes, estimated loss, predicted tokens/s. "
      "Tokens/s are predictions of the decode step as the runtime runs it (q/k/v and gate/up one GEMV when they "
      "share a format): each GEMV's time from this device's stored kernel benchmarks (`bench kernels --shapes "
      "FILE --per-shape` at the model's shapes is best; else whole-step bandwidths of `bench kernels`, else the "
      "copy bandwidth stored by `bench copy` or the workbench, measured and stored now when none is), and the rest "
      "of the step from the dense model's own `bench decode --model DIR` when the store has one (else from its "
      "bytes, which misses attention, norms and launches). A budget outside what the candidates can reach is "
      "refused with the reachable range, before any "
      "work; a candidate that cannot apply to a module is left out for that module and listed.");
  cmd->add_option("--model", args->model, "Dense Hugging Face model folder")->required();
  cmd->add_option("--recipe", args->recipe,
                  "Base recipe JSON: its \"calibration\" block (needed), \"skip\", and optionally \"candidates\": "
                  "[{\"name\", \"prune\", \"quantize\"}, ...] in recipe syntax (docs/search.md)")
      ->required();
  auto* bpw = cmd->add_option("--budget-bpw", args->bpw, "Average bits per weight over the block linears");
  auto* bytes = cmd->add_option("--budget-bytes", args->bytes, "Total bytes of the block linears");
  auto* toks = cmd->add_option("--budget-tok-s", args->tokS, "Predicted batch-1 decode tokens per second (at least)");
  bpw->excludes(bytes)->excludes(toks);
  bytes->excludes(toks);
  cmd->add_option("--out", args->out, "The chosen allocation's recipe JSON (written atomically)")->required();
  cmd->add_option("--frontier", args->frontier,
                  "Points of the front to print (default 10) and, with --out-dir, to write as recipes");
  cmd->add_option("--out-dir", args->outDir, "Folder for the --frontier recipes (created if missing)");
  cmd->add_option("--device", args->device, "cpu, cuda or cuda:N (sensitivity pass; tokens/s predicted for it)")
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Compute dtype (float32, bfloat16, float16)")->capture_default_str();
  cmd->add_option("--batch", args->batch, "Calibration sequences per forward (0: pick for the device)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-refine", args->noRefine,
                "Rank by each module's output error tr(ΔW H ΔWᵀ) alone. By default (and with BASE.json's \"refine\") "
                "each module's errors are scaled by the KL to dense of replacing that module alone by a reference "
                "candidate, so that modules are compared in one unit (predicted KL, nats): the output error ranks "
                "q/k/gate/up, whose errors the next operation damps, above o/down, which write into the residual "
                "stream. Costs one forward from the module's layer on per module and window");
  cmd->add_option("--refine-windows", args->refineWindows,
                  "Calibration windows the refinement's KL is measured on (default 4, or BASE.json's refine.windows)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--refine-modules", args->refineModules,
                  "Measure only the K modules of largest output error; the rest take their kind's median scale "
                  "(default 0: every module)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--refine-reference", args->refineReference,
                  "The candidate each module is replaced by alone (default: of those applying to every module, the "
                  "one of median size; with the default candidates gptq-int4-g64)");
  cmd->add_option("--table", args->table,
                  "Sensitivity table file: read when it was measured for this model, base recipe (calibration, "
                  "skip, candidates, refinement) and dtype, so that searches under other budgets skip the "
                  "sensitivity pass; otherwise measured and written there");
  cmd->add_flag("--json", args->json,
                "Print one JSON object (budget, chosen, front, modules with each candidate's estimated loss and "
                "bytes, skipped pairs)");
  cmd->callback([args] {
    SearchBudget budget;
    if (!std::isnan(args->bpw)) budget = {BudgetKind::BitsPerWeight, args->bpw};
    else if (!std::isnan(args->bytes)) budget = {BudgetKind::Bytes, args->bytes};
    else if (!std::isnan(args->tokS)) budget = {BudgetKind::TokensPerSecond, args->tokS};
    else throw InputError("give a budget: --budget-bpw B, --budget-bytes N or --budget-tok-s T");
    if (!(budget.value > 0)) throw InputError("the budget must be positive, got " + budgetText(budget));
    if (!args->outDir.empty() && args->frontier == 0)
      throw InputError("--out-dir " + args->outDir + ": give --frontier K, the number of front points to write");

    SearchOptions options;
    options.modelDir = args->model;
    options.baseRecipe = args->recipe;
    options.budget = budget;
    options.device = args->device;
    options.dtype = args->dtype;
    options.batch = args->batch;
    options.bandwidth = predictionBandwidth(args->device, args->model);
    if (args->noRefine) {
      if (args->refineWindows >= 0 || args->refineModules >= 0 || !args->refineReference.empty())
        throw InputError("--no-refine: the --refine-* options set the refinement it turns off; give one or the other");
      options.refine = false;
    }
    if (args->refineWindows >= 0) options.refineWindows = args->refineWindows;
    if (args->refineModules >= 0) options.refineModules = args->refineModules;
    if (!args->refineReference.empty()) options.refineReference = args->refineReference;
    options.tableFile = args->table;
    SearchJob job(options);
    job.run(terminalProgress(), interruptToken());
    const SearchReport& report = job.report();
    const SearchBase& base = report.base;
    const SensitivityTable& table = report.table;
    const SearchFront& front = report.front;
    const SearchPoint& chosen = report.chosenPoint();

    auto describe = [&](const SearchPoint& p, const std::string& what) {
      std::ostringstream s;
      s << std::setprecision(6) << "pareto-cli search " << what << ": " << base.candidates.size()
        << " candidates on " << std::filesystem::path(args->model).filename().string() << ", estimated loss "
        << p.loss << " (" << table.estimate() << "), " << p.bitsPerWeight << " bits per weight over the block linears (" << p.bytes
        << " bytes), predicted " << std::setprecision(4) << p.tokensPerSecond << " tokens/s";
      return s.str();
    };
    // Everything is computed before anything is written; each file goes in whole (a temporary file renamed).
    const json recipe = searchRecipe(base, table, chosen, describe(chosen, "for " + budgetText(budget)));
    std::vector<size_t> sample = frontierSample(front, args->frontier > 0 ? args->frontier : 10);
    std::vector<std::pair<std::string, json>> frontierFiles;
    if (!args->outDir.empty()) {
      for (size_t k = 0; k < sample.size(); ++k) {
        const SearchPoint& p = front.points[sample[k]];
        char name[64];
        std::snprintf(name, sizeof name, "frontier-%02zu-%s.json", k + 1, bpwTag(p.bitsPerWeight).c_str());
        frontierFiles.emplace_back((std::filesystem::path(args->outDir) / name).string(),
                                   searchRecipe(base, table, p, describe(p, "front point " + std::to_string(k + 1))));
      }
    }
    writeFileAtomically(args->out, recipe.dump(2) + "\n");
    if (!frontierFiles.empty()) std::filesystem::create_directories(args->outDir);
    for (const auto& [path, doc] : frontierFiles) writeFileAtomically(path, doc.dump(2) + "\n");

    // Results.
    std::map<std::string, int> counts;
    for (int c : chosen.choice) counts[base.candidates[size_t(c)].name]++;
    const std::vector<std::string> skipped = table.skipped();
    json result = {{"model", absolutePath(args->model)},
                   {"base", absolutePath(args->recipe)},
                   {"out", absolutePath(args->out)},
                   {"budget", {{"kind", budget.kind == BudgetKind::BitsPerWeight ? "bits_per_weight"
                                        : budget.kind == BudgetKind::Bytes   ? "bytes"
                                                                             : "tokens_per_second"},
                               {"value", budget.value}}},
                   {"chosen", pointJson(chosen)},
                   {"calibration_tokens", table.calibrationTokens},
                   {"estimate", table.estimate()},
                   {"table", args->table.empty() ? json() : json{{"path", absolutePath(args->table)},
                                                                 {"reused", job.tableReused()}}},
                   {"refine", table.refinement.done
                                  ? json{{"reference", table.refinement.reference},
                                         {"windows", table.refinement.windows},
                                         {"tokens", table.refinement.tokens},
                                         {"measured_modules", table.refinement.measuredModules}}
                                  : json(false)},
                   {"speed_source", front.speedSource},
                   {"front_points", front.points.size()},
                   {"grid_unit", front.gridUnit},
                   {"reachable", {{"bits_per_weight", {front.minBitsPerWeight, front.maxBitsPerWeight}},
                                  {"bytes", {front.minBytes, front.maxBytes}},
                                  {"tokens_per_second", {front.minTokensPerSecond, front.maxTokensPerSecond}}}},
                   {"skipped", skipped},
                   {"unmeasured", front.unmeasured}};
    json frontJson = json::array();
    for (size_t k = 0; k < sample.size(); ++k) {
      json p = pointJson(front.points[sample[k]]);
      if (k < frontierFiles.size()) p["recipe"] = absolutePath(frontierFiles[k].first);
      frontJson.push_back(p);
    }
    result["front"] = frontJson;
    json modules = json::array();
    for (size_t i = 0; i < table.modules.size(); ++i) {
      const SensitivityModule& m = table.modules[i];
      json cells = json::array();
      for (size_t c = 0; c < m.cells.size(); ++c) {
        const SensitivityCell& cell = m.cells[c];
        json j = {{"candidate", table.candidates[c]}, {"applies", cell.applies}};
        if (cell.applies) {
          j["format"] = cell.format;
          j["bytes"] = cell.bytes;
          j["estimated_loss"] = cell.loss;
          j["output_error"] = cell.outputError;
        } else {
          j["problem"] = cell.problem;
        }
        cells.push_back(j);
      }
      json mj = {{"module", m.name}, {"chosen", table.candidates[size_t(chosen.choice[i])]}, {"scale", m.scale}};
      if (!std::isnan(m.referenceKl)) mj["reference_kl"] = m.referenceKl;
      mj["candidates"] = cells;
      modules.push_back(mj);
    }
    result["modules"] = modules;

    std::ostringstream text;
    text << "searched " << table.modules.size() << " modules × " << base.candidates.size() << " candidates ("
         << table.calibrationTokens << " calibration tokens); the front has " << front.points.size() << " points\n"
         << "estimated loss: " << table.estimate() << "\n";
    if (!args->table.empty())
      text << (job.tableReused() ? "sensitivity table read from " : "sensitivity table written to ") << args->table << "\n";
    if (!skipped.empty()) {
      // One line per candidate: how many modules it cannot apply to and the first reason (--json lists all).
      text << "left out where the candidate cannot apply (" << skipped.size() << " module × candidate pairs):\n";
      for (size_t c = 0; c < table.candidates.size(); ++c) {
        size_t n = 0;
        std::string first;
        for (const SensitivityModule& m : table.modules)
          if (!m.cells[c].applies && n++ == 0) first = m.cells[c].problem;
        if (n > 0) text << "  " << table.candidates[c] << " on " << n << " module" << (n == 1 ? "" : "s") << ", e.g. "
                        << first << "\n";
      }
    }
    if (!front.unmeasured.empty()) {
      text << "left out of the tokens/s search (no stored kernel time): " << front.unmeasured.size() << "\n";
      for (const std::string& s : front.unmeasured) text << "  " << s << "\n";
    }
    text << "predicted front (tokens/s: " << (front.speedSource.empty() ? "unknown" : front.speedSource) << ")\n"
         << "   bits/w        bytes  est. loss        tok/s\n";
    for (size_t k : sample) text << pointRow(front.points[k]) << (&front.points[k] == &chosen ? "   <- chosen" : "") << "\n";
    text << "chosen for " << budgetText(budget) << ":\n" << pointRow(chosen) << "\n  ";
    bool first = true;
    for (const auto& [name, n] : counts) {
      text << (first ? "" : ", ") << name << " × " << n;
      first = false;
    }
    text << "\nwrote " << args->out;
    for (const auto& f : frontierFiles) text << "\nwrote " << f.first;
    printResult(args->json, result, text.str());
  });
}

}  // namespace pareto::cli
