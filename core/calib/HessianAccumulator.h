// The input Hessian of one linear module, H = Σ w·x xᵀ over calibration rows, built by streaming: activations
// are folded in as they arrive and never kept. Pruning (SparseGPT), quantization (GPTQ, SpQR) and the Hessian
// discrepancy analysis all start from it.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <cstdint>
#include <string>

namespace pareto {

class ProcessGroup;

class HessianAccumulator {
 public:
  // Allocates the [columns, columns] float32 sum once on `device` (822 MB for a 14336-wide input). `name` is the
  // module's name, used in error messages.
  HessianAccumulator(int64_t columns, c10::Device device, std::string name = {});

  // x: [..., columns] activations of any floating dtype on any device; rows are moved to the Hessian's device
  // and accumulated in float32. weights: x's leading shape, finite and >= 0, or undefined for all ones.
  // Zero-weight rows (prompt positions under decode calibration) are dropped and not counted as samples.
  // Throws InputError naming the module for a wrong shape, a non-float x or a bad weight.
  void add(const at::Tensor& x, const at::Tensor& weights = {});

  // Rows converted and multiplied at a time; the default keeps that float32 copy near 64 MiB. Smaller values
  // only cost speed (tests use them to cross chunk boundaries cheaply).
  void setChunkRows(int64_t rows);
  int64_t chunkRows() const { return chunkRows_; }

  // Adds another accumulator's sum, weight and samples (same columns; its device may differ).
  void merge(const HessianAccumulator& other);
  // Replaces this rank's sum, weight and samples by those of every rank of `group` together (each rank calls
  // it for the same module in the same order): the Hessian of the whole calibration set when each rank saw a
  // share of it. Equal to one process's up to the order of the float32 additions.
  void sumAcrossRanks(ProcessGroup& group);

  const at::Tensor& sum() const { return sum_; }   // Σ w x xᵀ, [columns, columns] float32
  // sum / weightSum; throws InputError naming the module when nothing with positive weight was added.
  at::Tensor mean() const;
  double weightSum() const { return weightSum_; }
  int64_t samples() const { return samples_; }      // rows with w > 0 seen so far
  int64_t columns() const { return columns_; }
  c10::Device device() const { return sum_.device(); }
  const std::string& name() const { return name_; }

 private:
  void accumulateRows(const at::Tensor& rows, const at::Tensor& rowWeights);

  int64_t columns_;
  int64_t chunkRows_;
  std::string name_;
  at::Tensor sum_;
  double weightSum_ = 0;
  int64_t samples_ = 0;
};

}  // namespace pareto
