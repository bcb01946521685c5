#include "jobs/BenchmarkJob.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/cuda.h>

#include <algorithm>

#include "jobs/BenchmarkRecords.h"
#include "jobs/RunRecords.h"
#include "model/Device.h"
#include "runtime/CopyBandwidth.h"
#include "util/Error.h"

namespace pareto {
namespace {

// Whether this build has the CUDA kernels (runtime/KernelBenchmark.h refuses "cuda" without them).
#ifdef PARETO_WITH_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

}  // namespace

BenchmarkJob::BenchmarkJob(BenchmarkOptions options, BenchmarkCallbacks callbacks)
    : options_(std::move(options)), callbacks_(std::move(callbacks)) {}

BenchmarkPlan BenchmarkJob::plan() const {
  BenchmarkPlan p;
  const bool wantsCuda = options_.device.rfind("cuda", 0) == 0;
  if (options_.cpu && !kCudaBuild)
    p.where = BenchmarkPlan::Where::CpuNoCudaBuild;
  else if (options_.cpu && !torch::cuda::is_available())
    p.where = BenchmarkPlan::Where::CpuNoCudaDevice;
  else if (!wantsCuda)
    p.where = BenchmarkPlan::Where::CpuAsked;
  const bool cuda = !p.cpuReference();
  const CpuBenchmarkSettings* cpu = !cuda && options_.cpu ? &*options_.cpu : nullptr;
  p.modelLayers = options_.modelLayers > 0 ? options_.modelLayers : options_.kernels ? options_.kernels->shape.layers : 0;
  if (options_.kernels) {
    KernelBenchOptions k = *options_.kernels;
    k.device = cuda ? "cuda" : "cpu";
    if (cpu != nullptr) {
      k.runs = cpu->kernelRuns;
      k.warmup = cpu->kernelWarmup;
      k.shape.layers = std::max(1, std::min(k.shape.layers, cpu->kernelLayers));
    }
    p.kernels = k;
    p.expected += options_.streamed ? int(k.formats.size()) : 1;
  }
  if (options_.decode) {
    DecodeBenchOptions d = *options_.decode;
    d.modelDir = options_.modelDir;
    d.synthetic = options_.synthetic;
    d.device = cuda ? "cuda" : "cpu";
    if (cpu != nullptr) {
      d.contexts = {cpu->decodeContext};
      d.newTokens = cpu->decodeNewTokens;
      d.runs = cpu->decodeRuns;
      d.warmup = cpu->decodeWarmup;
      if (!d.synthetic.empty() && cpu->decodeLayers > 0)
        d.layers = std::min<int64_t>(cpu->decodeLayers, p.modelLayers > 0 ? p.modelLayers : cpu->decodeLayers);
    }
    p.decode = d;
    // "": one call as the options say (a folder runs as stored).
    if (options_.streamed && !d.synthetic.empty())
      p.decodeFormats = d.formats;
    else
      p.decodeFormats = {""};
    p.expected += int(p.decodeFormats.size());
  }
  return p;
}

void BenchmarkJob::run(const ProgressCallback& progress, const CancelToken& cancel) {
  report_ = {};
  BenchmarkPlan p = plan();
  const bool cuda = !p.cpuReference();
  std::optional<c10::DeviceGuard> guard;
  if (cuda && options_.device != "cuda") guard.emplace(parseDevice(options_.device));
  // The ceiling line of a streamed session, before its first result: the device's copy bandwidth.
  if (options_.streamed) p.copyGbPerSecond = measureCopyBandwidth(parseDevice(cuda ? options_.device : "cpu")) / 1e9;
  report_.plan = p;
  if (callbacks_.planned) callbacks_.planned(p);

  int done = 0;
  const double total = double(std::max(1, p.expected));
  const ProgressCallback scaled = [&](const ProgressUpdate& u) {
    if (progress) progress({u.stage, (double(done) + std::clamp(u.fraction, 0.0, 1.0)) / total, u.message});
  };
  auto callDone = [&] {
    ++done;
    if (callbacks_.callDone) callbacks_.callDone(done);
  };

  if (p.kernels) {
    std::vector<std::vector<std::string>> calls;
    if (options_.streamed)
      for (const std::string& f : p.kernels->formats) calls.push_back({f});
    else
      calls.push_back(p.kernels->formats);
    for (const auto& formats : calls) {
      if (cancel.isCancelled()) throw Cancelled();
      KernelBenchOptions k = *p.kernels;
      k.formats = formats;
      KernelBenchReport r = runKernelBenchmark(k, scaled, cancel);
      if (cancel.isCancelled()) throw Cancelled();   // asked while this format was timed: it is not shown either
      report_.device = r.device;
      for (const KernelBenchResult& result : r.results) {
        if (result.available) {
          report_.rows.push_back(benchmarkRow(r, result));
          for (BenchmarkRow& row : gemvRows(r, result)) report_.rows.push_back(std::move(row));
        }
        if (callbacks_.kernel) callbacks_.kernel(r, result);
      }
      report_.kernels.push_back(std::move(r));
      callDone();
    }
  }

  for (const std::string& format : p.decodeFormats) {
    if (cancel.isCancelled()) throw Cancelled();
    DecodeBenchOptions d = *p.decode;
    if (!format.empty()) d.formats = {format};
    DecodeBenchReport r;
    std::string failure;
    if (!options_.streamed) {
      r = runDecodeBenchmark(d, scaled, cancel);
    } else {
      // A folder the decode runtime cannot load, or a format it cannot run here: reported, the rest still count.
      try {
        r = runDecodeBenchmark(d, scaled, cancel);
      } catch (const Cancelled&) {
        throw;
      } catch (const c10::Error& e) {
        failure = e.what_without_backtrace();
      } catch (const std::exception& e) {
        failure = e.what();
      }
    }
    if (cancel.isCancelled()) throw Cancelled();
    if (!failure.empty()) {
      report_.decodeFailures.emplace_back(format, failure);
      if (callbacks_.decodeFailed) callbacks_.decodeFailed(format, failure);
      callDone();
      continue;
    }
    if (report_.device.empty()) report_.device = r.device;
    for (const DecodeBenchResult& result : r.results) {
      if (result.available) report_.rows.push_back(benchmarkRow(r, result));
      if (callbacks_.decode) callbacks_.decode(r, result);
    }
    report_.decode.push_back(std::move(r));
    callDone();
  }
}

RunStart BenchmarkJob::runStart() const {
  const BenchmarkPlan& p = report_.plan;
  double copy = p.copyGbPerSecond;
  for (const auto& r : report_.kernels)
    if (copy <= 0) copy = r.copyGbPerSecond;
  for (const auto& r : report_.decode)
    if (copy <= 0) copy = r.copyGbPerSecond;
  nlohmann::json s = {{"benchmark", p.kernels && p.decode ? "kernels+decode" : p.kernels ? "kernels" : "decode"},
                      {"copy_gb_per_s", copy},
                      {"cpu_reference", p.cpuReference()}};
  if (!options_.synthetic.empty()) s["synthetic"] = options_.synthetic;
  if (p.kernels) {
    s["shape"] = p.kernels->shape.name;
    s["layers"] = p.kernels->shape.layers;
    s["model_layers"] = p.modelLayers;
    s["formats"] = p.kernels->formats;
    s["batches"] = p.kernels->batches;
    s["runs"] = p.kernels->runs;
  }
  if (p.decode) {
    const DecodeBenchOptions& d = *p.decode;
    nlohmann::json decode = {{"formats", !d.synthetic.empty() ? nlohmann::json(d.formats) : nlohmann::json::array({"stored"})},
                             {"context", d.contexts.size() == 1 ? nlohmann::json(d.contexts.front())
                                                                : nlohmann::json(d.contexts)},
                             {"batches", d.batches},
                             {"new_tokens", d.newTokens},
                             {"runs", d.runs},
                             {"warmup", d.warmup},
                             {"layers", d.layers}};
    if (!report_.decode.empty()) {
      decode["model"] = report_.decode.front().model;
      decode["mode"] = report_.decode.front().mode;
      decode["sampling"] = report_.decode.front().sampling;
    }
    s["decode"] = decode;
  }
  return makeRunStart("bench", options_.modelDir, report_.device, s);
}

nlohmann::json BenchmarkJob::result() const {
  if (report_.kernels.size() == 1 && report_.decode.empty()) return toJson(report_.kernels.front());
  if (report_.decode.size() == 1 && report_.kernels.empty()) return toJson(report_.decode.front());
  nlohmann::json j = nlohmann::json::object();
  for (const auto& r : report_.kernels) j["kernels"].push_back(toJson(r));
  for (const auto& r : report_.decode) j["decode"].push_back(toJson(r));
  return j;
}

void BenchmarkJob::record(RunResults& results) const {
  results.benchmarks.insert(results.benchmarks.end(), report_.rows.begin(), report_.rows.end());
}

}  // namespace pareto
