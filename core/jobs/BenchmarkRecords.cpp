#include "jobs/BenchmarkRecords.h"

#include <algorithm>

#include "compress/RecipeEstimate.h"

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

std::vector<BenchmarkRow> gemvRows(const KernelBenchReport& report, const KernelBenchResult& r) {
  std::vector<BenchmarkRow> rows;
  for (const auto& [name, us] : r.usPerGemvOfShape) {
    const auto shape = std::find_if(report.linears.begin(), report.linears.end(),
                                    [&](const LinearShape& l) { return l.name == name; });
    if (shape == report.linears.end() || !(us > 0)) continue;
    BenchmarkRow row;
    row.device = report.device;
    row.kernel = r.format;
    row.shape = gemvShapeText(shape->rows, shape->cols, report.shape + " " + name);
    row.batch = r.batch;
    row.timeUs = us;
    rows.push_back(row);
  }
  return rows;
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
