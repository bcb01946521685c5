// What `pareto-cli inspect` and the workbench's Model dock show: a model folder's architecture and tensors,
// read from config.json and the safetensors headers only (no weights are touched, so it is instant).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace pareto {

struct TensorSummary {
  std::string name;
  std::string dtype;            // "BF16", ...
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
};

struct ModuleFormatSummary {
  std::string name;
  std::string format;          // formats/WeightFormat.h: "dense", "bitmask-2:4", "int4-g128", "spqr-3bit", ...
  // Every byte the folder stores for the module's weight over its rows · cols: counted from the safetensors
  // header when the manifest records the shape (format version 2), else the manifest's own figure.
  double bitsPerWeight = 0;
  double sparsity = 0;
  std::string method;
  bool actOrder = false;       // GPTQ act-order (a permutation is stored)
};

struct ModelSummary {
  std::string path;
  std::string architecture;
  std::string modelType;
  int64_t parameters = 0;       // sum over stored tensors (a tied lm_head is not counted twice)
  uint64_t bytes = 0;           // weight bytes on disk
  std::string dtype;            // the dtype most of the weight bytes have
  int64_t vocabSize = 0, hiddenSize = 0, intermediateSize = 0, numLayers = 0, numHeads = 0, numKvHeads = 0,
          headDim = 0;
  bool tiedEmbeddings = false;
  std::vector<std::string> files;
  std::vector<TensorSummary> tensors;   // sorted by name
  // Compressed folders (pareto.json): each block linear's stored format, and the bits per weight over them.
  bool compressed = false;
  double linearBitsPerWeight = 0;
  std::vector<ModuleFormatSummary> modules;
};

// Throws InputError naming the folder or file when it is missing, unreadable or inconsistent.
ModelSummary summarizeModel(const std::string& modelDir);

// A synthetic model (checkpoint/ModelPresets.h): the summary of a checkpoint of that published configuration, made
// from the configuration alone — its tensors at 2 bytes a weight, storage type from torch_dtype ("BF16"/"F16"),
// path "synthetic:<preset>", no files. Throws InputError for an unknown name (listing the known ones).
ModelSummary summarizePreset(const std::string& preset);

nlohmann::json toJson(const ModelSummary& summary);
// Human-readable text, as `pareto-cli inspect` prints it.
std::string toText(const ModelSummary& summary);

}  // namespace pareto
