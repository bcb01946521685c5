// The copy bandwidth predictions come from (jobs/DeviceBandwidth.h): measured once per device and kept in the
// experiment store, read back by every later prediction with its date, measured anew only when asked; a store
// that cannot be written still gives a (measured, unstored) figure and says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <ctime>

#include "SharedData.h"
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

}  // namespace
}  // namespace pareto
