// A linear layer of the model: y = x Wᵀ + b. Every projection goes through this class so that compressed
// weight formats (bitmask N:M, quantized groups) can later replace the dense weight without touching the model.
#pragma once

#include <ATen/core/Tensor.h>
#include <string>

namespace pareto {

class Linear {
 public:
  Linear() = default;
  Linear(std::string name, at::Tensor weight, at::Tensor bias);

  at::Tensor forward(const at::Tensor& x) const;

  const std::string& name() const { return name_; }
  const at::Tensor& weight() const { return weight_; }   // [out, in]
  const at::Tensor& bias() const { return bias_; }       // [out] or undefined
  int64_t inFeatures() const;
  int64_t outFeatures() const;
  // Replaces the weight (same shape, device and dtype): how compression passes install their result.
  void setWeight(at::Tensor weight);

 private:
  std::string name_;
  at::Tensor weight_;
  at::Tensor bias_;
};

}  // namespace pareto
