// `bench kernels`: the linear layers of a model shape (e.g. Llama-3.1-8B: 32 layers × qkv, o, gate+up, down),
// every weight distinct so nothing is served from L2, run back to back as one decode step would, for dense
// cuBLAS fp16, cuSPARSELt 2:4 (where LibTorch has it) and each packed-weight kernel. On CUDA one step is
// captured in a CUDA graph and replayed (median of `runs` replays after warm-up); on the CPU the same step runs
// through the float64 references (labelled as such: it shows the code works, not how fast a GPU is).
//
// Asserts nothing: it measures and reports. Each result: ms per step, bytes read per step (weights as stored in
// the kernel layout, activations, outputs), GB/s, the fraction of the measured device-to-device copy
// bandwidth, and the speedup over dense in the same run.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "util/Progress.h"

namespace pareto {


struct LinearShape {
  std::string name;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features
};

struct ModelShape {
  std::string name;
  int layers = 0;
  std::vector<LinearShape> linears;  // one layer's linears, in execution order
};

// One decode step's linears of a Llama-family layer with qkv and gate+up fused, as serving engines (and the decode
// runtime) run them.
ModelShape decodeStepShape(const std::string& name, int layers, int64_t hidden, int64_t intermediate, int64_t heads,
                           int64_t kvHeads, int64_t headDim);

// Built-in shapes by name (the models of checkpoint/ModelPresets.h: "llama-3.1-8b", "llama-3.2-1b", "qwen3-14b", ...),
// or a JSON file
// {"name": ..., "layers": N, "linears": [{"name": "qkv", "rows": 6144, "cols": 4096}, ...]}.
// Throws InputError naming the file or listing the known names.
ModelShape modelShapeByName(const std::string& nameOrFile);
std::vector<std::string> knownModelShapes();

// Kernel formats the benchmark knows: "dense", "cusparselt-2:4", "bitmask-N:M", "int8-channel", "int4-g128",
// "spqr-3bit", "bitmask-2:4+int4-g128" (and int4-g32/g64, spqr-2bit/4bit, bitmask-N:M+int4-gG variants).
std::vector<std::string> defaultKernelFormats();

struct KernelBenchOptions {
  ModelShape shape;
  std::vector<std::string> formats = defaultKernelFormats();
  std::vector<int> batches = {1};
  std::string device = "cuda";   // "cuda" or "cpu"
  int runs = 50;                 // timed replays per (format, batch); the median is reported
  int warmup = 5;
  uint64_t seed = 0;
  double spqrOutlierFraction = 0.01;
  // Also time each linear shape alone: its GEMVs of every layer back to back in their own graph, reported as
  // µs a GEMV (which shape a format loses its time on).
  bool perShape = false;
};

struct KernelBenchResult {
  std::string format;
  int batch = 1;
  bool available = true;
  std::string note;               // why a format is unavailable, or what it ran on
  double msPerStep = 0;           // median
  double msMin = 0, msMax = 0;
  double bytesPerStep = 0;
  double gbPerSecond = 0;
  double fractionOfCopy = 0;      // gbPerSecond / copy bandwidth
  double speedupOverDense = 0;    // dense ms / this ms, same batch
  double bitsPerWeight = 0;       // kernel-layout bytes · 8 / weights
  // With perShape: µs a GEMV of each linear shape timed alone (median replay / layers), in the shape's order.
  std::vector<std::pair<std::string, double>> usPerGemvOfShape;
};

struct KernelBenchReport {
  std::string device;             // e.g. "NVIDIA H200 (132 SMs)" or "cpu (float64 references)"
  std::string shape;
  std::vector<LinearShape> linears;   // the shape's linears (KernelBenchResult::usPerGemvOfShape follows them)
  int64_t weightsPerStep = 0;
  double copyGbPerSecond = 0;     // device-to-device copy: (read + write) bytes / time
  std::vector<KernelBenchResult> results;
};

// "NVIDIA H200 (132 SMs)" for the current CUDA device. Throws InputError without CUDA.
std::string cudaDeviceLabel();

KernelBenchReport runKernelBenchmark(const KernelBenchOptions& options, const ProgressCallback& progress,
                                     const CancelToken& cancel);


nlohmann::json toJson(const KernelBenchReport& report);
std::string toText(const KernelBenchReport& report);  // the table, last

}  // namespace pareto
