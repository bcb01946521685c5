// The copy bandwidth predictions come from (jobs/DeviceBandwidth.h): measured once per device and kept in the
// experiment store, read back by every later prediction with its date, measured anew only when asked; a store
// that cannot be written still gives a (measured, unstored) figure and says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <ctime>

#include "SharedData.h"
#include "jobs/BenchmarkRecords.h"
#include "jobs/DeviceBandwidth.h"
#include "store/ExperimentStore.h"

namespace pareto {
namespace {

using ::testing::HasSubstr;

const c10::Device kCpu(c10::kCPU);

TEST(DeviceBandwidth, MeasuredOnceStoredAndReadBackUntilMeasuredAgain) {
  ExperimentStore store(test::scratchDir("device-bandwidth") + "/pareto.db");
  EXPECT_FALSE(storedCopyBandwidth(store, "cpu").has_value());
  const StoredCopyBandwidth first = copyBandwidthForPredictions(&store, kCpu);
  EXPECT_EQ(first.device, "cpu");
  EXPECT_GT(first.bytesPerSecond, 1e8);
  EXPECT_NEAR(first.measuredAt, double(std::time(nullptr)), 60);
  // Stored as a benchmark row of the device, not as a run of the history.
  EXPECT_TRUE(store.listRuns().empty());
  ASSERT_EQ(store.benchmarks("cpu", kCopyBandwidthKernel).size(), 1u);

  // A figure stored before (another session, or pareto-cli bench copy) is what every later prediction uses.
  store.addBenchmarks(std::nullopt, {{"cpu", kCopyBandwidthKernel, "64 MiB memcpy", 1, 0.0, 1234.5}});
  const StoredCopyBandwidth again = copyBandwidthForPredictions(&store, kCpu);
  EXPECT_DOUBLE_EQ(again.bytesPerSecond, 1234.5e9);
  const DecodeBandwidth b = decodeBandwidth(again, "CPU", &store);
  EXPECT_DOUBLE_EQ(b.bytesPerSecond, 1234.5e9);
  EXPECT_THAT(b.source, HasSubstr("CPU copy bandwidth 1234.5 GB/s measured 20"));
  EXPECT_THAT(b.source, HasSubstr("no stored kernel benchmarks"));
  EXPECT_EQ(store.benchmarks("cpu", kCopyBandwidthKernel).size(), 2u) << "nothing was measured";

  // Measured again on request: the new figure is stored and read from then on.
  const StoredCopyBandwidth fresh = copyBandwidthForPredictions(&store, kCpu, /*fresh=*/true);
  EXPECT_NE(fresh.bytesPerSecond, 1234.5e9);
  EXPECT_DOUBLE_EQ(storedCopyBandwidth(store, "cpu")->bytesPerSecond, fresh.bytesPerSecond);
  EXPECT_EQ(store.benchmarks("cpu", kCopyBandwidthKernel).size(), 3u);
}

TEST(DeviceBandwidth, AStoreThatCannotBeWrittenGivesAMeasuredFigureAndSaysWhy) {
  const std::string path = test::scratchDir("device-bandwidth-ro") + "/pareto.db";
  { ExperimentStore create(path); }
  const ExperimentStore reader = ExperimentStore::openForReading(path);
  std::string problem;
  const StoredCopyBandwidth b =
      copyBandwidthForPredictions(const_cast<ExperimentStore*>(&reader), kCpu, false, &problem);
  EXPECT_GT(b.bytesPerSecond, 1e8);
  EXPECT_THAT(problem, HasSubstr("read-only"));
  EXPECT_FALSE(storedCopyBandwidth(reader, "cpu").has_value());
  // No store at all: measured, nothing to say.
  EXPECT_GT(copyBandwidthForPredictions(nullptr, kCpu).bytesPerSecond, 1e8);
}

// What the search's time model reads besides the step bandwidths: single GEMVs timed alone and the model's own
// measured decode step, the newest of each for the device.
TEST(DeviceBandwidth, SingleGemvsAndTheModelsDecodeStepAreReadForTheDevice) {
  ExperimentStore store(test::scratchDir("device-bandwidth-gemv") + "/pareto.db");
  // `bench kernels --per-shape` rows, as the benchmark job records them.
  KernelBenchReport report;
  report.device = "NVIDIA H200 (132 SMs)";
  report.shape = "ref-small";
  report.linears = {{"qkv", 2304, 768}, {"o", 768, 768}};
  KernelBenchResult dense;
  dense.format = "dense";
  dense.usPerGemvOfShape = {{"qkv", 6.5}, {"o", 5.0}};
  const std::vector<BenchmarkRow> rows = gemvRows(report, dense);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].shape, "gemv 2304x768 (ref-small qkv)");
  EXPECT_DOUBLE_EQ(rows[0].timeUs, 6.5);
  store.addBenchmarks(std::nullopt, rows);
  const std::string model = test::scratchDir("device-bandwidth-gemv") + "/model";
  store.addBenchmarks(std::nullopt, {{"NVIDIA H200 (132 SMs)", "decode dense", model + " context 512", 1, 250.0, 3000},
                                     {"NVIDIA H200 (132 SMs)", "decode dense", model + " context 512", 8, 300.0, 3000},
                                     {"NVIDIA H200 (132 SMs)", "decode dense", "/elsewhere context 512", 1, 90.0, 3000},
                                     {"NVIDIA H100 (132 SMs)", "decode dense", model + " context 512", 1, 80.0, 3000}});

  DecodeBandwidth b;
  addStoredGemvs(b, store, "NVIDIA H200");
  ASSERT_EQ(b.gemvs.size(), 2u);
  EXPECT_DOUBLE_EQ(b.gemvs[0].secondsPerCall + b.gemvs[1].secondsPerCall, 11.5e-6);
  addDenseDecodeStep(b, store, "NVIDIA H200", model + "/../model");   // the same folder, spelled otherwise
  EXPECT_DOUBLE_EQ(b.denseStepSeconds, 250e-6);
  EXPECT_THAT(b.denseStepSource, HasSubstr("0.250 ms a token at context 512"));
  DecodeBandwidth none;
  addDenseDecodeStep(none, store, "NVIDIA H200", model + "-other");
  EXPECT_EQ(none.denseStepSeconds, 0);
}

}  // namespace
}  // namespace pareto
