#include "runtime/SyntheticWeights.h"

#include <ATen/ATen.h>

#include <cmath>

#include "util/Error.h"

namespace pareto {
namespace {

at::TensorOptions on(at::Device device, at::ScalarType dtype) { return at::TensorOptions().device(device).dtype(dtype); }

// Uniform integers in [low, high) as uint8.
at::Tensor randomCodes(at::IntArrayRef shape, int64_t low, int64_t high, at::Device device) {
  return at::randint(low, high, shape, on(device, at::kInt)).to(at::kByte);
}

}  // namespace

at::Tensor randomDenseWeight(int64_t rows, int64_t cols, at::ScalarType dtype, at::Device device, uint64_t seed) {
  at::manual_seed(seed);
  return (at::randn({rows, cols}, on(device, at::kFloat)) * 0.02).to(dtype);
}

BitmaskNMWeight randomBitmaskNM(int64_t rows, int64_t cols, int n, int m, at::ScalarType dtype, at::Device device,
                                uint64_t seed) {
  if (m <= 0 || n <= 0 || n > m || cols % m != 0) throw InputError("random bitmask weight: bad N:M pattern");
  const at::Tensor weight = randomDenseWeight(rows, cols, dtype, device, seed);
  const at::Tensor groups = weight.abs().to(at::kFloat).view({rows, cols / m, m});
  const at::Tensor keep = std::get<1>(groups.topk(n, -1));
  const at::Tensor mask = at::zeros_like(groups, groups.options().dtype(at::kBool)).scatter_(-1, keep, true);
  return BitmaskNMWeight::pack(weight, mask.view({rows, cols}), n, m);
}

QuantGroupWeight randomQuantGroup(int64_t rows, int64_t cols, int bits, bool symmetric, int64_t groupSize,
                                  at::Device device, uint64_t seed) {
  if (bits != 4 && bits != 8) throw InputError("random quantized weight: 4 or 8 bits");
  if (groupSize <= 0 || cols % groupSize != 0 || (bits == 4 && cols % 2 != 0))
    throw InputError("random quantized weight: the group size must divide the columns");
  at::manual_seed(seed);
  QuantGroupWeight w;
  w.bits = bits;
  w.symmetric = symmetric;
  w.groupSize = groupSize;
  w.rows = rows;
  w.cols = cols;
  if (bits == 4) {
    // Symmetric codes are q + 8 with q ∈ [−7, 7], i.e. 1..15; asymmetric ones 0..15.
    const int64_t low = symmetric ? 1 : 0;
    const at::Tensor lo = randomCodes({rows, cols / 2}, low, 16, device);
    const at::Tensor hi = randomCodes({rows, cols / 2}, low, 16, device);
    w.codes = lo + hi * 16;
  } else if (symmetric) {
    w.codes = at::randint(-127, 128, {rows, cols}, on(device, at::kInt)).to(at::kChar);
  } else {
    w.codes = randomCodes({rows, cols}, 0, 256, device);
  }
  const int64_t groups = cols / groupSize;
  // Scales such that weights come out near the std of a dense layer (0.02).
  const double step = 0.02 / (bits == 4 ? 4.0 : 64.0);
  w.scales = (at::rand({rows, groups}, on(device, at::kFloat)) * step + 0.5 * step).to(at::kHalf);
  if (!symmetric) w.zeros = randomCodes({rows, groups}, 0, int64_t(1) << bits, device);
  w.checkConsistent();
  return w;
}

SpqrParts randomSpqr(int64_t rows, int64_t cols, int bits, int64_t scaleGroup, double outlierFraction,
                     at::Device device, uint64_t seed) {
  if (cols % 16 != 0) throw InputError("random SpQR weight: columns must be a multiple of 16");
  if (scaleGroup <= 0) throw InputError("random SpQR weight: second-level groups must have rows");
  const int64_t secondRows = (rows + scaleGroup - 1) / scaleGroup;
  at::manual_seed(seed);
  const int64_t groups = cols / 16;
  SpqrParts p;
  p.bits = bits;
  p.scaleGroup = scaleGroup;
  p.codes = randomCodes({rows, cols}, 0, int64_t(1) << bits, device);
  p.scaleCodes = randomCodes({rows, groups}, 0, 8, device);
  p.zeroCodes = randomCodes({rows, groups}, 0, int64_t(1) << bits, device);
  const double step = 0.02 / (1 << (bits - 1));
  p.scaleBase = (at::rand({secondRows, groups}, on(device, at::kFloat)) * step + 0.25 * step).to(at::kHalf);
  p.scaleStep = (at::rand({secondRows, groups}, on(device, at::kFloat)) * (step / 8)).to(at::kHalf);
  const int64_t perRow = std::min<int64_t>(cols, std::llround(outlierFraction * double(cols)));
  const auto intOptions = on(device, at::kInt);
  p.rowOffsets = at::arange(rows + 1, intOptions) * perRow;
  if (perRow > 0) {
    const at::Tensor picked = std::get<1>(at::rand({rows, cols}, on(device, at::kFloat)).topk(perRow, -1));
    p.outlierColumns = std::get<0>(picked.sort(-1)).reshape({-1}).to(at::kInt);
  } else {
    p.outlierColumns = at::empty({0}, intOptions);
  }
  p.outlierValues = (at::randn({rows * perRow}, on(device, at::kFloat)) * 0.1).to(at::kHalf);
  return p;
}

}  // namespace pareto
