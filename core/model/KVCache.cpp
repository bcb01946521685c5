#include "model/KVCache.h"

#include <ATen/ATen.h>

#include "util/Error.h"

namespace pareto {

KVCache::KVCache(int64_t layers, int64_t batch, int64_t kvHeads, int64_t capacity, int64_t headDim,
                 const at::TensorOptions& options)
    : capacity_(capacity), batch_(batch) {
  keys_.reserve(layers);
  values_.reserve(layers);
  for (int64_t i = 0; i < layers; ++i) {
    keys_.push_back(at::empty({batch, kvHeads, capacity, headDim}, options));
    values_.push_back(at::empty({batch, kvHeads, capacity, headDim}, options));
  }
}

std::pair<at::Tensor, at::Tensor> KVCache::append(int64_t layer, const at::Tensor& k, const at::Tensor& v) {
  const int64_t steps = k.size(2);
  if (length_ + steps > capacity_)
    throw Error("KV cache full: " + std::to_string(length_) + " + " + std::to_string(steps) +
                " positions exceed its capacity of " + std::to_string(capacity_));
  keys_[layer].narrow(2, length_, steps).copy_(k);
  values_[layer].narrow(2, length_, steps).copy_(v);
  return {keys_[layer].narrow(2, 0, length_ + steps), values_[layer].narrow(2, 0, length_ + steps)};
}

void KVCache::advance(int64_t steps) { length_ += steps; }

}  // namespace pareto
