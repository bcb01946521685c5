#include "runtime/PackedGemv.h"

#include <ATen/ATen.h>

#include "kernels/BitmaskInt4Gemv.h"
#include "kernels/BitmaskNMGemv.h"
#include "kernels/QuantGroupGemv.h"
#include "kernels/SpqrGemv.h"
#include "formats/BitPacking.h"
#include "formats/BitmaskNMWeight.h"
#include "formats/QuantGroupWeight.h"
#include "formats/SpqrWeight.h"
#include "kernels/reference/GemvReference.h"
#include "runtime/DecodeOps.h"
#include "util/Error.h"

#ifdef PARETO_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace pareto {
namespace {

namespace k = kernels;

int64_t paddedRows(int64_t rows) { return k::rowGroups(rows) * k::kRowsPerGroup; }

// `t` [rows, cols] placed in the top-left corner of a [rowsTo, colsTo] tensor filled with `fill`.
at::Tensor padTo(const at::Tensor& t, int64_t rowsTo, int64_t colsTo, int64_t fill = 0) {
  if (t.size(0) == rowsTo && t.size(1) == colsTo) return t.contiguous();
  at::Tensor out = at::full({rowsTo, colsTo}, fill, t.options());
  out.narrow(0, 0, t.size(0)).narrow(1, 0, t.size(1)).copy_(t);
  return out;
}

// [rowsP, C·P·E] (a row's chunk c is P pieces of E elements) → [G, C, P, 32, E]: piece p of the 32 lanes of a
// row group adjacent, so that a warp's load of piece p is one contiguous transaction.
at::Tensor interleaveLanes(const at::Tensor& rowsMajor, int64_t chunks, int64_t pieces, int64_t elems) {
  const int64_t groups = rowsMajor.size(0) / k::kRowsPerGroup;
  return rowsMajor.view({groups, k::kRowsPerGroup, chunks, pieces, elems}).permute({0, 2, 3, 1, 4}).contiguous();
}

// [rowsP, S] per-row values → [G, S, 32].
at::Tensor interleaveRows(const at::Tensor& perRow) {
  const int64_t groups = perRow.size(0) / k::kRowsPerGroup;
  return perRow.view({groups, k::kRowsPerGroup, perRow.size(1)}).permute({0, 2, 1}).contiguous();
}

// Masks [rows, cols/32] → [G, C, 32, 8], padding words with the lowest `kept` bits set (any word with the
// right number of bits is valid; its values are 0).
at::Tensor relayoutMasks(const at::Tensor& masks, int64_t rows, int64_t cols, int kept) {
  const int64_t chunks = k::bitmaskChunks(cols);
  const int64_t fill = kept >= 32 ? -1 : int64_t((uint64_t(1) << kept) - 1);
  at::Tensor padded = padTo(masks.to(at::kInt), paddedRows(rows), chunks * k::kBitmaskWordsPerChunk, fill);
  return interleaveLanes(padded, chunks, 1, k::kBitmaskWordsPerChunk).view(
      {padded.size(0) / k::kRowsPerGroup, chunks, k::kRowsPerGroup, k::kBitmaskWordsPerChunk});
}

at::Tensor zeroCounters(int64_t rows, const at::TensorOptions& options) {
  return at::zeros({k::rowGroups(rows)}, options.dtype(at::kInt));
}

int64_t tensorBytes(const at::Tensor& t) { return t.defined() ? t.numel() * int64_t(t.element_size()) : 0; }

k::ActivationType activationType(const at::Tensor& x, const std::string& what) {
  if (x.scalar_type() == at::kHalf) return k::ActivationType::Float16;
  if (x.scalar_type() == at::kBFloat16) return k::ActivationType::BFloat16;
  throw InputError(what + ": activations must be float16 or bfloat16, got " + std::string(c10::toString(x.scalar_type())));
}

// The fused input's checks (GemvFusion), naming `what`; x is [batch, cols] or, for SiLU·mul, [batch, 2·cols].
void checkFusedInput(const at::Tensor& x, int64_t cols, const GemvFusion& f, const std::string& what) {
  const int64_t width = f.input == GemvFusion::Input::SiluMul ? 2 * cols : cols;
  if (!x.defined() || x.dim() != 2 || x.size(1) != width)
    throw InputError(what + ": activations must be [batch, " + std::to_string(width) + "]" +
                     (f.input == GemvFusion::Input::SiluMul ? " (gate | up)" : ""));
  if (f.input == GemvFusion::Input::RmsNorm) {
    if (!f.normWeight.defined() || f.normWeight.dim() != 1 || f.normWeight.size(0) != cols ||
        f.normWeight.scalar_type() != x.scalar_type() || f.normWeight.device() != x.device() ||
        !f.normWeight.is_contiguous())
      throw InputError(what + ": the RMSNorm weight must be a contiguous [" + std::to_string(cols) +
                       "] tensor of the activations' dtype and device");
  }
}

k::GemvInput kernelInput(GemvFusion::Input i) {
  switch (i) {
    case GemvFusion::Input::RmsNorm: return k::GemvInput::RmsNorm;
    case GemvFusion::Input::SiluMul: return k::GemvInput::SiluMul;
    default: return k::GemvInput::Plain;
  }
}

// The shared part of every gemv(): checks x, prepares y and the problem, and runs either the CUDA kernel
// (`runKernel(problem, split, partials, counters, stream)`) or the CPU reference (`runReference(problem)`).
template <class Split, class RunKernel, class RunReference>
at::Tensor runGemv(const at::Tensor& xIn, at::Tensor y, int64_t rows, int64_t cols, const at::Tensor& weightTensor,
                   const GemvCounters& launch, const std::string& what, const GemvFusion& fusion, Split split,
                   RunKernel runKernel, RunReference runReference) {
  checkFusedInput(xIn, cols, fusion, what);
  if (fusion.accumulate && (!y.defined() || y.scalar_type() != xIn.scalar_type()))
    throw InputError(what + ": accumulating needs the residual as the output, in the activations' dtype");
  if (xIn.device() != weightTensor.device())
    throw InputError(what + ": activations on " + xIn.device().str() + " but the weight is on " +
                     weightTensor.device().str());
  const at::Tensor input = xIn.contiguous();
  if (!y.defined()) {
    y = at::empty({input.size(0), rows}, input.options());
  } else if (y.dim() != 2 || y.size(0) != input.size(0) || y.size(1) != rows || y.device() != input.device() ||
             !y.is_contiguous() ||
             !(y.scalar_type() == input.scalar_type() ||
               (y.is_cpu() && y.scalar_type() == at::kDouble && fusion.input == GemvFusion::Input::Plain &&
                !fusion.accumulate))) {
    throw InputError(what + ": the output must be a contiguous [" + std::to_string(input.size(0)) + ", " +
                     std::to_string(rows) + "] tensor of the activations' dtype and device");
  }
  k::GemvProblem p;
  p.rows = rows;
  p.cols = cols;
  p.batch = int(input.size(0));
  p.type = activationType(input, what);
  if (input.is_cuda()) {
#ifdef PARETO_WITH_CUDA
    p.x = input.data_ptr();
    p.y = y.data_ptr();
    p.input = kernelInput(fusion.input);
    p.normWeight = fusion.normWeight.defined() ? fusion.normWeight.data_ptr() : nullptr;
    p.eps = float(fusion.eps);
    p.accumulate = fusion.accumulate;
    if (auto e = k::checkGemvProblem(p); !e.empty()) throw InputError(what + ": " + e);
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const k::GemvSplit s = split(p, sms);
    at::Tensor partials;
    if (const size_t n = k::gemvPartialFloats(p, s); n > 0)
      partials = at::empty({int64_t(n)}, input.options().dtype(at::kFloat));
    const std::string error =
        runKernel(p, s, partials.defined() ? partials.data_ptr<float>() : nullptr,
                  launch.counters.data_ptr<int>(), at::cuda::getCurrentCUDAStream().stream());
    if (!error.empty()) throw InputError(what + ": " + error);
    return y;
#else
    throw InputError(what + ": this build has no CUDA kernels (configure with PARETO_CUDA=ON)");
#endif
  }
  const at::Tensor x = unfusedInput(input, cols, fusion, what);
  p.x = x.data_ptr();
  p.y = y.data_ptr();  // the reference returns its result; y receives it below
  std::vector<double> result;
  try {
    result = runReference(p);
  } catch (const std::invalid_argument& e) {
    throw InputError(what + ": " + e.what());
  }
  const at::Tensor product = at::from_blob(result.data(), {p.batch, rows}, at::TensorOptions().dtype(at::kDouble));
  if (fusion.accumulate)
    y.add_(product.to(y.scalar_type()));  // the product rounded to the dtype, then the sum (as addRmsNorm adds)
  else
    y.copy_(product);
  return y;
}

// The GEMV of a format whose kernels take no folded work (bitmask N:M, SpQR: their decode step measured slower
// folded) with a fusion on CUDA: the ops around the plain product, the same values.
template <class Weight>
at::Tensor aroundThePlainKernel(const Weight& w, const at::Tensor& x, at::Tensor out, const std::string& what,
                                const GemvFusion& fusion) {
  if (!out.defined() && !fusion.accumulate) out = at::empty({x.size(0), w.rows}, x.options());
  forwardAroundOps(x, out, w.rows, w.cols, fusion, what,
                   [&](const at::Tensor& in, const at::Tensor& y) { gemv(w, in, y, what); });
  return out;
}

bool folds(const GemvFusion& f) { return f.input != GemvFusion::Input::Plain || f.accumulate; }

}  // namespace

