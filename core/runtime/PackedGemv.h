// LibTorch faces of the packed-weight GEMV kernels (kernels/*.h): each *KernelWeight holds a packed weight
// re-laid out for its kernel (kernels/GemvProblem.h: lane-interleaved chunks, rows padded to 32), on the device
// where it will run. gemv() computes y = x · Ŵᵀ for x [batch ≤ 16, cols] in fp16 or bf16: on CUDA with the
// kernel, on the CPU with the kernel's float64 reference (kernels/reference), which reads the same layout, so
// CI exercises every re-layout and every reference even without a GPU.
//
// Re-laying out costs one pass over the weight at load time and no bytes: bits per weight are those of the
// stored format (plus the row and chunk padding; SpQR stats take one byte a group instead of 6 bits).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>

namespace pareto {

struct BitmaskNMWeight;
struct QuantGroupWeight;
struct SpqrWeight;

// The kernel launch state every weight carries: one zeroed counter per row group, left at zero by each launch,
// so the same weight can be replayed in a CUDA graph. One weight is not to be used on two streams at once.
struct GemvCounters {
  at::Tensor counters;  // int32 [row groups] on the weight's device
};

struct BitmaskNMKernelWeight {
  at::Tensor masks;   // int32 [G, C, 32, 8]
  at::Tensor values;  // fp16/bf16 [G, C, K, 32, 8]
  int n = 0, m = 0;
  int64_t rows = 0, cols = 0;
  GemvCounters launch;

  static BitmaskNMKernelWeight fromPacked(const BitmaskNMWeight& w);
  int64_t bytes() const;  // device bytes read per GEMV
};

struct QuantGroupKernelWeight {
  at::Tensor codes;   // uint8 [G, C, 8, 32, 16]
  at::Tensor scales;  // fp16 [G, S, 32]
  at::Tensor zeros;   // uint8 [G, S, 32], asymmetric only
  int bits = 4;
  bool symmetric = true;
  int64_t groupSize = 0;
  int64_t rows = 0, cols = 0;
  GemvCounters launch;

  // 4- or 8-bit QuantGroupWeight (per tensor, per channel or groups the kernel supports); InputError otherwise.
  static QuantGroupKernelWeight fromPacked(const QuantGroupWeight& w);
  int64_t bytes() const;
};

// A 50%-dense N:M weight whose kept values are 4-bit codes (prune then quantize).
struct BitmaskInt4KernelWeight {
  // On a GPU, where the 2:4 tensor-core kernel runs (kernels/BitmaskInt4Gemv.h, bitmaskInt4UsesTensorCores), the
  // masks are held only as that kernel's metadata (the same bytes); elsewhere as masks.
  at::Tensor masks;     // int32 [G, C, 32, 8]
  at::Tensor metadata;  // int32 [G, C, 2, 32, 4]
  at::Tensor codes;   // uint8 [G, C, 4, 32, 16]
  at::Tensor scales;  // fp16 [G, S, 32]
  at::Tensor zeros;   // uint8, asymmetric only
  bool symmetric = true;
  int64_t groupSize = 0;  // kept values per scale
  int n = 0, m = 0;       // the N:M pattern (2:4 runs on the tensor cores: kernels/BitmaskInt4Gemv.h)
  int64_t rows = 0, cols = 0;
  GemvCounters launch;

  // masks: the BitmaskNMWeight's int32 [rows, cols/32] (50% density); kept: 4-bit codes of the kept values
  // [rows, cols/2] in column order.
  static BitmaskInt4KernelWeight fromPacked(const at::Tensor& masks, int n, int m, const QuantGroupWeight& kept);
  int64_t bytes() const;
};

// SpQR from its parts (see kernels/SpqrGemv.h): codes uint8 [rows, cols] (values < 2^bits), scale and zero codes
// uint8 [rows, cols/16], second-level base and step fp16 [rows/scaleGroup, cols/16], outliers in CSR (rowOffsets
// int32 [rows+1], columns int [nnz], values fp16 [nnz]: the full outlier weight, which replaces the dense one).
struct SpqrParts {
  at::Tensor codes, scaleCodes, zeroCodes, scaleBase, scaleStep;
  at::Tensor rowOffsets, outlierColumns, outlierValues;
  int bits = 3;
  int64_t scaleGroup = 16;
};

struct SpqrKernelWeight {
  at::Tensor codes;          // uint8 [G, C, bits, 32, 16]
  at::Tensor stats;          // uint8 [G, C, 32, 8]
  at::Tensor second;         // fp16 [G, C·8, 32/scaleGroup, 2]
  at::Tensor rowOffsets;     // int32 [32G + 1]
  at::Tensor outlierColumns; // int16 bits (uint16) [nnz]
  at::Tensor outlierValues;  // fp16 [nnz]
  int bits = 3;
  int64_t scaleGroup = 16;
  int64_t rows = 0, cols = 0;
  GemvCounters launch;

