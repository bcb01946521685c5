#include "jobs/BenchmarkRecords.h"

namespace pareto {

BenchmarkRow benchmarkRow(const KernelBenchReport& report, const KernelBenchResult& r) {
  BenchmarkRow row;
  row.device = report.device;
  row.kernel = r.format;
  row.shape = report.shape + " step";
  row.batch = r.batch;
  row.timeUs = r.msPerStep * 1e3;
  row.gbps = r.gbPerSecond;
  return row;
}

BenchmarkRow benchmarkRow(const DecodeBenchReport& report, const DecodeBenchResult& r) {
  BenchmarkRow row;
  row.device = report.device;
  row.kernel = "decode " + r.format;
  row.shape = report.model + " context " + std::to_string(r.context);
  row.batch = r.batch;
  row.timeUs = r.msPerToken * 1e3;
  row.gbps = r.gbPerSecond;
  return row;
}

}  // namespace pareto
