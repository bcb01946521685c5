#include "compress/QuantGrid.h"

#include "compress/SolverInputs.h"

#include <ATen/ATen.h>

#include <sstream>

#include "util/Error.h"

namespace pareto {
namespace {

constexpr double kHalfMax = 65504.0;

// The smallest fp16 value >= s, for positive s, in s's dtype. Positive finite halves are ordered like their bit
// patterns, so the next one up is the pattern plus one.
at::Tensor roundUpToHalf(const at::Tensor& s) {
  const at::Tensor half = s.to(at::kHalf).contiguous();
  const at::Tensor back = half.to(s.scalar_type());
  const at::Tensor next = (half.view(at::kShort) + 1).view(at::kHalf).to(s.scalar_type());
  return at::where(back < s, next, back);
}

}  // namespace

QuantGrid findQuantGrid(const at::Tensor& x, const QuantSpec& spec, const std::string& who) {
  const double levels = double(spec.qmax());  // 2^(b−1) − 1 steps either side of 0, or 2^b − 1 across
  at::Tensor scale, low;
  if (spec.symmetric) {
    scale = x.abs().amax(1, /*keepdim=*/true) / levels;
  } else {
    low = x.amin(1, /*keepdim=*/true).clamp_max(0);
    const at::Tensor high = x.amax(1, /*keepdim=*/true).clamp_min(0);
    scale = (high - low) / levels;
  }
  scale = roundUpToHalf(scale.masked_fill(scale == 0, 1));
  if (!(scale <= kHalfMax).all().item<bool>())
    throw InputError(who + ": " + spec.label() + " scale exceeds the fp16 range (|w| up to " +
                     std::to_string(x.abs().max().item<double>()) + ")");
  QuantGrid grid;
  grid.scale = scale;
  grid.zero = spec.symmetric ? at::zeros_like(scale) : at::round(-low / scale).clamp(0, double(spec.qmax()));
  return grid;
}

at::Tensor quantizeToCodes(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& zero,
                           const QuantSpec& spec) {
  return at::clamp(at::round(x / scale) + zero, double(spec.qmin()), double(spec.qmax()));
}

at::Tensor dequantizeCodes(const at::Tensor& codes, const at::Tensor& scale, const at::Tensor& zero) {
  return (codes - zero) * scale;
}

void checkQuantWeight(const at::Tensor& weight, const QuantSpec& spec, const std::string& moduleName) {
  const std::string who = solverSubject(moduleName);
  spec.validate(who);
  checkWeightMatrix(weight, who);
  if (weight.numel() == 0) throw InputError(who + ": weight is empty");
  spec.groupsPerRow(weight.size(1), who);
  checkFiniteWeight(weight, who);
}

QuantResult quantKeptColumns(const QuantResult& result, const at::Tensor& keep) {
  if (!keep.defined() || keep.scalar_type() != at::kBool || keep.sizes() != result.codes.sizes())
    throw InputError("kept columns: the keep mask must be bool of the codes' shape");
  const int64_t rows = keep.size(0);
  const at::Tensor perRow = keep.sum(1);
  const int64_t kept = rows == 0 ? 0 : perRow[0].item<int64_t>();
  if (!(perRow == kept).all().item<bool>())
    throw InputError("kept columns: the rows keep different numbers of weights, so they cannot be compacted");
  const at::Tensor mask = keep.to(result.codes.device());
  QuantResult out;
  out.codes = result.codes.masked_select(mask).view({rows, kept});
  out.dequantized = result.dequantized.masked_select(mask.to(result.dequantized.device())).view({rows, kept});
  out.scales = result.scales;
  out.zeros = result.zeros;
  return out;
}

QuantResult rtnQuantize(const at::Tensor& weight, const QuantSpec& spec, const std::string& moduleName) {
  checkQuantWeight(weight, spec, moduleName);
  const std::string who = solverSubject(moduleName);
  const at::ScalarType work = weight.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor w = weight.to(work).contiguous();
  const int64_t rows = w.size(0), cols = w.size(1);

  // [gridRows, gridsPerRow, columnsPerGrid]: one grid per (row, group).
  int64_t gridRows = rows, gridsPerRow = spec.groupsPerRow(cols, who), perGrid = spec.columnsPerGroup(cols);
  if (spec.granularity == QuantSpec::Granularity::Tensor) {
    gridRows = 1;
    perGrid = rows * cols;
  }
  const at::Tensor x = w.reshape({gridRows, gridsPerRow, perGrid});
  const QuantGrid grid = findQuantGrid(x.reshape({gridRows * gridsPerRow, perGrid}), spec, who);
  const at::Tensor scale = grid.scale.reshape({gridRows, gridsPerRow, 1});
  const at::Tensor zero = grid.zero.reshape({gridRows, gridsPerRow, 1});
  const at::Tensor codes = quantizeToCodes(x, scale, zero, spec);

  QuantResult result;
  result.dequantized = dequantizeCodes(codes, scale, zero).reshape({rows, cols}).to(weight.scalar_type());
  result.codes = codes.reshape({rows, cols}).to(spec.symmetric ? at::kChar : at::kByte);
  result.scales = scale.reshape({gridRows, gridsPerRow}).to(at::kFloat);
  if (!spec.symmetric) result.zeros = zero.reshape({gridRows, gridsPerRow}).to(at::kByte);
  return result;
}

}  // namespace pareto
