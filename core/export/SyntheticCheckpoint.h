// `pareto-cli synthesize`: a Hugging Face checkpoint of a published configuration (checkpoint/ModelPresets.h)
// with random weights, laid out as transformers' save_pretrained writes one (config.json,
// generation_config.json, sharded safetensors with an index), for speed and memory studies where the real
// weights are not at hand. Weights follow transformers' initialisation of these models: linears and the
// embedding N(0, 0.02²), norms 1, biases 0; the same seed gives the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/Progress.h"

namespace pareto {

struct SyntheticCheckpointOptions {
  std::string preset;                        // a ModelPresets name
  std::string outDir;
  int64_t layers = 0;                        // decoder layers; 0: the preset's
  std::string dtype = "bfloat16";            // float32, bfloat16 or float16
  uint64_t seed = 0;
  uint64_t maxShardBytes = 5000000000ull;    // transformers' default max_shard_size, 5GB
  std::string tokenizer;                     // a tokenizer.json (or a folder holding one) to copy in; optional
  bool overwrite = false;                    // replace a folder Pareto wrote, once the new one is complete
};

struct SyntheticCheckpointReport {
  std::string outDir;
  int64_t layers = 0;
  int64_t parameters = 0;
  uint64_t bytes = 0;                        // tensor data over all shards
  std::vector<std::string> files;
  double seconds = 0;
};

// Writes through OutputFolder (staged, swapped in at the end; nothing left behind on failure or cancel).
// Progress: stage "write", one update a tensor. Throws InputError for an unknown preset, a bad layer count or
// dtype, or a tokenizer whose ids do not fit the preset's vocabulary.
SyntheticCheckpointReport writeSyntheticCheckpoint(const SyntheticCheckpointOptions& opts,
                                                   const ProgressCallback& progress = {},
                                                   const CancelToken* cancel = nullptr);

}  // namespace pareto
