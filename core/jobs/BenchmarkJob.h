// Benchmarks as both front ends run them: `pareto-cli bench kernels` and `bench decode` (one call of the kernel
// or decode benchmark, the table printed at the end) and the workbench's Benchmark action (kernels then the
// decode loop, one format at a time so that each result is shown as it is measured, falling back to the CPU
// references with tiny settings where CUDA is not there). One bench run in the store, written once the job has
// finished with at least one measurement: its rows as jobs/BenchmarkRecords.h makes them, and its settings.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "decode/DecodeBenchmark.h"
#include "jobs/Job.h"
#include "runtime/KernelBenchmark.h"

namespace pareto {

// What runs in place of the asked settings on the CPU references (they run eagerly in float64: slow).
struct CpuBenchmarkSettings {
  int kernelLayers = 1;          // layers timed (of the shape's)
  int kernelRuns = 3, kernelWarmup = 1;
  int64_t decodeContext = 8, decodeNewTokens = 4;
  int decodeRuns = 1, decodeWarmup = 0;
  int64_t decodeLayers = 1;      // a synthetic model's layers built and run (0: all)
};

struct BenchmarkOptions {
  std::string modelDir;          // the model benchmarked (its identity is recorded; decode runs it as stored)
  std::string synthetic;         // or a synthetic model (checkpoint/ModelPresets.h name)
  int modelLayers = 0;           // the model's layers (tokens/s of a cut shape, and the record); 0: the shape's
  std::string device = "cuda";   // "cuda", "cuda:N" or "cpu"
  std::optional<KernelBenchOptions> kernels;   // run when given (its device is the job's)
  std::optional<DecodeBenchOptions> decode;    // run when given, after the kernels (its device and model the job's)
  // Without CUDA (no CUDA kernels in the build, no device, or "cpu" asked) run the CPU references with these
  // settings; not given: the settings stand as asked (and CUDA asked without CUDA fails).
  std::optional<CpuBenchmarkSettings> cpu;
  // One benchmark call per format (kernels, and a synthetic model's decode formats), each result reported as it
  // comes; a decode format that fails is reported and the others go on. The device's copy bandwidth is measured
  // first, as the ceiling of every result.
  bool streamed = false;
};

// What will run, once the job has decided where.
struct BenchmarkPlan {
  enum class Where { Cuda, CpuAsked, CpuNoCudaBuild, CpuNoCudaDevice };
  Where where = Where::Cuda;
  bool cpuReference() const { return where != Where::Cuda; }
  std::optional<KernelBenchOptions> kernels;   // as they run
  std::optional<DecodeBenchOptions> decode;
  std::vector<std::string> decodeFormats;      // each decode call's format ("" : the folder as stored)
  int modelLayers = 0;
  double copyGbPerSecond = 0;                  // streamed: measured first; else from the reports
  int expected = 0;                            // results to expect (kernel formats and decode calls)
};

struct BenchmarkReport {
  BenchmarkPlan plan;
  std::vector<KernelBenchReport> kernels;      // one per call
  std::vector<DecodeBenchReport> decode;       // one per call that ran
  std::vector<std::pair<std::string, std::string>> decodeFailures;   // streamed: format ("" folder), message
  std::vector<BenchmarkRow> rows;              // every available result, in order
  std::string device;                          // as the benchmarks describe it
};

struct BenchmarkCallbacks {
  std::function<void(const BenchmarkPlan&)> planned;   // before anything is measured
  std::function<void(const KernelBenchReport&, const KernelBenchResult&)> kernel;
  std::function<void(const DecodeBenchReport&, const DecodeBenchResult&)> decode;
  std::function<void(const std::string& format, const std::string& message)> decodeFailed;
  std::function<void(int done)> callDone;              // results (calls) done so far, of plan.expected
};

class BenchmarkJob : public RecordedJob {
 public:
  explicit BenchmarkJob(BenchmarkOptions options, BenchmarkCallbacks callbacks = {});

  Recording recording() const override { return Recording::OnceFinished; }
  bool hasResults() const override { return !report_.rows.empty(); }
  RunStart runStart() const override;
  // progress: each call's own, scaled into the whole job's fraction.
  void run(const ProgressCallback& progress, const CancelToken& cancel) override;
  // The single kernel or decode report as `bench kernels --json` / `bench decode --json` print it (the first
  // report of each kind that ran, kernels first, under "kernels" and "decode" when both ran).
  nlohmann::json result() const override;
  // The rows (and no metrics: a benchmark's numbers are its rows).
  void record(RunResults& results) const override;
  const BenchmarkReport& report() const { return report_; }

 private:
  BenchmarkPlan plan() const;

  BenchmarkOptions options_;
  BenchmarkCallbacks callbacks_;
  BenchmarkReport report_;
};

}  // namespace pareto
