// A linear layer's weight in the form the runtime runs it: a dense matrix (cuBLAS on the GPU) or one of the
// packed kernel weights of PackedGemv.h. forward() dispatches on the form — the GEMV kernels on CUDA, their
// float64 references on the CPU — so a model holds whatever format compression produced and runs it as is.
//
// Format names (shared by `bench kernels`, `bench decode --format` and synthetic models): "dense",
// "bitmask-N:M", "int8-channel", "int4-channel", "int4-gG", "int8-gG", "spqr-2bit/3bit/4bit",
// "bitmask-N:M+int4-gG".
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "runtime/PackedGemv.h"

namespace pareto {

class PackedLinear {
 public:
  using Weight = std::variant<at::Tensor, BitmaskNMKernelWeight, QuantGroupKernelWeight, BitmaskInt4KernelWeight,
                              SpqrKernelWeight>;

  PackedLinear() = default;
  // format: the name above (e.g. "int4-g128"), shown in summaries and bench tables.
  PackedLinear(Weight weight, std::string format, int64_t rows, int64_t cols, at::Tensor bias = {});
  static PackedLinear dense(const at::Tensor& weight, const at::Tensor& bias = {});

  // out [N, rows] = x [N, cols] · Ŵᵀ (+ bias), x in the model dtype (fp16/bf16 for packed weights). The GEMV
  // kernels take at most 16 rows, so a longer input (a prefill) runs in slices of 16. `what` names the module in
  // errors.
  void forward(const at::Tensor& x, const at::Tensor& out, const std::string& what) const;
  at::Tensor forward(const at::Tensor& x, const std::string& what) const;
  // The same with a small op folded in (PackedGemv.h: GemvFusion): inside the GEMV's kernel where fusesInKernel(),
  // else as the op itself around the product; the same values either way.
  void forward(const at::Tensor& x, const at::Tensor& out, const std::string& what, const GemvFusion& fusion) const;
  // Whether forward() with a fusion runs it inside the packed GEMV (a packed weight without a bias) rather than as
  // ops around the product. Not dense (cuBLAS takes no fused input, and the decode step keeps its own fused
  // add+norm), and not the formats whose step measured slower folded than with the separate ops (H200): SpQR
  // (+0.29 ms a step; its batch-1 GEMV is the FFMA skeleton, whose four blocks a multiprocessor each recompute the
  // norm from the whole row before they can stage x) and bitmask N:M, 2:4 included (+0.12 ms; bench/NOTES.md
  // "Fused decode step ... measured", both sessions).
  bool fusesInKernel() const;

  bool defined() const { return rows_ > 0; }
  bool isDense() const { return std::holds_alternative<at::Tensor>(weight_); }
  const at::Tensor& denseWeight() const;   // throws Error when packed
  const at::Tensor& bias() const { return bias_; }
  const std::string& format() const { return format_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t weightBytes() const;   // bytes read by one forward of one row (weight as laid out + bias)
  const Weight& weight() const { return weight_; }

 private:
  void runKernels(const at::Tensor& x, const at::Tensor& out, const std::string& what, const GemvFusion& fusion) const;

  Weight weight_;
  std::string format_ = "dense";
  int64_t rows_ = 0, cols_ = 0;
  at::Tensor bias_;
};

// One linear whose rows are the parts' rows in order (q, k, v → qkv; gate, up → gate+up), so one kernel reads
// them all. Parts must share format, columns, dtype and device, and every part but the last must have a
// multiple of 32 rows (the kernels' row groups). Throws InputError otherwise.
PackedLinear concatRows(const std::vector<const PackedLinear*>& parts);

// A random weight of `format` made directly on `device` (dense in `dtype`; packed values in `dtype` where the
// format stores them, fp16 scales). Throws InputError for an unknown or unsupported format.
PackedLinear randomPackedLinear(const std::string& format, int64_t rows, int64_t cols, at::ScalarType dtype,
                                at::Device device, uint64_t seed, double spqrOutlierFraction = 0.01);

// Checks a format name without building anything (InputError listing the known forms).
void checkPackedFormatName(const std::string& format);

}  // namespace pareto