  static SpqrKernelWeight fromParts(const SpqrParts& parts);
  // A stored SpQR weight (formats/SpqrWeight.h): groups of 16, 2-4 bit codes, scale codes of at most 4 bits.
  static SpqrKernelWeight fromPacked(const SpqrWeight& w);
  int64_t bytes() const;
};

// The decode step's small ops folded into the GEMV next to them (kernels/GemvProblem.h: GemvInput, accumulate):
// on CUDA inside the kernel (while x is staged, while y is stored), on the CPU as the ops themselves
// (runtime/DecodeOps.h) around the reference; the same arithmetic either way, so a fused GEMV equals the op and
// the plain GEMV bit for bit on the GPU.
struct GemvFusion {
  enum class Input {
    Plain,    // x [batch, cols]
    RmsNorm,  // x is the residual stream [batch, cols]; the GEMV reads normWeight ⊙ rmsnorm(x) (eps)
    SiluMul,  // x is [gate | up] [batch, 2·cols]; the GEMV reads silu(gate) ⊙ up
  };
  Input input = Input::Plain;
  at::Tensor normWeight;  // RmsNorm: [cols] in the activations' dtype, on their device
  double eps = 0;
  bool accumulate = false;  // out += x · Ŵᵀ (out: the residual stream, given, in the activations' dtype)
};

// x as the plain GEMV reads it: the fused input computed by its op (addRmsNorm, siluMul); x itself when Plain.
// Throws InputError naming `what` when x's shape or the norm weight does not fit `cols`.
at::Tensor unfusedInput(const at::Tensor& x, int64_t cols, const GemvFusion& fusion, const std::string& what);

// A fusion done as the ops around a plain product (a dense or multi-part linear): `product(in, y)` writes
// y = in · Ŵᵀ [batch, rows] for the unfused input; out receives it, or, accumulating, out += it (rounded to the
// dtype first, then the sum). Throws InputError naming `what` when out is not the [batch, rows] residual.
void forwardAroundOps(const at::Tensor& x, const at::Tensor& out, int64_t rows, int64_t cols, const GemvFusion& fusion,
                      const std::string& what,
                      const std::function<void(const at::Tensor& in, const at::Tensor& y)>& product);

// y = x · Ŵᵀ: x [batch, cols] fp16/bf16 (batch 1..16) on the weight's device; y [batch, rows] in x's dtype,
// written into `out` when given (contiguous, that shape and dtype: a CUDA graph's static buffer, or a poisoned
// tensor in the tests); on the CPU `out` may be float64, which keeps the reference's result unrounded (not with
// a fusion). Throws InputError for a shape, dtype or device the kernel cannot take, naming `what`.
at::Tensor gemv(const BitmaskNMKernelWeight& w, const at::Tensor& x, at::Tensor out = {},
                const std::string& what = "bitmask weight", const GemvFusion& fusion = {});
at::Tensor gemv(const QuantGroupKernelWeight& w, const at::Tensor& x, at::Tensor out = {},
                const std::string& what = "quantized weight", const GemvFusion& fusion = {});
at::Tensor gemv(const BitmaskInt4KernelWeight& w, const at::Tensor& x, at::Tensor out = {},
                const std::string& what = "bitmask int4 weight", const GemvFusion& fusion = {});
at::Tensor gemv(const SpqrKernelWeight& w, const at::Tensor& x, at::Tensor out = {},
                const std::string& what = "SpQR weight", const GemvFusion& fusion = {});

// Whether gemv() runs CUDA kernels in this build (PARETO_CUDA) — false means CPU references only.
bool gemvKernelsBuilt();

}  // namespace pareto
