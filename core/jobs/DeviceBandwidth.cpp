#include "jobs/DeviceBandwidth.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "model/Device.h"
#include "runtime/CopyBandwidth.h"
#include "util/Error.h"

namespace pareto {

std::optional<StoredCopyBandwidth> storedCopyBandwidth(const ExperimentStore& store, const std::string& deviceName) {
  for (const BenchmarkRow& r : store.benchmarks(deviceName, kCopyBandwidthKernel))   // newest first
    if (std::isfinite(r.gbps) && r.gbps > 0) return StoredCopyBandwidth{deviceName, r.gbps * 1e9, r.recordedAt};
  return std::nullopt;
}

StoredCopyBandwidth measureCopyBandwidthInto(ExperimentStore* store, const c10::Device& device) {
  StoredCopyBandwidth b;
  b.device = deviceDescription(device);
  b.bytesPerSecond = measureCopyBandwidth(device);
  b.measuredAt = double(std::time(nullptr));
  if (store != nullptr) {
    BenchmarkRow row;
    row.device = b.device;
    row.kernel = kCopyBandwidthKernel;
    row.shape = device.is_cuda() ? "2 GiB device-to-device" : "64 MiB memcpy";
    row.gbps = b.bytesPerSecond / 1e9;
    // A row of no run: a property of the device that predictions read, not a run of the history.
    store->addBenchmarks(std::nullopt, {row});
    // Read back as the store keeps it (GB/s, dated by the store), so that this figure and the one a later start
    // reads are the same double, not two roundings of one measurement.
    if (const auto stored = storedCopyBandwidth(*store, b.device)) b = *stored;
  }
  return b;
}

StoredCopyBandwidth copyBandwidthForPredictions(ExperimentStore* store, const c10::Device& device, bool fresh,
                                        std::string* storeProblem) {
  if (store != nullptr && !fresh)
    if (auto stored = storedCopyBandwidth(*store, deviceDescription(device))) return *stored;
  if (store != nullptr && !store->readOnly()) {
    try {
      return measureCopyBandwidthInto(store, device);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      if (storeProblem != nullptr) *storeProblem = e.what();
    }
  } else if (store != nullptr && storeProblem != nullptr) {
    *storeProblem = store->path() + ": opened read-only";
  }
  return measureCopyBandwidthInto(nullptr, device);
}

std::string copyBandwidthSource(const StoredCopyBandwidth& bandwidth, const std::string& label) {
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.1f", bandwidth.bytesPerSecond / 1e9);
  std::string when = "now";
  if (bandwidth.measuredAt > 0) {
    const std::time_t t = std::time_t(bandwidth.measuredAt);
    std::tm local{};
    localtime_r(&t, &local);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &local);
    when = text;
  }
  return label + " copy bandwidth " + rate + " GB/s measured " + when;
}

DecodeBandwidth decodeBandwidth(const StoredCopyBandwidth& copy, const std::string& label,
                                const ExperimentStore* store) {
  DecodeBandwidth b;
  b.bytesPerSecond = copy.bytesPerSecond;
  b.source = copyBandwidthSource(copy, label);
  if (store == nullptr) return b;
  std::vector<KernelMeasurement> rows;
  for (const BenchmarkRow& r : store->benchmarks())
    if (r.kernel != kCopyBandwidthKernel)
      rows.push_back({r.kernel, r.device, r.shape, r.batch, r.gbps * 1e9, r.recordedAt, r.timeUs * 1e-6});
  b.kernels = selectKernelMeasurements(rows, copy.device);
  b.gemvs = selectGemvMeasurements(rows, copy.device);
  if (b.kernels.empty()) b.source += " (no stored kernel benchmarks of this device)";
  return b;
}

void addStoredGemvs(DecodeBandwidth& b, const ExperimentStore& store, const std::string& deviceName) {
  std::vector<KernelMeasurement> rows;
  for (const BenchmarkRow& r : store.benchmarks())
    rows.push_back({r.kernel, r.device, r.shape, r.batch, r.gbps * 1e9, r.recordedAt, r.timeUs * 1e-6});
  b.gemvs = selectGemvMeasurements(rows, deviceName);
}

namespace {

std::string canonicalFolder(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? path : p.lexically_normal().string();
}

}  // namespace

void addDenseDecodeStep(DecodeBandwidth& b, const ExperimentStore& store, const std::string& deviceName,
                        const std::string& modelDir) {
  const std::string model = canonicalFolder(modelDir);
  static constexpr const char* kContext = " context ";
  for (const BenchmarkRow& r : store.benchmarks("", "decode dense")) {   // newest first
    const size_t at = r.shape.rfind(kContext);
    if (r.batch != 1 || !(r.timeUs > 0) || at == std::string::npos || !benchmarkDeviceMatches(r.device, deviceName))
      continue;
    if (canonicalFolder(r.shape.substr(0, at)) != model) continue;
    b.denseStepSeconds = r.timeUs * 1e-6;
    char text[64];
    std::snprintf(text, sizeof text, "%.3f ms", r.timeUs * 1e-3);
    b.denseStepSource = "the dense model's decode step measured on " + r.device + ": " + text + " a token at" +
                        r.shape.substr(at);
    return;
  }
}

}  // namespace pareto