at::Tensor unfusedInput(const at::Tensor& x, int64_t cols, const GemvFusion& f, const std::string& what) {
  checkFusedInput(x, cols, f, what);
  switch (f.input) {
    case GemvFusion::Input::RmsNorm: {
      at::Tensor normed = at::empty_like(x);
      addRmsNorm(x, at::Tensor(), f.normWeight, f.eps, normed);
      return normed;
    }
    case GemvFusion::Input::SiluMul: {
      at::Tensor act = at::empty({x.size(0), cols}, x.options());
      siluMul(x, act);
      return act;
    }
    default:
      return x;
  }
}

void forwardAroundOps(const at::Tensor& x, const at::Tensor& out, int64_t rows, int64_t cols, const GemvFusion& f,
                      const std::string& what,
                      const std::function<void(const at::Tensor& in, const at::Tensor& y)>& product) {
  const at::Tensor input = unfusedInput(x, cols, f, what);
  if (!f.accumulate) return product(input, out);
  if (!out.defined() || out.dim() != 2 || out.size(0) != x.size(0) || out.size(1) != rows)
    throw InputError(what + ": accumulating needs the residual [" + std::to_string(x.size(0)) + ", " +
                     std::to_string(rows) + "] as the output");
  const at::Tensor y = at::empty_like(out);
  product(input, y);
  const_cast<at::Tensor&>(out).add_(y);  // the product rounded to the dtype, then the sum
}

