// `bench decode`: tokens per second of the real decode loop (decode/DecodeSession.h), for a model folder (dense
// or a `compress` output, run in its stored formats) or a synthetic model (a published configuration with
// random weights in each requested format). On CUDA the step is captured once in a CUDA graph; each timed run
// replays it `newTokens` times from the same starting context (median of `runs` runs after warm-up). On the CPU
// the same loop runs eagerly through the kernels' references: slow, but it is how CI exercises the code.
//
// A step produces one token for each of `batch` sequences. Reported per (format, batch, context):
//   tokens_per_second     batch · newTokens / median run time
//   ms_per_token          median run time / newTokens (what each sequence waits per token)
//   bytes_per_step        weights read once per step (as laid out for their kernels, output head included)
//                         + KV cache read, averaged over the run's steps (every row attends to all its slots)
//   bytes_per_token       bytes_per_step / batch
//   gb_per_s              bytes_per_step / (ms_per_token)
//   fraction_of_copy_bandwidth   gb_per_s / measured device-to-device copy bandwidth
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "util/Progress.h"

namespace pareto {

struct DecodeBenchOptions {
  std::string modelDir;                       // a model folder, or
  std::string synthetic;                      // a checkpoint/ModelPresets.h name
  std::vector<std::string> formats = {"dense"};   // synthetic only (runtime/PackedLinear.h names)
  std::string headFormat = "dense";           // synthetic only: the output head's format, for every --format
  std::vector<int64_t> contexts = {512};
  int64_t newTokens = 256;
  std::vector<int64_t> batches = {1};
  std::string device = "cuda";                // "cuda" or "cpu"
  std::string dtype;                          // "" : float16 on CUDA, bfloat16 on the CPU
  int runs = 5;
  int warmup = 1;
  int64_t layers = 0;                         // synthetic: 0 = the configuration's
  uint64_t seed = 0;
  double spqrOutlierFraction = 0.01;
  bool useGraph = true;                       // CUDA only
  bool breakdown = false;                     // also time each part of the step alone (see DecodeSession::Part)
  // How each step picks its token: greedy when temperature is 0, otherwise sampled on the device with these
  // (DecodeSession::setSampling; top-k 0 and top-p 1 cut nothing).
  double temperature = 0;
  int64_t topK = 0;
  double topP = 1.0;
};

struct DecodeBenchResult {
  std::string format;
  int64_t batch = 1, context = 0, newTokens = 0;
  bool available = true;
  std::string note;
  double tokensPerSecond = 0;
  double msPerToken = 0, msPerTokenMin = 0, msPerTokenMax = 0;
  double bytesPerStep = 0, bytesPerToken = 0;
  double gbPerSecond = 0;
  double fractionOfCopy = 0;
  double speedupOverDense = 0;   // tokens/s over the dense result of the same batch and context (synthetic)
  double bitsPerWeight = 0;      // linear layers as laid out for their kernels
  // With breakdown: ms per step of each part alone (linears, attention, norms+activation, head), same loop.
  std::vector<std::pair<std::string, double>> partMs;
};

struct DecodeBenchReport {
  std::string device;
  std::string model;              // folder or preset name (+ layers when cut)
  std::string mode;               // "CUDA graph", "eager (CUDA)" or "eager (CPU references)"
  std::string sampling;           // "greedy" or "temperature T, top-k K, top-p P"
  double copyGbPerSecond = 0;
  std::vector<std::string> notes; // packed modules of a folder that run dense
  std::vector<DecodeBenchResult> results;
};

// Throws InputError for bad options; Cancelled when the token is cancelled between runs.
DecodeBenchReport runDecodeBenchmark(const DecodeBenchOptions& options, const ProgressCallback& progress,
                                     const CancelToken& cancel);

nlohmann::json toJson(const DecodeBenchReport& report);
std::string toText(const DecodeBenchReport& report);   // the table, last

}  // namespace pareto
