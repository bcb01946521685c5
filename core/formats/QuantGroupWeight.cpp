#include "formats/QuantGroupWeight.h"

#include "formats/BitPacking.h"

#include <ATen/ATen.h>

#include <sstream>

#include "formats/PackedBlocks.h"
#include "util/Error.h"

namespace pareto {
namespace {

std::string shapeText(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}

std::string formatName(int bits, bool symmetric) {
  return "quantized int" + std::to_string(bits) + (symmetric ? " sym" : " asym") + " weight";
}

int64_t codeMin(int bits, bool symmetric) { return symmetric ? -((int64_t(1) << (bits - 1)) - 1) : 0; }
int64_t codeMax(int bits, bool symmetric) {
  return symmetric ? (int64_t(1) << (bits - 1)) - 1 : (int64_t(1) << bits) - 1;
}

void checkPackable(int bits, bool symmetric) {
  if (bits < 2 || bits > 8)
    throw InputError(formatName(bits, symmetric) + ": " + std::to_string(bits) + "-bit codes are not packable (2..8)");
}

// Bytes per row of packed codes: nibbles for 4 bits, bytes for 8, a little-endian bit stream otherwise.
int64_t packedCodeCols(int bits, int64_t cols) { return bits == 8 ? cols : cols * bits / 8; }
bool packsWholeBytes(int bits, int64_t cols) { return bits == 8 || (bits == 4 && cols % 2 == 0) || cols % 8 == 0; }

// Rows of whole 8-code words keep every row byte-aligned in the shared stream, so [rows, cols·b/8] views it.
at::Tensor packBitStream(const at::Tensor& u, int bits) {
  return packCodeBits(u, bits).view({u.size(0), u.size(1) * bits / 8});
}

at::Tensor unpackBitStream(const at::Tensor& bytes, int bits, int64_t cols) {
  return unpackCodeBits(bytes.reshape({-1}).contiguous(), bits, bytes.size(0) * cols).view({bytes.size(0), cols})
      .to(at::kLong);
}

}  // namespace

QuantGroupWeight QuantGroupWeight::pack(const QuantResult& result, const QuantSpec& spec) {
  const int bits = spec.bits;
  const bool symmetric = spec.symmetric;
  checkPackable(bits, symmetric);
  const std::string what = formatName(bits, symmetric) + " pack: ";
  const at::Tensor& codes = result.codes;
  const at::ScalarType codeType = symmetric ? at::kChar : at::kByte;
  if (!codes.defined() || codes.dim() != 2 || codes.scalar_type() != codeType || codes.numel() == 0)
    throw InputError(what + "codes must be a non-empty 2-D " + c10::toString(codeType) + " tensor [rows, cols]");
  const int64_t rows = codes.size(0), cols = codes.size(1);
  if (!packsWholeBytes(bits, cols))
    throw InputError(what + std::to_string(cols) + " columns of " + std::to_string(bits) +
                     "-bit codes do not fill whole bytes");
  const at::Tensor& scales = result.scales;
  if (!scales.defined() || scales.dim() != 2 || !at::isFloatingType(scales.scalar_type()))
    throw InputError(what + "scales must be a 2-D floating tensor");

  int64_t scaleRows = rows, groups = 1;
  switch (spec.granularity) {
    case QuantSpec::Granularity::Tensor: scaleRows = 1; break;
    case QuantSpec::Granularity::Channel: break;
    case QuantSpec::Granularity::Group:
      if (spec.groupSize < 1 || cols % spec.groupSize != 0)
        throw InputError(what + std::to_string(cols) + " columns are not a multiple of the group size " +
                         std::to_string(spec.groupSize));
      groups = cols / spec.groupSize;
      break;
  }
  if (scales.size(0) != scaleRows || scales.size(1) != groups)
    throw InputError(what + "scales of shape " + shapeText(scales.sizes()) + " do not match [" +
                     std::to_string(scaleRows) + ", " + std::to_string(groups) + "] for " + std::to_string(rows) +
                     " x " + std::to_string(cols) + " codes");
  const at::Tensor scales32 = scales.to(codes.device(), at::kFloat);
  const at::Tensor scales16 = scales32.to(at::kHalf);
  if (!at::equal(scales16.to(at::kFloat), scales32) || !(scales32 > 0).all().item<bool>() ||
      !at::isfinite(scales16).all().item<bool>())
    throw InputError(what + "scales must be positive and exactly representable in fp16");

  const at::Tensor wide = codes.to(at::kShort);
  const int64_t lo = codeMin(bits, symmetric), hi = codeMax(bits, symmetric);
  if (!((wide >= lo).logical_and(wide <= hi)).all().item<bool>())
    throw InputError(what + "codes outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");

  QuantGroupWeight packed;
  packed.bits = bits;
  packed.symmetric = symmetric;
  packed.groupSize = cols / groups;
  packed.rows = rows;
  packed.cols = cols;
  packed.scales = scales16.contiguous();
  if (!symmetric) {
    const at::Tensor& zeros = result.zeros;
    if (!zeros.defined() || zeros.scalar_type() != at::kByte || zeros.sizes() != scales.sizes())
      throw InputError(what + "asymmetric codes need uint8 zeros of the scales' shape " + shapeText(scales.sizes()));
    const at::Tensor z = zeros.to(codes.device());
    if (!(z.to(at::kShort) <= hi).all().item<bool>())
      throw InputError(what + "zero points above " + std::to_string(hi));
    packed.zeros = z.contiguous().clone();
  } else if (result.zeros.defined()) {
    throw InputError(what + "symmetric codes have no zero points, but zeros were given");
  }
  if (bits == 4) {
    const at::Tensor nibbles = (symmetric ? wide + 8 : wide).reshape({rows, cols / 2, 2});
    packed.codes = (nibbles.select(2, 0) + nibbles.select(2, 1) * 16).to(at::kByte).contiguous();
  } else if (bits == 8) {
    packed.codes = codes.contiguous().clone();
  } else {
    // Symmetric codes are biased by 2^(b−1) into [1, 2^b − 1], as the nibbles are by 8.
    packed.codes = packBitStream(symmetric ? wide + (int64_t(1) << (bits - 1)) : wide, bits);
  }
  return packed;
}

void QuantGroupWeight::checkConsistent() const {
  checkPackable(bits, symmetric);
  const std::string what = formatName(bits, symmetric) + ": ";
  if (rows < 1 || cols < 1) throw InputError(what + "empty shape");
  if (!packsWholeBytes(bits, cols))
    throw InputError(what + std::to_string(cols) + " columns do not fill whole bytes of " + std::to_string(bits) +
                     "-bit codes");
  const int64_t codeCols = packedCodeCols(bits, cols);
  const at::ScalarType codeType = bits != 8 || !symmetric ? at::kByte : at::kChar;
  if (!codes.defined() || codes.scalar_type() != codeType || codes.dim() != 2 || codes.size(0) != rows ||
      codes.size(1) != codeCols)
    throw InputError(what + "codes must be " + c10::toString(codeType) + " [" + std::to_string(rows) + ", " +
                     std::to_string(codeCols) + "]");
  if (groupSize < 1 || cols % groupSize != 0)
    throw InputError(what + "group size " + std::to_string(groupSize) + " does not divide " + std::to_string(cols) +
                     " columns");
  const int64_t groups = cols / groupSize;
  if (!scales.defined() || scales.scalar_type() != at::kHalf || scales.dim() != 2 ||
      (scales.size(0) != rows && scales.size(0) != 1) || scales.size(1) != groups)
    throw InputError(what + "scales must be fp16 [" + std::to_string(rows) + " or 1, " + std::to_string(groups) + "]");
  if (symmetric && zeros.defined()) throw InputError(what + "symmetric weight with zero points");
  if (!symmetric && (!zeros.defined() || zeros.scalar_type() != at::kByte || zeros.sizes() != scales.sizes()))
    throw InputError(what + "zeros must be uint8 of the scales' shape " + shapeText(scales.sizes()));
}

at::Tensor QuantGroupWeight::unpackCodes() const {
  checkConsistent();
  if (bits == 8) return codes;
  if (bits != 4) {
    const at::Tensor u = unpackBitStream(codes, bits, cols);
    return symmetric ? (u - (int64_t(1) << (bits - 1))).to(at::kChar) : u.to(at::kByte);
  }
  const at::Tensor bytes = codes.to(at::kShort);
  const at::Tensor low = at::remainder(bytes, 16), high = at::div(bytes, 16, "floor");
  const at::Tensor nibbles = at::stack({low, high}, 2).reshape({rows, cols});
  return symmetric ? (nibbles - 8).to(at::kChar) : nibbles.to(at::kByte);
}

at::Tensor QuantGroupWeight::unpack() const {
  const at::Tensor q = unpackCodes().to(at::kFloat);
  const int64_t scaleRows = scales.size(0), groups = scales.size(1);
  const at::Tensor scale = scales.to(at::kFloat).reshape({scaleRows, groups, 1});
  const at::Tensor zero = symmetric ? at::zeros_like(scale) : zeros.to(at::kFloat).reshape({scaleRows, groups, 1});
  at::Tensor grouped;
  if (scaleRows == 1 && groups == 1)
    grouped = q.reshape({1, 1, rows * cols});
  else
    grouped = q.reshape({rows, groups, groupSize});
  // The solvers' dequantizeCodes: (codes − zero) · scale.
  return ((grouped - zero) * scale).reshape({rows, cols});
}

at::Tensor QuantGroupWeight::unpack(at::ScalarType dtype) const { return unpack().to(dtype); }

int64_t QuantGroupWeight::storedBytes() const {
  checkConsistent();
  // Per grid (one scale, and a zero when asymmetric): a group's bytes less its codes; per-tensor grids have one.
  const int64_t grids = scales.size(0) * scales.size(1);
  const int64_t statBytes = packed::quantGroupBytes(bits, groupSize, symmetric) -
                            packed::quantRowCodeBytes(groupSize, bits);
  return rows * packed::quantRowCodeBytes(cols, bits) + grids * statBytes;
}

void checkColumnPermutation(const at::Tensor& permutation, int64_t cols) {
  if (!permutation.defined() || permutation.dim() != 1 || permutation.numel() != cols ||
      at::isFloatingType(permutation.scalar_type()) || permutation.scalar_type() == at::kBool)
    throw InputError("column permutation must be an integer tensor [" + std::to_string(cols) + "]" +
                     (permutation.defined() ? ", got " + std::string(c10::toString(permutation.scalar_type())) + " " +
                                                  shapeText(permutation.sizes())
                                            : std::string()));
  const at::Tensor p = permutation.to(at::kLong);
  if ((p < 0).any().item<bool>() || (p >= cols).any().item<bool>())
    throw InputError("column permutation has entries outside 0.." + std::to_string(cols - 1));
  const at::Tensor seen = at::zeros({cols}, p.options()).index_add_(0, p, at::ones_like(p));
  if (!(seen == 1).all().item<bool>()) {
    const int64_t missing = (seen == 0).nonzero()[0][0].item<int64_t>();
    throw InputError("column permutation is not a permutation of 0.." + std::to_string(cols - 1) + ": column " +
                     std::to_string(missing) + " is missing");
  }
}

double QuantGroupWeight::bitsPerWeight() const {
  return rows * cols == 0 ? 0.0 : double(storedBytes()) * 8.0 / double(rows * cols);
}

}  // namespace pareto