bool gemvKernelsBuilt() {
#ifdef PARETO_WITH_CUDA
  return true;
#else
  return false;
#endif
}

// --- bitmask N:M --------------------------------------------------------------------------------------------

BitmaskNMKernelWeight BitmaskNMKernelWeight::fromPacked(const BitmaskNMWeight& w) {
  w.checkConsistent();
  BitmaskNMKernelWeight out;
  out.n = w.n;
  out.m = w.m;
  out.rows = w.rows;
  out.cols = w.cols;
  const int kept = k::bitmaskKeptPerWord(w.n, w.m);
  const int64_t chunks = k::bitmaskChunks(w.cols);
  out.masks = relayoutMasks(w.masks, w.rows, w.cols, kept);
  const at::Tensor values = padTo(w.values, paddedRows(w.rows), chunks * k::kBitmaskWordsPerChunk * kept);
  out.values = interleaveLanes(values, chunks, kept, 8);
  out.launch.counters = zeroCounters(w.rows, w.masks.options());
  return out;
}

int64_t BitmaskNMKernelWeight::bytes() const { return tensorBytes(masks) + tensorBytes(values); }

at::Tensor gemv(const BitmaskNMKernelWeight& w, const at::Tensor& x, at::Tensor out, const std::string& what,
                const GemvFusion& fusion) {
  if (x.is_cuda() && folds(fusion)) return aroundThePlainKernel(w, x, out, what, fusion);
  if (x.scalar_type() != w.values.scalar_type())
    throw InputError(what + ": activations are " + std::string(c10::toString(x.scalar_type())) +
                     " but the kept values are " + std::string(c10::toString(w.values.scalar_type())));
  k::BitmaskNMGemvWeight kw;
  kw.masks = reinterpret_cast<const uint32_t*>(w.masks.data_ptr<int>());
  kw.values = w.values.data_ptr();
  kw.n = w.n;
  kw.m = w.m;
  return runGemv(
      x, out, w.rows, w.cols, w.masks, w.launch, what, fusion,
      [&](const k::GemvProblem& p, int sms) { return k::bitmaskNMGemvSplit(p, kw, sms); },
      [&](const k::GemvProblem& p, const k::GemvSplit& s, float* partials, int* counters, CUstream_st* stream) {
#ifdef PARETO_WITH_CUDA
        return k::runBitmaskNMGemv(p, kw, s, partials, counters, stream);
#else
        (void)p, (void)s, (void)partials, (void)counters, (void)stream;
        return std::string("no CUDA kernels in this build");
#endif
      },
      [&](const k::GemvProblem& p) { return k::bitmaskNMGemvReference(p, kw); });
}

