// What a recipe will cost and buy before it runs: the bytes every module will store (hence bits per weight and
// model size) and the tokens per second batch-1 decode can reach when it is bound by reading those bytes.
//
// Bytes come from the model's tensor shapes (ModelSummary, headers only) and the storage layout each module
// will get, decided by the module plan the compress job follows (compress/ModulePlan.h), and counted with the
// formats' own byte-count functions (formats/PackedBlocks.h, spqrStoredBits):
//   N:M pruning of a module whose columns are a multiple of 32   → bitmask N:M (formats/BitmaskNMWeight.h), its
//                                                                   kept values stored as fp values, or as an
//                                                                   integer grid (rtn, gptq) or SpQR over them
//   rtn, gptq (also after unstructured pruning)                  → packed integer grid (formats/QuantGroupWeight.h),
//                                                                   plus the int32 column order with act-order
//   spqr (also after unstructured pruning)                       → SpQR (formats/SpqrWeight.h)
//   otherwise (unstructured pruning alone, skipped modules)      → the checkpoint's dtype, dense
// so for every recipe the job accepts, the estimated bytes are the bytes it writes (tests compare the two).
// SpQR with an outlier ratio keeps that share of the weights pruning kept (N:M: N of every M; unstructured: as
// the pruning method counts them, compress/PruneMask.h), so its outlier count is exact.
// SpQR with an outlier threshold instead of a ratio cannot know its outlier count before running; it is then
// estimated with no outliers and says so in `notes`.
//
// Tokens per second: batch-1 decode reads every weight of the blocks and the output head once per token (the
// embedding only one row, ignored; the KV cache, small at short contexts, ignored), so a memory-bound decode
// runs at most at bandwidth / bytes per token. The bandwidth comes with a label saying where it is from, shown
// next to the number:
//   - stored kernel benchmarks of this device (`pareto-cli bench kernels`, the workbench's Benchmark action):
//     each module's bytes are read at the GB/s its kernel format achieved (ModuleEstimate::kernel, the
//     benchmark's format names), everything else (output head, norms) at the dense kernel's GB/s; used when the
//     measurements cover dense and every format the recipe decodes with;
//   - otherwise one bandwidth for every byte (a measured copy bandwidth): "estimate: bytes / bandwidth".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pareto {

struct Recipe;
struct ModelSummary;

struct ModuleEstimate {
  std::string module;      // "model.layers.0.mlp.up_proj"
  std::string format;      // formats/WeightFormat.h: "dense", "bitmask-2:4+int4-g128", "int3-g128", "spqr-3bit"
  // The kernel format of runtime/KernelBenchmark.h that decodes this layout ("dense", "bitmask-2:4",
  // "int4-g128", "int8-channel", "spqr-3bit", "bitmask-2:4+int4-g128"); "" when no benchmarked kernel runs it
  // (grids of 2, 3, 5-7 bits, per-tensor grids, N:M with int8 or SpQR).
  std::string kernel;
  int64_t weights = 0;     // rows · cols
  uint64_t bytes = 0;      // everything the format stores
  double bitsPerWeight() const { return weights ? 8.0 * double(bytes) / double(weights) : 0.0; }
};

// One stored kernel benchmark row (store/ExperimentStore.h BenchmarkRow, as `bench kernels` records it) with
// the time it was recorded.
struct KernelMeasurement {
  std::string kernel;          // the benchmark's format name: "bitmask-2:4"
  std::string device;          // as recorded: "NVIDIA H200 (132 SMs)", "cpu (float64 references ...)"
  std::string shape;           // "llama-3.1-8b step"
  int64_t batch = 1;
  double bytesPerSecond = 0;   // achieved bandwidth (the row's GB/s · 1e9); 0 or NaN: not usable
  double recordedAt = 0;       // seconds since the Unix epoch; 0: unknown
  double secondsPerCall = 0;   // the row's time (a step of the shape's linears, one GEMV, or one decoded token)
};

// The shape text of a benchmark row that times one GEMV of one linear shape alone (`bench kernels --per-shape`):
// "gemv 6144x4096 (llama-3.1-8b qkv)". parseGemvShape reads rows and cols back; false for other shapes.
std::string gemvShapeText(int64_t rows, int64_t cols, const std::string& what);
bool parseGemvShape(const std::string& shape, int64_t& rows, int64_t& cols);

// Whether a benchmark row recorded on `recordedDevice` ("NVIDIA H200 (132 SMs)") measured the device called
// `deviceName` (model/Device.h deviceDescription: "NVIDIA H200"). CPU rows never match: on the CPU `bench
// kernels` times the kernels' float64 references, which say nothing about decode speed.
bool benchmarkDeviceMatches(const std::string& recordedDevice, const std::string& deviceName);

