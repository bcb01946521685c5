// Moving tensors between safetensors files and LibTorch: reading a mapped entry into an owned tensor, and
// writing named tensors to a new safetensors file.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
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
// The same, read for a copy to `device`: on CUDA into page-locked memory (a pageable host-to-device copy moves
// ~1.5 GB/s on the GPU machine, a page-locked one ~20), elsewhere as readTensor.
at::Tensor readTensorFor(const TensorEntry& entry, const c10::Device& device);

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Writes a safetensors file (tensors in the given order, 8-byte aligned data, sorted-free header) to
// `path + ".partial"`, flushes it to disk and renames it over `path`, so a crash or a full disk never leaves a
// truncated file under the final name. Throws Error naming the file on any I/O failure.
void writeSafetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The same for tensors that need not all be in memory: the header is written from each tensor's dtype and shape,
// then `produce` is called once per tensor, in order, and its result written and dropped. A model larger than
// the host goes out one tensor at a time. Throws Error naming the tensor when produce returns another dtype or
// shape than announced.
struct PlannedTensor {
  std::string name;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  std::function<at::Tensor()> produce;
  uint64_t bytes() const;
};
void writeSafetensorsStreamed(const std::string& path, const std::vector<PlannedTensor>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace pareto