// --- int4 / int8 groups -------------------------------------------------------------------------------------

namespace {

// Scales or zeros [rows or 1, groups] → per-row [rowsP, S] for the kernels' scale columns: groups narrower than
// a chunk are padded to cover every chunk (kernels/QuantGroupGemv.h), wider ones are kept as they are.
at::Tensor scaleColumns(const at::Tensor& perGroup, int64_t rows, int64_t columns) {
  const at::Tensor full = perGroup.size(0) == rows ? perGroup : perGroup.expand({rows, perGroup.size(1)});
  return padTo(full, paddedRows(rows), columns);
}

}  // namespace

QuantGroupKernelWeight QuantGroupKernelWeight::fromPacked(const QuantGroupWeight& w) {
  w.checkConsistent();
  if (w.bits != 4 && w.bits != 8)
    throw InputError("quantized weight: the kernel reads 4- and 8-bit codes, not " + std::to_string(w.bits));
  QuantGroupKernelWeight out;
  out.bits = w.bits;
  out.symmetric = w.symmetric;
  out.rows = w.rows;
  out.cols = w.cols;
  out.groupSize = w.groupSize;
  const int64_t chunks = k::quantChunks(w.cols, w.bits);
  const int64_t columns = k::quantScaleColumns(w.cols, w.groupSize, w.bits);
  const at::Tensor codes = w.codes.scalar_type() == at::kChar ? w.codes.view(at::kByte) : w.codes;
  out.codes = interleaveLanes(padTo(codes, paddedRows(w.rows), chunks * 128), chunks, 8, 16);
  out.scales = interleaveRows(scaleColumns(w.scales, w.rows, columns));
  if (!w.symmetric) out.zeros = interleaveRows(scaleColumns(w.zeros, w.rows, columns));
  out.launch.counters = zeroCounters(w.rows, w.codes.options());
  return out;
}

int64_t QuantGroupKernelWeight::bytes() const { return tensorBytes(codes) + tensorBytes(scales) + tensorBytes(zeros); }

at::Tensor gemv(const QuantGroupKernelWeight& w, const at::Tensor& x, at::Tensor out, const std::string& what,
                const GemvFusion& fusion) {
  k::QuantGroupGemvWeight kw;
  kw.codes = w.codes.data_ptr();
  kw.scales = reinterpret_cast<const uint16_t*>(w.scales.data_ptr());
  kw.zeros = w.zeros.defined() ? w.zeros.data_ptr<uint8_t>() : nullptr;
  kw.bits = w.bits;
  kw.symmetric = w.symmetric;
  kw.groupSize = w.groupSize;
  kw.scaleColumns = w.scales.size(1);
  return runGemv(
      x, out, w.rows, w.cols, w.codes, w.launch, what, fusion,
      [&](const k::GemvProblem& p, int sms) { return k::quantGroupGemvSplit(p, kw, sms); },
      [&](const k::GemvProblem& p, const k::GemvSplit& s, float* partials, int* counters, CUstream_st* stream) {
#ifdef PARETO_WITH_CUDA
        return k::runQuantGroupGemv(p, kw, s, partials, counters, stream);
#else
        (void)p, (void)s, (void)partials, (void)counters, (void)stream;
        return std::string("no CUDA kernels in this build");
#endif
      },
      [&](const k::GemvProblem& p) { return k::quantGroupGemvReference(p, kw); });
}

// --- bitmask + int4 -----------------------------------------------------------------------------------------

