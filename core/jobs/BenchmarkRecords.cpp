#include "jobs/BenchmarkRecords.h"

namespace pareto {

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
