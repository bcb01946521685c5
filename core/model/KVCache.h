// Key/value cache for incremental decoding: per layer, keys and values for every position so far, stored in a
// buffer allocated once for the longest sequence so decode steps never reallocate.
#pragma once

#include <ATen/core/Tensor.h>
#include <vector>

namespace pareto {

class KVCache {
 public:
  KVCache() = default;
  // Buffers [batch, kvHeads, capacity, headDim] per layer, with the given options (device, dtype).
  KVCache(int64_t layers, int64_t batch, int64_t kvHeads, int64_t capacity, int64_t headDim,
          const at::TensorOptions& options);

  int64_t length() const { return length_; }        // positions already cached
  int64_t capacity() const { return capacity_; }
  int64_t batch() const { return batch_; }

  // Writes k, v ([batch, kvHeads, T, headDim]) at positions [length, length+T) of `layer` and returns views
  // of the keys and values for positions [0, length+T). Call advance(T) once all layers have appended.
  std::pair<at::Tensor, at::Tensor> append(int64_t layer, const at::Tensor& k, const at::Tensor& v);
  void advance(int64_t steps);
  void reset() { length_ = 0; }

 private:
  std::vector<at::Tensor> keys_, values_;
  int64_t length_ = 0, capacity_ = 0, batch_ = 0;
};

}  // namespace pareto
