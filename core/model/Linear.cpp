#include "model/Linear.h"

#include <ATen/ATen.h>

#include "runtime/PackedLinear.h"
#include "util/Error.h"

namespace pareto {

Linear::Linear(std::string name, at::Tensor weight, at::Tensor bias)
    : name_(std::move(name)), weight_(std::move(weight)), bias_(std::move(bias)) {}

Linear::Linear(std::string name, PackedLinear packed)
    : name_(std::move(name)), bias_(packed.bias()), packed_(std::make_shared<const PackedLinear>(std::move(packed))) {}

at::Tensor Linear::forward(const at::Tensor& x) const {
  if (packed_ != nullptr) {
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = packed_->rows();
    at::Tensor out = packed_->forward(x.reshape({-1, x.size(-1)}).contiguous(), name_);
    return out.view(shape);
  }
  return bias_.defined() ? at::linear(x, weight_, bias_) : at::linear(x, weight_);
}

int64_t Linear::inFeatures() const { return packed_ != nullptr ? packed_->cols() : weight_.size(1); }
int64_t Linear::outFeatures() const { return packed_ != nullptr ? packed_->rows() : weight_.size(0); }

void Linear::setWeight(at::Tensor weight) {
  if (packed_ != nullptr)
    throw Error(name_ + ": holds a packed " + packed_->format() + " weight; load the model with dense weights to change it");
  if (weight.sizes() != weight_.sizes())
    throw Error(name_ + ": new weight has shape " + c10::str(weight.sizes()) + ", expected " + c10::str(weight_.sizes()));
  weight_ = weight.to(weight_.device(), weight_.scalar_type()).contiguous();
}

}  // namespace pareto
