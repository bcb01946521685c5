// A linear layer of the model: y = x Wᵀ + b. Every projection goes through this class, so a compressed weight
// (bitmask N:M, quantized groups, SpQR) replaces the dense one without touching the model: with a packed weight
// forward() runs the packed-weight kernels on CUDA and their references on the CPU (runtime/PackedLinear.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

namespace pareto {

class PackedLinear;

class Linear {
 public:
  Linear() = default;
  Linear(std::string name, at::Tensor weight, at::Tensor bias);
  Linear(std::string name, PackedLinear packed);   // a packed (non-dense) weight, bias included

  at::Tensor forward(const at::Tensor& x) const;

  const std::string& name() const { return name_; }
  const at::Tensor& weight() const { return weight_; }   // [out, in]; undefined when the weight is packed
  const at::Tensor& bias() const { return bias_; }       // [out] or undefined
  const PackedLinear* packed() const { return packed_.get(); }   // nullptr for a dense weight
  int64_t inFeatures() const;
  int64_t outFeatures() const;
  // Replaces the weight (same shape, device and dtype): how compression passes install their result.
  // Throws for a packed linear (compression works on dense weights).
  void setWeight(at::Tensor weight);

 private:
  std::string name_;
  at::Tensor weight_;
  at::Tensor bias_;
  std::shared_ptr<const PackedLinear> packed_;
};

}  // namespace pareto
