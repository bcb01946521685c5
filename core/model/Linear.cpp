#include "model/Linear.h"

#include <ATen/ATen.h>

#include "util/Error.h"

namespace pareto {

Linear::Linear(std::string name, at::Tensor weight, at::Tensor bias)
    : name_(std::move(name)), weight_(std::move(weight)), bias_(std::move(bias)) {}

at::Tensor Linear::forward(const at::Tensor& x) const {
  return bias_.defined() ? at::linear(x, weight_, bias_) : at::linear(x, weight_);
}

int64_t Linear::inFeatures() const { return weight_.size(1); }
int64_t Linear::outFeatures() const { return weight_.size(0); }

void Linear::setWeight(at::Tensor weight) {
  if (weight.sizes() != weight_.sizes())
    throw Error(name_ + ": new weight has shape " + c10::str(weight.sizes()) + ", expected " + c10::str(weight_.sizes()));
  weight_ = weight.to(weight_.device(), weight_.scalar_type()).contiguous();
}

}  // namespace pareto
