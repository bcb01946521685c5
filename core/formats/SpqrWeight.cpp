#include "formats/SpqrWeight.h"

#include "formats/BitPacking.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "formats/PackedBlocks.h"
#include "util/Error.h"

namespace pareto {
namespace {

const std::string kWhat = "SpQR weight";

void checkBits(int bits, const std::string& what) {
  if (bits < 1 || bits > 8) throw InputError(kWhat + ": " + what + " bits must be in 1..8, got " + std::to_string(bits));
}

}  // namespace

at::Tensor spqrDequantizeStat(const at::Tensor& codes, const at::Tensor& base, const at::Tensor& step) {
  return base.to(at::kFloat) + codes.to(at::kFloat) * step.to(at::kFloat);
}

at::Tensor spqrDequantizeWeight(const at::Tensor& codes, const at::Tensor& scale, const at::Tensor& zero) {
  return (codes.to(at::kFloat) - zero.to(at::kFloat)) * scale.to(at::kFloat);
}

int64_t spqrStoredBits(int64_t rows, int64_t cols, int bits, int64_t groupSize, int scaleBits, int64_t scaleGroup,
                       int64_t outliers) {
  return 8 * (packed::spqrDenseBytes(rows, cols, bits, groupSize, scaleBits, scaleGroup) +
              packed::spqrOutlierBytes(rows, cols, outliers));
}

SpqrWeight SpqrWeight::pack(const SpqrCodes& r) {
  const std::string what = kWhat + " pack: ";
  if (!r.codes.defined() || r.codes.dim() != 2 || r.codes.scalar_type() != at::kByte || r.codes.numel() == 0)
    throw InputError(what + "codes must be a non-empty uint8 [rows, cols] tensor");
  checkBits(r.bits, "weight");
  checkBits(r.scaleBits, "scale");
  SpqrWeight p;
  p.bits = r.bits;
  p.scaleBits = r.scaleBits;
  p.groupSize = r.groupSize;
  p.scaleGroup = r.scaleGroup;
  p.rows = r.codes.size(0);
  p.cols = r.codes.size(1);
  if (p.groupSize < 1 || p.cols % p.groupSize != 0 || p.scaleGroup < 1 || p.rows % p.scaleGroup != 0)
    throw InputError(what + "group sizes do not divide the shape");
  const at::Device device = r.codes.device();
  if ((r.codes.to(at::kShort) >= (1 << p.bits)).any().item<bool>()) throw InputError(what + "codes out of range");
  const int64_t groups = p.cols / p.groupSize;
  auto checkStatCodes = [&](const at::Tensor& t, int b, const char* name) {
    if (!t.defined() || t.scalar_type() != at::kByte || t.dim() != 2 || t.size(0) != p.rows || t.size(1) != groups)
      throw InputError(what + name + " must be uint8 [rows, groups] = [" + std::to_string(p.rows) + ", " +
                       std::to_string(groups) + "]");
    if ((t.to(at::kShort) >= (1 << b)).any().item<bool>())
      throw InputError(what + name + " out of range (" + std::to_string(b) + " bits)");
  };
  checkStatCodes(r.scaleCodes, p.scaleBits, "scale codes");
  checkStatCodes(r.zeroCodes, p.bits, "zero codes");
  p.codes = packCodeBits(r.codes, p.bits);
  p.scaleCodes = packCodeBits(r.scaleCodes.to(device), p.scaleBits);
  p.zeroCodes = packCodeBits(r.zeroCodes.to(device), p.bits);
  p.scaleBase = r.scaleBase.to(device, at::kHalf).contiguous();
  p.scaleStep = r.scaleStep.to(device, at::kHalf).contiguous();
  p.outlierRowOffsets = r.outlierRowOffsets.to(device).contiguous();
  p.outlierColumns = r.outlierColumns.to(device).contiguous();
  p.outlierValues = r.outlierValues.to(device).contiguous();
  p.checkConsistent();
  return p;
}

void SpqrWeight::checkConsistent() const {
  const std::string what = kWhat + ": ";
  checkBits(bits, "weight");
  checkBits(scaleBits, "scale");
  if (rows < 1 || cols < 1) throw InputError(what + "empty shape");
  if (groupSize < 1 || cols % groupSize != 0 || scaleGroup < 1 || rows % scaleGroup != 0)
    throw InputError(what + "group size " + std::to_string(groupSize) + " / scale group " +
                     std::to_string(scaleGroup) + " do not divide " + std::to_string(rows) + " x " +
                     std::to_string(cols));
  const int64_t groups = cols / groupSize;
  auto checkPacked = [&](const at::Tensor& t, int b, int64_t n, const char* name) {
    const int64_t bytes = packed::codeStreamBytes(n, b);
    if (!t.defined() || t.dim() != 1 || t.scalar_type() != at::kByte || t.numel() != bytes)
      throw InputError(what + name + " must be uint8 [" + std::to_string(bytes) + "]");
  };
  checkPacked(codes, bits, rows * cols, "codes");
  checkPacked(scaleCodes, scaleBits, rows * groups, "scale codes");
  checkPacked(zeroCodes, bits, rows * groups, "zero codes");
  for (const at::Tensor* t : {&scaleBase, &scaleStep})
    if (!t->defined() || t->scalar_type() != at::kHalf || t->dim() != 2 || t->size(0) != rows / scaleGroup ||
        t->size(1) != groups)
      throw InputError(what + "second-level stats must be fp16 [" + std::to_string(rows / scaleGroup) + ", " +
                       std::to_string(groups) + "]");
  if (!outlierRowOffsets.defined() || outlierRowOffsets.scalar_type() != at::kInt || outlierRowOffsets.dim() != 1 ||
      outlierRowOffsets.numel() != rows + 1)
    throw InputError(what + "outlier row offsets must be int32 [rows + 1]");
  const at::ScalarType indexType = cols <= 32767 ? at::kShort : at::kInt;
  if (!outlierColumns.defined() || outlierColumns.scalar_type() != indexType || outlierColumns.dim() != 1)
    throw InputError(what + "outlier columns must be " + c10::toString(indexType) + " [nnz]");
  if (!outlierValues.defined() || outlierValues.scalar_type() != at::kHalf ||
      outlierValues.numel() != outlierColumns.numel())
    throw InputError(what + "outlier values must be fp16 [nnz]");
  const at::Tensor offsets = outlierRowOffsets.to(at::kLong);
  const int64_t nnz = outlierColumns.numel();
  if (offsets[0].item<int64_t>() != 0 || offsets[rows].item<int64_t>() != nnz ||
      (offsets.narrow(0, 1, rows) < offsets.narrow(0, 0, rows)).any().item<bool>())
    throw InputError(what + "outlier row offsets are not a valid CSR over " + std::to_string(nnz) + " values");
  if (nnz > 0) {
    const at::Tensor columns = outlierColumns.to(at::kLong);
    if ((columns < 0).any().item<bool>() || (columns >= cols).any().item<bool>())
      throw InputError(what + "outlier column index out of range");
  }
}

at::Tensor SpqrWeight::unpackCodes() const {
  checkConsistent();
  return unpackCodeBits(codes, bits, rows * cols).reshape({rows, cols});
}

at::Tensor SpqrWeight::unpack() const {
  const at::Tensor q = unpackCodes();
  const int64_t groups = cols / groupSize, blocks = rows / scaleGroup;
  const at::Tensor sc = unpackCodeBits(scaleCodes, scaleBits, rows * groups).reshape({blocks, scaleGroup, groups});
  const at::Tensor scale =
      spqrDequantizeStat(sc, scaleBase.unsqueeze(1), scaleStep.unsqueeze(1)).reshape({rows, groups, 1});
  const at::Tensor zero = unpackCodeBits(zeroCodes, bits, rows * groups).reshape({rows, groups, 1});
  at::Tensor dense = spqrDequantizeWeight(q.reshape({rows, groups, groupSize}), scale, zero).reshape({rows, cols});
  const int64_t nnz = outlierColumns.numel();
  if (nnz > 0) {
    const at::Tensor counts = outlierRowOffsets.to(at::kLong).diff();
    const at::Tensor rowIndex = at::repeat_interleave(at::arange(rows, counts.options()), counts);
    const at::Tensor flatIndex = rowIndex * cols + outlierColumns.to(at::kLong);
    dense.view({-1}).index_copy_(0, flatIndex, outlierValues.to(at::kFloat));
  }
  return dense;
}

at::Tensor SpqrWeight::unpack(at::ScalarType dtype) const { return unpack().to(dtype); }

int64_t SpqrWeight::storedBytes() const {
  checkConsistent();
  return spqrStoredBits(rows, cols, bits, groupSize, scaleBits, scaleGroup, outlierColumns.numel()) / 8;
}

double SpqrWeight::bitsPerWeight() const {
  return rows * cols == 0 ? 0.0 : double(storedBytes()) * 8.0 / double(rows * cols);
}

}  // namespace pareto
