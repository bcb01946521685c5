#include "formats/BitPacking.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "util/Error.h"

namespace pareto {
namespace {

// Codes per chunk (a multiple of 8), to bound the int64 temporaries.
constexpr int64_t kChunk = int64_t(1) << 20;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void checkBits(int bits, const std::string& what) {
  if (bits < 1 || bits > 8) throw InputError("bit-packed codes: " + what + " bits must be in 1..8, got " + std::to_string(bits));
}

}  // namespace

at::Tensor packCodeBits(const at::Tensor& codes, int bits) {
  checkBits(bits, "code");
  const at::Tensor flat = codes.reshape({-1});
  const int64_t n = flat.numel();
  const int64_t words = ceilDiv(n, 8);
  at::Tensor out = at::empty({words * bits}, codes.options().dtype(at::kByte));
  if (n == 0) return out;
  if (bits == 8) {
    out.zero_();
    out.narrow(0, 0, n).copy_(flat);
    return out;
  }
  const auto longOptions = codes.options().dtype(at::kLong);
  // code k of a word sits at bit b·k; bits ≤ 7 keeps the 8 codes within 56 bits.
  const at::Tensor codeShift = at::pow(at::full({8}, 2, longOptions), at::arange(8, longOptions) * bits);
  const at::Tensor byteShift = at::pow(at::full({bits}, 256, longOptions), at::arange(bits, longOptions));
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t count = std::min(kChunk, n - start);
    const int64_t chunkWords = ceilDiv(count, 8);
    at::Tensor c = at::zeros({chunkWords * 8}, longOptions);
    c.narrow(0, 0, count).copy_(flat.narrow(0, start, count));
    const at::Tensor word = (c.reshape({chunkWords, 8}) * codeShift).sum(1, /*keepdim=*/true);
    const at::Tensor bytes = at::remainder(at::div(word, byteShift, "floor"), 256);
    out.narrow(0, (start / 8) * bits, chunkWords * bits).copy_(bytes.reshape({-1}));
  }
  return out;
}

at::Tensor unpackCodeBits(const at::Tensor& packed, int bits, int64_t count) {
  checkBits(bits, "code");
  const int64_t words = ceilDiv(count, 8);
  if (!packed.defined() || packed.dim() != 1 || packed.scalar_type() != at::kByte || packed.numel() != words * bits)
    throw InputError("bit-packed codes: packed codes must be uint8 [" + std::to_string(words * bits) + "] for " +
                     std::to_string(count) + " " + std::to_string(bits) + "-bit codes");
  if (bits == 8) return packed.narrow(0, 0, count).clone();
  at::Tensor out = at::empty({count}, packed.options());
  const auto longOptions = packed.options().dtype(at::kLong);
  const at::Tensor codeShift = at::pow(at::full({8}, 2, longOptions), at::arange(8, longOptions) * bits);
  const at::Tensor byteShift = at::pow(at::full({bits}, 256, longOptions), at::arange(bits, longOptions));
  for (int64_t start = 0; start < count; start += kChunk) {
    const int64_t n = std::min(kChunk, count - start);
    const int64_t chunkWords = ceilDiv(n, 8);
    const at::Tensor bytes = packed.narrow(0, (start / 8) * bits, chunkWords * bits).to(at::kLong);
    const at::Tensor word = (bytes.reshape({chunkWords, bits}) * byteShift).sum(1, /*keepdim=*/true);
    const at::Tensor c = at::remainder(at::div(word, codeShift, "floor"), int64_t(1) << bits);
    out.narrow(0, start, n).copy_(c.reshape({-1}).narrow(0, 0, n));
  }
  return out;
}

}  // namespace pareto
