#include "formats/BitmaskNMWeight.h"

#include <ATen/ATen.h>

#include <limits>
#include <sstream>
#include <vector>

#include "formats/PackedBlocks.h"
#include "util/Error.h"

namespace pareto {
namespace {

constexpr int64_t kWordBits = 32;

std::string shapeText(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}

// 1 << b for b = 0..31 as int32, bit 31 being INT32_MIN: the same 32 bits a uint32 would hold.
at::Tensor bitValues(c10::Device device) {
  std::vector<int32_t> bits(kWordBits);
  for (int b = 0; b < kWordBits - 1; ++b) bits[b] = int32_t(1) << b;
  bits[kWordBits - 1] = std::numeric_limits<int32_t>::min();
  return at::tensor(bits, at::TensorOptions().dtype(at::kInt)).to(device);
}

// The same N:M rules as SparsityPattern::nm, restated so that this format needs only ATen and util/ and can be
// read by the model loader, which must not link the solvers.
void checkPattern(int n, int m) {
  const std::string text = std::to_string(n) + ":" + std::to_string(m);
  if (m < 2 || m > kWordBits || kWordBits % m != 0)
    throw InputError("bitmask " + text + ": M must divide 32 (2, 4, 8, 16 or 32), got " + std::to_string(m));
  if (n < 1 || n >= m)
    throw InputError("bitmask " + text + ": N (weights kept per group) must be in [1, M), got " + std::to_string(n));
}

void checkGroups(const at::Tensor& mask, int n, int m) {
  const int64_t rows = mask.size(0), cols = mask.size(1);
  const at::Tensor keptPerGroup = mask.reshape({rows, cols / m, m}).sum(-1);
  const at::Tensor wrong = (keptPerGroup != n).nonzero();
  if (wrong.size(0) == 0) return;
  const at::Tensor first = wrong[0].cpu();
  const int64_t row = first[0].item<int64_t>(), group = first[1].item<int64_t>();
  const int64_t kept = keptPerGroup[row][group].item<int64_t>();
  throw InputError("bitmask " + std::to_string(n) + ":" + std::to_string(m) + " weight: mask is not " +
                   std::to_string(n) + ":" + std::to_string(m) + ": row " + std::to_string(row) + ", columns " +
                   std::to_string(group * m) + ".." + std::to_string(group * m + m - 1) + " keep " +
                   std::to_string(kept) + " (" + std::to_string(wrong.size(0)) + " groups wrong in all)");
}

}  // namespace

BitmaskNMWeight BitmaskNMWeight::pack(const at::Tensor& weight, const at::Tensor& mask, int n, int m) {
  checkPattern(n, m);
  const std::string what = "bitmask " + std::to_string(n) + ":" + std::to_string(m) + " pack: ";
  if (!weight.defined() || weight.dim() != 2 || !at::isFloatingType(weight.scalar_type()))
    throw InputError(what + "weight must be a 2-D floating tensor [rows, cols]");
  if (!mask.defined() || mask.scalar_type() != at::kBool || mask.sizes() != weight.sizes())
    throw InputError(what + "mask must be a bool tensor of the weight's shape " + shapeText(weight.sizes()));
  const int64_t rows = weight.size(0), cols = weight.size(1);
  if (cols % kWordBits != 0)
    throw InputError(what + std::to_string(cols) + " input columns are not a multiple of 32 (one mask word each)");
  const at::Tensor keep = mask.to(weight.device());
  checkGroups(keep, n, m);

  BitmaskNMWeight packed;
  packed.n = n;
  packed.m = m;
  packed.rows = rows;
  packed.cols = cols;
  // A word's bits are disjoint, so their sum is their bitwise or. Bit 31 weighs -2^31 (its int32 value) and bits
  // 0-30 add up to at most 2^31 - 1, so no partial sum leaves the int32 range: summing in int32 (not the default
  // int64) is exact and needs half the scratch memory.
  packed.masks = (keep.reshape({rows, cols / kWordBits, kWordBits}).to(at::kInt) * bitValues(weight.device()))
                     .sum(-1, /*keepdim=*/false, at::kInt)
                     .contiguous();
  // masked_select walks the row-major order: per row, columns increasing.
  packed.values = weight.masked_select(keep).view({rows, cols * n / m}).contiguous();
  return packed;
}

// A packed weight may come from a file rather than from pack(), so its parts are checked before they are trusted.
void BitmaskNMWeight::checkConsistent() const {
  checkPattern(n, m);
  const std::string what = "bitmask " + std::to_string(n) + ":" + std::to_string(m) + " weight [" +
                           std::to_string(rows) + ", " + std::to_string(cols) + "]: ";
  if (rows < 0 || cols < 0 || cols % kWordBits != 0)
    throw InputError(what + "columns must be a non-negative multiple of 32");
  if (!masks.defined() || masks.scalar_type() != at::kInt || masks.dim() != 2 || masks.size(0) != rows ||
      masks.size(1) != cols / kWordBits)
    throw InputError(what + "masks must be int32 [rows, cols/32]");
  if (!values.defined() || !at::isFloatingType(values.scalar_type()) || values.dim() != 2 ||
      values.size(0) != rows || values.size(1) != cols * n / m)
    throw InputError(what + "values must be floating [rows, cols*N/M]");
}

at::Tensor BitmaskNMWeight::unpackMask() const {
  checkConsistent();
  const at::Tensor bits = bitValues(masks.device());
  const at::Tensor keep = (masks.unsqueeze(-1).bitwise_and(bits) != 0).reshape({rows, cols});
  checkGroups(keep, n, m);
  return keep;
}

at::Tensor BitmaskNMWeight::unpack() const {
  at::Tensor dense = at::zeros({rows, cols}, values.options());
  dense.masked_scatter_(unpackMask().to(values.device()), values);
  return dense;
}

// From the block size (formats/PackedBlocks.h), not from the tensors: checkConsistent() has just made sure the
// tensors hold exactly that many bytes, so the accounting and the static_assert'ed blocks are one number.
int64_t BitmaskNMWeight::storedBytes() const {
  checkConsistent();
  return rows * (cols / kWordBits) * packed::bitmaskBlockBytes(n, m, int64_t(values.element_size()));
}

double BitmaskNMWeight::bitsPerWeight() const {
  return rows * cols == 0 ? 0.0 : double(storedBytes()) * 8.0 / double(rows * cols);
}

}  // namespace pareto
