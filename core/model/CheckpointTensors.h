// A checkpoint's tensors as formats/PackedModuleIO.h reads a module's (StoredTensors): dtype and shape from the
// safetensors headers, data read on demand.
#pragma once

#include "checkpoint/Safetensors.h"
#include "formats/PackedModuleIO.h"

namespace pareto {

class CheckpointTensors : public StoredTensors {
 public:
  explicit CheckpointTensors(const Checkpoint& ckpt) : ckpt_(ckpt) {}
  std::optional<Entry> find(const std::string& name) const override;
  at::Tensor read(const std::string& name) const override;
  std::string location() const override { return ckpt_.directory(); }

 protected:
  const Checkpoint& ckpt_;
};

}  // namespace pareto
