// pareto-cli bench kernels (bench decode: BenchDecodeCommand.cpp): the packed-weight GEMV kernels against cuBLAS and cuSPARSELt at a model's shapes
// (core/runtime/KernelBenchmark.h). Prints the table last (or one JSON object with --json) and can also write
// the JSON to a file.
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "RunRecording.h"
#include "Commands.h"
#include "jobs/BenchmarkRecords.h"
#include "runtime/KernelBenchmark.h"
#include "util/Error.h"

namespace pareto::cli {

void addBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks (see `bench kernels --help`, `bench decode --help`)");
  bench->require_subcommand(1);
  addBenchDecodeCommand(*bench);

  struct Args {
    std::string shapes = "llama-3.1-8b";
    std::string batches = "1";
    std::string formats;
    std::string device = "cuda";
    int layers = 0;
    int runs = 50;
    uint64_t seed = 0;
    double outliers = 0.01;
    std::string output;
    bool json = false;
    bool perShape = false;
  };
  auto args = std::make_shared<Args>();
  std::string known;
  for (const auto& n : knownModelShapes()) known += (known.empty() ? "" : ", ") + n;
  std::string formats;
  for (const auto& f : defaultKernelFormats()) formats += (formats.empty() ? "" : ",") + f;
  CLI::App* cmd = bench->add_subcommand(
      "kernels",
      "Time one decode step's linear layers (every weight distinct, captured in a CUDA graph, median of --runs "
      "replays) for dense cuBLAS fp16, cuSPARSELt 2:4 and each packed-weight kernel; print ms per step, GB/s, the "
      "fraction of the measured copy bandwidth and the speedup over dense. With --device cpu the kernels' float64 "
      "references run instead (labelled as such; use --layers 1, they are slow).");
  cmd->add_option("--shapes", args->shapes, "Model shape: " + known + ", or a JSON file")->capture_default_str();
  cmd->add_option("--batch", args->batches, "Batch sizes, comma-separated, each 1..16 (e.g. 1,2,4,8,16)")
      ->capture_default_str();
  cmd->add_option("--formats", args->formats, "Formats, comma-separated (default: " + formats + ")");
  cmd->add_option("--device", args->device, "cuda or cpu")->capture_default_str()->check(CLI::IsMember({"cuda", "cpu"}));
  cmd->add_option("--layers", args->layers, "Use this many layers instead of the model's (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--runs", args->runs, "Timed replays per format and batch (median reported)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--spqr-outliers", args->outliers, "Outlier fraction of the SpQR weights")
      ->capture_default_str()->check(CLI::Range(0.0, 0.5));
  cmd->add_option("--seed", args->seed, "Seed of the random weights")->capture_default_str();
  cmd->add_option("--output", args->output, "Also write the JSON result to this file");
  cmd->add_flag("--per-shape", args->perShape,
                "Also time each linear shape alone (its GEMVs of every layer in their own graph): µs a GEMV");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of the table");
  cmd->callback([args] {
    KernelBenchOptions o;
    o.shape = modelShapeByName(args->shapes);
    if (args->layers > 0) o.shape.layers = args->layers;
    o.batches.clear();
    for (int64_t b : parseIntList(args->batches, "--batch")) o.batches.push_back(int(b));
    if (!args->formats.empty()) o.formats = splitList(args->formats);
    o.device = args->device;
    o.runs = args->runs;
    o.seed = args->seed;
    o.spqrOutlierFraction = args->outliers;
    o.perShape = args->perShape;
    const KernelBenchReport report = runKernelBenchmark(o, terminalProgress(), interruptToken());
    const nlohmann::json j = toJson(report);
    // One row per (format, batch) in the run store (the workbench predicts tokens/s from them): time per step
    // of the model shape, and its bandwidth.
    std::vector<BenchmarkRow> rows;
    for (const auto& r : report.results)
      if (r.available) rows.push_back(benchmarkRow(report, r));
    recordBenchmarks(rows, report.device,
                     {{"shape", report.shape}, {"copy_gb_per_s", report.copyGbPerSecond}, {"runs", o.runs}});
    writeResultFile(args->output, j);
    printResult(args->json, j, toText(report));
  });
}

}  // namespace pareto::cli
