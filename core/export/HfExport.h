// `pareto-cli export hf`: a compressed output folder as a dense Hugging Face checkpoint that transformers loads
// unchanged. Pruned weights are written as zeros and quantized ones dequantized, exactly as Pareto's loader
// unpacks them, in the source checkpoint's dtype (config.json "torch_dtype" / "dtype") unless another is asked
// for. config.json, the tokenizer files and generation_config.json are copied; pareto.json is not (transformers
// does not know it, and the weights are no longer packed). The folder is written under a temporary name and
// renamed at the end, so a failure or Ctrl-C leaves nothing under the output name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/Progress.h"

namespace pareto {

struct HfExportOptions {
  std::string modelDir;    // a folder written by compress (has pareto.json)
  std::string outDir;      // must not exist unless overwrite
  std::string dtype;       // "" keeps the source dtype; else float32, bfloat16 or float16
  bool overwrite = false;  // replace an existing output folder once the new one is complete
};

struct HfExportReport {
  std::string outDir;
  std::string dtype;                // of the written weights
  int64_t tensors = 0;
  int64_t densifiedModules = 0;     // packed modules written as dense weights
  uint64_t bytes = 0;               // of model.safetensors' tensor data
  std::vector<std::string> files;   // the files of the output folder
  double seconds = 0;
};

// Throws InputError naming the folder for a folder that is not a compressed one, an existing output, or a bad
// dtype; Cancelled when the token fires (nothing is left behind either way).
HfExportReport exportHuggingFace(const HfExportOptions& opts, const ProgressCallback& progress = {},
                                 const CancelToken* cancel = nullptr);

}  // namespace pareto
