// How benchmark results become rows of the run store (store/ExperimentStore.h BenchmarkRow), one rule for
// `pareto-cli bench ...` and the workbench's Benchmark action, so that the benchmark code itself (runtime/,
// decode/) knows nothing of the store.
#pragma once

#include "decode/DecodeBenchmark.h"
#include "runtime/KernelBenchmark.h"
#include "store/ExperimentStore.h"

namespace pareto {

// kernel = the format, shape "<shape> step", time = ms per step (µs), GB/s as measured.
BenchmarkRow benchmarkRow(const KernelBenchReport& report, const KernelBenchResult& result);
// With per-shape timing: one row per linear shape, kernel = the format, shape gemvShapeText (compress/
// RecipeEstimate.h: "gemv 6144x4096 (llama-3.1-8b qkv)"), time = µs a GEMV, GB/s NaN (not computed per shape).
std::vector<BenchmarkRow> gemvRows(const KernelBenchReport& report, const KernelBenchResult& result);
// kernel "decode <format>", shape "<model> context N", time = ms per step (µs), GB/s as measured.
BenchmarkRow benchmarkRow(const DecodeBenchReport& report, const DecodeBenchResult& result);

}  // namespace pareto