BitmaskInt4KernelWeight BitmaskInt4KernelWeight::fromPacked(const at::Tensor& masks, int n, int m,
                                                            const QuantGroupWeight& kept) {
  kept.checkConsistent();
  if (m <= 0 || 2 * n != m)
    throw InputError("bitmask int4 weight: the kernel reads 50%-dense patterns (2:4, 4:8, 8:16, 16:32), not " +
                     std::to_string(n) + ":" + std::to_string(m));
  if (kept.bits != 4) throw InputError("bitmask int4 weight: the kept values must be 4-bit codes");
  const int64_t rows = kept.rows, cols = kept.cols * 2;
  if (masks.dim() != 2 || masks.size(0) != rows || masks.size(1) * 32 != cols)
    throw InputError("bitmask int4 weight: masks do not match the kept values' shape");
  BitmaskInt4KernelWeight out;
  out.rows = rows;
  out.cols = cols;
  out.symmetric = kept.symmetric;
  out.groupSize = kept.groupSize;
  out.n = n;
  out.m = m;
  const int64_t chunks = k::ceilDiv(cols, 256);
  out.masks = relayoutMasks(masks, rows, cols, 16);
  if (masks.is_cuda() && k::bitmaskInt4UsesTensorCores(n, m, kept.groupSize, cols)) {
    // The metadata is computed once, at load time, on the CPU (a table lookup a mask nibble).
    const at::Tensor host = out.masks.cpu().contiguous();
    at::Tensor metadata = at::empty({host.size(0), chunks, 2, k::kRowsPerGroup, 4}, host.options());
    k::bitmaskInt4MmaMetadata(reinterpret_cast<const uint32_t*>(host.data_ptr<int>()), host.size(0), chunks,
                              reinterpret_cast<uint32_t*>(metadata.data_ptr<int>()));
    out.metadata = metadata.to(masks.device());
    out.masks = at::Tensor();
  }
  out.codes = interleaveLanes(padTo(kept.codes, paddedRows(rows), chunks * 64), chunks, 4, 16);
  const int64_t columns = k::bitmaskInt4ScaleColumns(cols, kept.groupSize);
  out.scales = interleaveRows(scaleColumns(kept.scales, rows, columns));
  if (!kept.symmetric) out.zeros = interleaveRows(scaleColumns(kept.zeros, rows, columns));
  out.launch.counters = zeroCounters(rows, masks.options());
  return out;
}

int64_t BitmaskInt4KernelWeight::bytes() const {
  return tensorBytes(masks) + tensorBytes(metadata) + tensorBytes(codes) + tensorBytes(scales) + tensorBytes(zeros);
}

at::Tensor gemv(const BitmaskInt4KernelWeight& w, const at::Tensor& x, at::Tensor out, const std::string& what,
                const GemvFusion& fusion) {
  k::BitmaskInt4GemvWeight kw;
  if (w.masks.defined()) kw.masks = reinterpret_cast<const uint32_t*>(w.masks.data_ptr<int>());
  if (w.metadata.defined()) kw.metadata = reinterpret_cast<const uint32_t*>(w.metadata.data_ptr<int>());
  kw.codes = w.codes.data_ptr();
  kw.scales = reinterpret_cast<const uint16_t*>(w.scales.data_ptr());
  kw.zeros = w.zeros.defined() ? w.zeros.data_ptr<uint8_t>() : nullptr;
  kw.symmetric = w.symmetric;
  kw.groupSize = w.groupSize;
  kw.scaleColumns = w.scales.size(1);
  kw.n = w.n;
  kw.m = w.m;
  return runGemv(
      x, out, w.rows, w.cols, w.codes, w.launch, what, fusion,
      [&](const k::GemvProblem& p, int sms) { return k::bitmaskInt4GemvSplit(p, kw, sms); },
      [&](const k::GemvProblem& p, const k::GemvSplit& s, float* partials, int* counters, CUstream_st* stream) {
#ifdef PARETO_WITH_CUDA
        return k::runBitmaskInt4Gemv(p, kw, s, partials, counters, stream);
#else
        (void)p, (void)s, (void)partials, (void)counters, (void)stream;
        return std::string("no CUDA kernels in this build");
#endif
      },
      [&](const k::GemvProblem& p) { return k::bitmaskInt4GemvReference(p, kw); });
}

// --- SpQR ---------------------------------------------------------------------------------------------------

