// The weights of a model folder as dense tensors under their Hugging Face names, for the exports: a dense
// checkpoint's tensors as stored, and each packed module of a folder written by compress made dense exactly as
// Pareto's loader unpacks it (pruned weights as zeros, quantized ones dequantized).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <set>
#include <string>

#include "formats/CompressionManifest.h"
#include "util/Progress.h"

namespace pareto {

struct DenseWeights {
  std::map<std::string, at::Tensor> tensors;   // by name, on the CPU, floating tensors in the asked dtype
  std::set<std::string> densified;             // packed modules written as dense weights ("model.layers.0.mlp.up_proj")
  std::optional<CompressionManifest> manifest; // present for a folder written by compress
  c10::ScalarType sourceDtype = c10::ScalarType::Float;   // what the checkpoint was saved in
};

// `dtype` nullopt keeps the source dtype. Throws InputError naming the folder or tensor for what is not a model
// folder; Cancelled when the token fires.
DenseWeights readDenseWeights(const std::string& modelDir, std::optional<c10::ScalarType> dtype,
                              const CancelToken* cancel = nullptr);

}  // namespace pareto
