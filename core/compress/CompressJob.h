// `pareto-cli compress`: load a model, calibrate as the recipe says, run the sequential pass with the recipe's
// solvers, and write an output folder that every model command can open (config and tokenizer copied, weights
// in safetensors with packed formats as tensors, pareto.json manifest). The folder is written under a temporary
// name and renamed at the end, so a failed or cancelled run leaves nothing behind.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compress/Recipe.h"
#include "model/Device.h"
#include "model/MemoryBudget.h"
#include "util/Progress.h"

namespace pareto {

class ProcessGroup;

struct CompressOptions {
  std::string modelDir;
  std::string recipePath;  // read by the runCompress that takes no Recipe
  std::string outDir;
  RuntimeOptions runtime;
  bool overwrite = false;   // replace an existing output folder (only once the new one is complete)
  int64_t batch = 0;        // calibration sequences per forward; 0 picks
  // Continue the interrupted run to outDir from its last finished layer (compress/CompressResume.h); the
  // model, recipe, device, dtype and batch must be the interrupted run's.
  bool resume = false;
  // Keep the finished layers when the run fails or is cancelled, for --resume. Off: nothing is left behind (the
  // workbench, which has no resume, runs so).
  bool keepFinishedLayers = true;
  // --max-gpu-memory / --max-host-memory (compress/CompressMemory.h plans against them; too small is refused up front).
  MemoryBudget budget;
  // Where the activations' scratch file goes when they fit neither budget ("" : the output's staging folder).
  std::string scratchDir;
  // The result's safetensors are split as transformers splits them (model-0000k-of-0000n + index) past this size.
  uint64_t maxShardBytes = 5'000'000'000ull;
  // The processes sharing this job (dist/ProcessGroup.h; null or one process: this one alone). Every rank calls
  // runCompress with the same options: calibration and the sequential pass are spread over the ranks, and only
  // rank 0 claims and writes outDir (the others return a report without modules). A failure or cancel of any
  // rank stops all and leaves nothing behind; --resume is for runs of one process.
  ProcessGroup* group = nullptr;
};

struct ModuleReport {
  std::string name;
  std::string method;       // "" when left dense
  std::string pattern;      // "2:4", "50%"
  std::string format;       // formats/WeightFormat.h: "dense", "bitmask-2:4", "int4-g128", "bitmask-2:4+int4-g128", ...
  double sparsity = 0;      // measured fraction of zeros
  double bitsPerWeight = 0;
  double seconds = 0;
  double dampUsed = 0;      // sparsegpt
  int dampRetries = 0;
};

struct CompressReport {
  std::string outDir;
  std::vector<ModuleReport> modules;
  double linearBitsPerWeight = 0;   // over the block linears
  double modelBitsPerWeight = 0;    // every stored byte over every weight of the model
  uint64_t bytes = 0;               // weight bytes written
  uint64_t headBytes = 0;           // the output head's own stored bytes (in `bytes`); 0 when it is the tied embedding
  int64_t calibrationTokens = 0;
  double calibrationSeconds = 0, passSeconds = 0, writeSeconds = 0, totalSeconds = 0;
  std::map<std::string, double> passStageSeconds;   // the pass's stages summed over the blocks (SequentialPass.h)
  std::string memoryPlan;    // compress/CompressMemory.h's summary
  std::string activations;   // where the calibration activations lived: "device", "host", "scratch file"
  uint64_t hostBaseBytes = 0;   // resident memory when the job started (LibTorch, the CUDA context)
  uint64_t peakHostBytes = 0;   // the process's peak resident memory
  uint64_t peakGpuBytes = 0;    // the CUDA caching allocator's peak (0 on the CPU)
};

// Compresses with `recipe` (opts.recipePath is not read; a recipe read from a file keeps its path, which counts
// as an input the output may not hold).
CompressReport runCompress(const Recipe& recipe, const CompressOptions& opts, const ProgressCallback& progress = {},
                           const CancelToken* cancel = nullptr);
// The same with the recipe read from opts.recipePath.
CompressReport runCompress(const CompressOptions& opts, const ProgressCallback& progress = {},
                           const CancelToken* cancel = nullptr);

}  // namespace pareto