namespace {

// Each lane's 128 codes of a chunk ([..., 128] bytes, values < 2^bits) as its 16·bits bytes of the kernel layout
// (kernels/SpqrGemv.h, spqrCodeBit): every code bit gathered to its place, 8 bits to a byte.
at::Tensor spqrLaneStreams(const at::Tensor& lanes, int bits) {
  std::vector<int64_t> source(size_t(k::kSpqrChunkCols * bits));  // the (column, bit) at each place of the stream
  for (int column = 0; column < k::kSpqrChunkCols; ++column)
    for (int bit = 0; bit < bits; ++bit) source[size_t(k::spqrCodeBit(bits, column, bit))] = column * bits + bit;
  const auto options = lanes.options().dtype(at::kLong);
  const at::Tensor shifts = at::arange(bits, options.dtype(at::kByte));
  const at::Tensor codeBits = at::bitwise_and(at::bitwise_right_shift(lanes.unsqueeze(-1), shifts), 1)
                                  .flatten(-2);  // [..., 128·bits]: column-major code bits
  const at::Tensor stream = codeBits.index_select(-1, at::tensor(source, options));
  std::vector<int64_t> shape = lanes.sizes().vec();
  shape.back() = 16 * bits;
  shape.push_back(8);
  return at::bitwise_left_shift(stream.view(shape), at::arange(8, options.dtype(at::kByte)))
      .sum(-1, false, at::kByte);
}

}  // namespace

SpqrKernelWeight SpqrKernelWeight::fromParts(const SpqrParts& parts) {
  const at::Tensor& codes = parts.codes;
  if (!codes.defined() || codes.dim() != 2) throw InputError("SpQR weight: codes must be [rows, cols]");
  const int64_t rows = codes.size(0), cols = codes.size(1);
  if (cols % k::kSpqrGroupCols != 0) throw InputError("SpQR weight: columns must be a multiple of 16");
  if (parts.bits < 2 || parts.bits > 4) throw InputError("SpQR weight: the kernel reads 2- to 4-bit codes");
  if (parts.scaleGroup <= 0 || 32 % parts.scaleGroup != 0)
    throw InputError("SpQR weight: second-level groups must be 1, 2, 4, 8, 16 or 32 rows");
  const int64_t groups = cols / k::kSpqrGroupCols;
  const int64_t chunks = k::spqrChunks(cols);
  const int64_t rowsP = paddedRows(rows);
  const int64_t nnz = parts.outlierValues.numel();
  SpqrKernelWeight out;
  out.bits = parts.bits;
  out.scaleGroup = parts.scaleGroup;
  out.rows = rows;
  out.cols = cols;

  // At an outlier the dense code becomes its group's zero code, so that the dense part adds exactly 0 there
  // and the outlier's own value is the weight.
  at::Tensor dense = codes.to(at::kByte).contiguous().clone();
  const at::Tensor offsets = parts.rowOffsets.to(at::kLong);
  const at::Tensor columns = parts.outlierColumns.to(at::kLong);
  if (nnz > 0) {
    const at::Tensor counts = offsets.narrow(0, 1, rows) - offsets.narrow(0, 0, rows);
    const at::Tensor outlierRows = at::repeat_interleave(at::arange(rows, offsets.options()), counts);
    const at::Tensor zeroAt = parts.zeroCodes.to(at::kByte).reshape({-1}).index_select(
        0, outlierRows * groups + at::div(columns, k::kSpqrGroupCols, "floor"));
    dense.view({-1}).index_put_({outlierRows * cols + columns}, zeroAt);
  }
  // Each lane's 128 codes of a chunk as its 16·bits bytes in pair order (kernels/SpqrGemv.h).
  const at::Tensor lanes = padTo(dense, rowsP, chunks * k::kSpqrChunkCols)
                               .view({rowsP / 32, 32, chunks, k::kSpqrChunkCols})
                               .permute({0, 2, 1, 3})
                               .contiguous();
  out.codes = spqrLaneStreams(lanes, parts.bits)
                  .view({rowsP / 32, chunks, 32, parts.bits, 16})
                  .permute({0, 1, 3, 2, 4})
                  .contiguous();
  const at::Tensor stats = parts.scaleCodes.to(at::kByte) + parts.zeroCodes.to(at::kByte) * 16;
  out.stats = interleaveLanes(padTo(stats, rowsP, chunks * 8), chunks, 1, 8).view({rowsP / 32, chunks, 32, 8});
  // Second-level grids [rows/scaleGroup, groups] → [G, C·8, 32/scaleGroup, 2] (base, step).
  const int64_t perGroup = 32 / parts.scaleGroup;
  const int64_t secondRows = (rowsP / 32) * perGroup;
  const at::Tensor base = padTo(parts.scaleBase.to(at::kHalf), secondRows, chunks * 8);
  const at::Tensor step = padTo(parts.scaleStep.to(at::kHalf), secondRows, chunks * 8);
  out.second = at::stack({base, step}, -1).view({rowsP / 32, perGroup, chunks * 8, 2}).permute({0, 2, 1, 3}).contiguous();
  at::Tensor rowOffsets = at::full({rowsP + 1}, nnz, offsets.options().dtype(at::kInt));
  rowOffsets.narrow(0, 0, rows + 1).copy_(parts.rowOffsets);
  out.rowOffsets = rowOffsets;
  out.outlierColumns = columns.to(at::kInt).to(at::kShort);  // bits of the uint16 column, cols ≤ 65536
  out.outlierValues = parts.outlierValues.to(at::kHalf).contiguous();
  out.launch.counters = zeroCounters(rows, codes.options());
  return out;
}

