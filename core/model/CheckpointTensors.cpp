#include "model/CheckpointTensors.h"

#include "model/TensorIO.h"

namespace pareto {

std::optional<StoredTensors::Entry> CheckpointTensors::find(const std::string& name) const {
  const TensorEntry* e = ckpt_.find(name);
  if (e == nullptr) return std::nullopt;
  return Entry{scalarType(e->dtype), e->shape, e->file};
}

at::Tensor CheckpointTensors::read(const std::string& name) const { return readTensor(ckpt_.at(name)); }

}  // namespace pareto
