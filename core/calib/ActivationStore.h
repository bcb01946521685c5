// Where the calibration activations live between blocks of a layer-wise pass: the input of the block being
// processed, one tensor per calibration batch. On the device when they fit its budget; else in host memory; else
// in a scratch file, memory-mapped and given back to the file after each access, so that neither the device nor
// the process's resident memory holds more than the batch in use. Moving a batch between tiers is an exact copy:
// where the activations live never changes a result.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pareto {

enum class ActivationPlacement { Device, Host, Scratch };
const char* activationPlacementName(ActivationPlacement placement);   // "device", "host", "scratch file"

class ActivationStore {
 public:
  // One slot per batch, of the given shapes, in `dtype`; `device` is where get() returns them and put() takes
  // them from. Scratch: the file is created in `scratchDir` (removed when the store goes; InputError naming the
  // folder when it cannot be created or grown, e.g. the disk is full).
  ActivationStore(ActivationPlacement placement, const std::vector<std::vector<int64_t>>& shapes, c10::ScalarType dtype,
                  c10::Device device, const std::string& scratchDir = "");
  ~ActivationStore();
  ActivationStore(const ActivationStore&) = delete;
  ActivationStore& operator=(const ActivationStore&) = delete;

  size_t size() const { return shapes_.size(); }
  ActivationPlacement placement() const { return placement_; }
  // Bytes all slots take (in their tier).
  uint64_t bytes() const { return total_; }
  static uint64_t bytesOf(const std::vector<std::vector<int64_t>>& shapes, c10::ScalarType dtype);

  void put(size_t slot, const at::Tensor& value);   // copies (device: keeps) `value`, of the slot's shape
  at::Tensor get(size_t slot) const;                 // the slot's contents on the device

 private:
  struct Scratch;
  ActivationPlacement placement_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<uint64_t> offsets_;
  uint64_t total_ = 0;
  c10::ScalarType dtype_;
  c10::Device device_;
  std::vector<at::Tensor> resident_;   // device and host placements
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace pareto