// The measurements usable for predicting batch-1 decode on `deviceName`: batch 1, a positive finite bandwidth,
// the device matching, and the newest row per kernel (rows are given newest first, as the store lists them).
std::vector<KernelMeasurement> selectKernelMeasurements(const std::vector<KernelMeasurement>& newestFirst,
                                                        const std::string& deviceName);

// The per-GEMV rows usable for predicting batch-1 decode on `deviceName` (parseGemvShape's shapes, batch 1, a
// positive time, the device matching), the newest per kernel and shape.
std::vector<KernelMeasurement> selectGemvMeasurements(const std::vector<KernelMeasurement>& newestFirst,
                                                      const std::string& deviceName);

// Where a bandwidth figure comes from, shown with every tokens/s predicted from it.
struct DecodeBandwidth {
  double bytesPerSecond = 0;   // 0: unknown (no tokens/s is predicted unless the kernels cover the recipe)
  std::string source;          // e.g. "measured CPU copy bandwidth (memcpy, no stored kernel benchmarks)"
  // Kernel benchmarks of this device (selectKernelMeasurements); preferred over bytesPerSecond when they cover
  // dense and every kernel format of the recipe.
  std::vector<KernelMeasurement> kernels;
  // Single GEMVs timed alone on this device (selectGemvMeasurements): what the search's time model
  // (search/DecodeTimeModel.h) prefers, since a small GEMV's time is mostly not its bytes.
  std::vector<KernelMeasurement> gemvs;
  // The measured batch-1 decode step of the dense model a prediction is about (`bench decode --model`), in
  // seconds, and where it comes from; 0 when none is stored. It carries everything a step does besides the
  // linears (attention, norms, head, launches), which bytes alone do not.
  double denseStepSeconds = 0;
  std::string denseStepSource;
};

struct RecipeEstimate {
  std::vector<ModuleEstimate> modules;   // the block linears, in checkpoint (name) order
  int64_t parameters = 0;                // every stored weight of the model
  uint64_t modelBytes = 0;               // every weight byte after compression
  uint64_t denseModelBytes = 0;          // the same, as the checkpoint stores it now
  double linearBitsPerWeight = 0;        // over the block linears (CompressReport::linearBitsPerWeight)
  double denseLinearBitsPerWeight = 0;   // the same, as the checkpoint stores them now
  double modelBitsPerWeight = 0;         // over every weight (CompressReport::modelBitsPerWeight)
  double denseModelBitsPerWeight = 0;
  uint64_t bytesPerToken = 0;            // weight bytes one batch-1 decode step reads
  uint64_t denseBytesPerToken = 0;
  double tokensPerSecond = 0;            // bandwidth / bytesPerToken; 0 when the bandwidth is unknown
  double denseTokensPerSecond = 0;
  // Where the bandwidth came from: with kernel benchmarks "bench kernels on NVIDIA H200 (132 SMs), 2025-03-01
  // (dense 3890 GB/s, bitmask-2:4 3012 GB/s)", otherwise DecodeBandwidth::source.
  std::string bandwidthSource;
  bool fromKernelBenchmarks = false;     // tokens/s from measured kernel bandwidths (else bytes / one bandwidth)
  // The kernel formats this recipe decodes with, "dense" first (the output head and unpacked modules), then
  // the modules' kernels in first-seen order; modules without a benchmarked kernel add their layout name to
  // `unbenchmarkable` instead.
  std::vector<std::string> kernels;
  std::vector<std::string> unbenchmarkable;
  // Kernels the measurements lack (when kernel measurements were given but do not cover the recipe).
  std::vector<std::string> unmeasuredKernels;
  // Modules the compress job would refuse with this recipe (e.g. "model.layers.0.mlp.down_proj: 512 input
  // columns are not a multiple of the group size 384"), and caveats of the estimate itself.
  std::vector<std::string> problems;
  std::vector<std::string> notes;
};

// Throws InputError when `model` is already a compressed folder (the job compresses dense models only).
RecipeEstimate estimateRecipe(const Recipe& recipe, const ModelSummary& model, const DecodeBandwidth& bandwidth);

// Tokens per second of the model's linear layers alone when a benchmark step of `benchLayers` layers took
// msPerStep: the step scaled to the model's `modelLayers` (the step's weights are the model's per-layer linears,
// so its time grows with the layer count). 0 for non-positive inputs.
double linearStepTokensPerSecond(double msPerStep, int benchLayers, int64_t modelLayers);

}  // namespace pareto
