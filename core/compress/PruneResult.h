// What every pruning method returns, so that the compress job, the bitmask packer and the statistics treat
// magnitude, Wanda and SparseGPT alike.
#pragma once

#include <ATen/core/Tensor.h>

namespace pareto {

struct PruneResult {
  at::Tensor weight;  // [out, in], the input weight's dtype and device; removed entries are exactly 0
  at::Tensor mask;    // bool [out, in] on the weight's device, true = kept (a kept weight may still be 0)
};

}  // namespace pareto