SpqrKernelWeight SpqrKernelWeight::fromPacked(const SpqrWeight& w) {
  w.checkConsistent();
  if (w.groupSize != k::kSpqrGroupCols)
    throw InputError("SpQR weight: the kernel reads groups of 16 columns, not " + std::to_string(w.groupSize));
  if (w.scaleBits > 4) throw InputError("SpQR weight: the kernel reads scale codes of at most 4 bits");
  const int64_t groups = w.cols / w.groupSize;
  SpqrParts parts;
  parts.bits = w.bits;
  parts.scaleGroup = w.scaleGroup;
  parts.codes = w.unpackCodes();
  parts.scaleCodes = unpackCodeBits(w.scaleCodes, w.scaleBits, w.rows * groups).view({w.rows, groups});
  parts.zeroCodes = unpackCodeBits(w.zeroCodes, w.bits, w.rows * groups).view({w.rows, groups});
  parts.scaleBase = w.scaleBase;
  parts.scaleStep = w.scaleStep;
  parts.rowOffsets = w.outlierRowOffsets;
  parts.outlierColumns = w.outlierColumns;
  parts.outlierValues = w.outlierValues;
  return fromParts(parts);
}

int64_t SpqrKernelWeight::bytes() const {
  return tensorBytes(codes) + tensorBytes(stats) + tensorBytes(second) + tensorBytes(rowOffsets) +
         tensorBytes(outlierColumns) + tensorBytes(outlierValues);
}

at::Tensor gemv(const SpqrKernelWeight& w, const at::Tensor& x, at::Tensor out, const std::string& what,
                const GemvFusion& fusion) {
  if (x.is_cuda() && folds(fusion)) return aroundThePlainKernel(w, x, out, what, fusion);
  k::SpqrGemvWeight kw;
  kw.codes = w.codes.data_ptr();
  kw.stats = w.stats.data_ptr<uint8_t>();
  kw.second = reinterpret_cast<const uint16_t*>(w.second.data_ptr());
  kw.rowOffsets = w.rowOffsets.data_ptr<int32_t>();
  kw.outlierColumns = reinterpret_cast<const uint16_t*>(w.outlierColumns.data_ptr());
  kw.outlierValues = reinterpret_cast<const uint16_t*>(w.outlierValues.data_ptr());
  kw.bits = w.bits;
  kw.scaleGroup = int(w.scaleGroup);
  return runGemv(
      x, out, w.rows, w.cols, w.codes, w.launch, what, fusion,
      [&](const k::GemvProblem& p, int sms) { return k::spqrGemvSplit(p, kw, sms); },
      [&](const k::GemvProblem& p, const k::GemvSplit& s, float* partials, int* counters, CUstream_st* stream) {
#ifdef PARETO_WITH_CUDA
        return k::runSpqrGemv(p, kw, s, partials, counters, stream);
#else
        (void)p, (void)s, (void)partials, (void)counters, (void)stream;
        return std::string("no CUDA kernels in this build");
#endif
      },
      [&](const k::GemvProblem& p) { return k::spqrGemvReference(p, kw); });
}

}  // namespace pareto
