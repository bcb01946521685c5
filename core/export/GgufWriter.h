// A GGUF file (version 3, as llama.cpp reads it): the header, the key-value metadata in the order set, the
// tensor infos, then each tensor's data at an offset aligned to general.alignment (32). Tensor data is produced
// when its turn comes, so a model is never held twice in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "formats/GgufBlocks.h"
#include "util/Progress.h"

namespace pareto {
namespace gguf {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kAlignment = 32;

using MetaValue = std::variant<uint32_t, int32_t, uint64_t, float, bool, std::string, std::vector<std::string>,
                               std::vector<int32_t>, std::vector<float>>;

struct TensorInfo {
  std::string name;              // "blk.0.attn_q.weight"
  std::vector<int64_t> shape;    // outermost first, as LibTorch has it ([rows, cols]); GGUF stores it reversed
  TensorType type = TensorType::F32;
  std::function<std::vector<uint8_t>()> data;   // exactly bytes() bytes, produced when written

  uint64_t bytes() const;
};

class Writer {
 public:
  // A key set twice keeps its first place and takes the new value.
  void set(const std::string& key, MetaValue value);
  // InputError for a duplicate name or a shape the type cannot hold (a row that is not whole blocks).
  void addTensor(TensorInfo tensor);
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  uint64_t dataBytes() const;

  // Writes the file at `path` (created or truncated) and syncs it to disk; progress after each tensor.
  void write(const std::string& path, const ProgressCallback& progress = {}, const CancelToken* cancel = nullptr) const;

 private:
  std::vector<std::pair<std::string, MetaValue>> metadata_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace gguf
}  // namespace pareto
