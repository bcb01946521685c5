// Moving tensors between safetensors files and LibTorch: reading a mapped entry into an owned tensor, and
// writing named tensors to a new safetensors file.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/Safetensors.h"

namespace pareto {

c10::ScalarType scalarType(DType dtype);
// Throws Error for a type safetensors files of Pareto do not hold.
DType safetensorsDtype(c10::ScalarType type, const std::string& tensorName);

// A CPU tensor owning a copy of the entry's bytes (safetensors data need not be aligned, and the mapping may go).
at::Tensor readTensor(const TensorEntry& entry);

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Writes a safetensors file (tensors in the given order, 8-byte aligned data, sorted-free header) to
// `path + ".partial"`, flushes it to disk and renames it over `path`, so a crash or a full disk never leaves a
// truncated file under the final name. Throws Error naming the file on any I/O failure.
void writeSafetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace pareto
