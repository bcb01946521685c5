// pareto-cli bench kernels (bench decode: BenchDecodeCommand.cpp): the packed-weight GEMV kernels against cuBLAS
// and cuSPARSELt at a model's shapes (core/runtime/KernelBenchmark.h), run as core's benchmark job. Prints the
// table last (or one JSON object with --json), can also write the JSON to a file, and records the rows.
#include <CLI/CLI.hpp>

#include <memory>
#include <optional>

#include "CliSupport.h"
#include "Commands.h"
#include "RunRecording.h"
#include "jobs/BenchmarkJob.h"
#include "jobs/DeviceBandwidth.h"
#include "model/Device.h"

namespace pareto::cli {

void runBenchmark(const BenchmarkOptions& options, const std::string& output, bool json) {
  BenchmarkJob job(options);
  job.run(terminalProgress(), interruptToken());
  recordFinished(job);
  const BenchmarkReport& report = job.report();
  const nlohmann::json result = job.result();
  writeResultFile(output, result);
  printResult(json, result, report.kernels.empty() ? toText(report.decode.front()) : toText(report.kernels.front()));
}

// bench copy: the device's copy bandwidth, measured and stored for predictions (jobs/DeviceBandwidth.h).
void addBenchCopyCommand(CLI::App& bench) {
  struct Args {
    std::string device = "cpu";
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = bench.add_subcommand(
      "copy",
      "Measure the device's copy bandwidth (CPU: a 64 MiB memcpy, best of 4; CUDA: a 2 GiB device-to-device copy, "
      "median of 10) and store it in the experiment database. Predicted tokens/s without kernel benchmarks (`search`, "
      "the workbench's Recipe dock and runs) come from the stored figure, dated, until it is measured again: run this "
      "after the machine changed or when the stored figure was taken under load.");
  cmd->add_option("--device", args->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->callback([args] {
    const c10::Device device = parseDevice(args->device);
    std::unique_ptr<ExperimentStore> store;
    if (!recordingDisabled()) store = std::make_unique<ExperimentStore>(openStore());
    std::optional<StoredCopyBandwidth> before;
    if (store) before = storedCopyBandwidth(*store, deviceDescription(device));
    const StoredCopyBandwidth now = measureCopyBandwidthInto(store.get(), device);
    nlohmann::json result = {{"device", now.device},
                             {"gb_per_second", now.bytesPerSecond / 1e9},
                             {"measured_at", now.measuredAt},
                             {"stored", store != nullptr}};
    std::string text = copyBandwidthSource(now, now.device);
    if (before) {
      result["previous_gb_per_second"] = before->bytesPerSecond / 1e9;
      result["previous_measured_at"] = before->measuredAt;
      text += "\nwas " + copyBandwidthSource(*before, before->device);
    }
    text += store ? "\nstored in " + store->path() + ": predictions on this device use it until it is measured again"
                  : "\nnot stored (--no-record)";
    printResult(args->json, result, text);
  });
}

void addBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand(
      "bench", "Benchmarks (see `bench kernels --help`, `bench decode --help`, `bench copy --help`)");
  bench->require_subcommand(1);
  addBenchDecodeCommand(*bench);
  addBenchCopyCommand(*bench);

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
    BenchmarkOptions options;
    options.device = o.device;
    options.kernels = o;
    runBenchmark(options, args->output, args->json);
  });
}

}  // namespace pareto::cli
