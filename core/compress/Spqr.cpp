#include "compress/Spqr.h"

#include "compress/ObsSweep.h"
#include "compress/SolverInputs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "compress/QuantGrid.h"
#include "formats/SpqrWeight.h"
#include "util/Error.h"

namespace pareto {
namespace {

constexpr double kMinScale = 5.9604644775390625e-08;  // 2^-24, the smallest positive fp16

// Half-precision neighbours of float32 values: the smallest fp16 >= x (up) and the largest fp16 <= x (down).
at::Tensor halfUp(const at::Tensor& x) {
  const at::Tensor h = x.to(at::kHalf).contiguous();
  const at::Tensor back = h.to(at::kFloat);
  const at::Tensor bits = h.view(at::kShort).to(at::kInt);
  // Positive: the next pattern up; negative: the pattern one down (smaller magnitude); ±0: the smallest subnormal.
  const at::Tensor nextBits = at::where(back > 0, bits + 1, at::where(back < 0, bits - 1, at::ones_like(bits)));
  const at::Tensor next = nextBits.to(at::kShort).view(at::kHalf).to(at::kFloat);
  return at::where(back < x, next, back);
}
at::Tensor halfDown(const at::Tensor& x) { return -halfUp(-x); }

struct StatGrid {
  at::Tensor codes;        // float [rows] in [0, 2^bits − 1]
  at::Tensor base, step;   // float32, fp16-exact, [rows / scaleGroup]
  at::Tensor value;        // float32 [rows]: base + code · step
};

// Second level: one min-max grid of `bits` bits per `scaleGroup` consecutive entries of x (float32 [rows]).
StatGrid quantizeStat(const at::Tensor& x, int bits, int64_t scaleGroup, const std::string& who, const char* name) {
  const double maxq = double((int64_t(1) << bits) - 1);
  const at::Tensor blocks = x.reshape({-1, scaleGroup});
  StatGrid grid;
  grid.base = halfDown(blocks.amin(1, /*keepdim=*/true));
  const at::Tensor range = blocks.amax(1, /*keepdim=*/true) - grid.base;
  grid.step = halfUp(at::where(range > 0, range / maxq, at::ones_like(range)));
  if (!at::isfinite(grid.base).all().item<bool>() || !at::isfinite(grid.step).all().item<bool>())
    throw InputError(who + ": SpQR " + name + " exceed the fp16 range");
  const at::Tensor codes = at::clamp(at::round((blocks - grid.base) / grid.step), 0.0, maxq);
  grid.value = spqrDequantizeStat(codes, grid.base, grid.step).reshape({-1});
  grid.codes = codes.reshape({-1});
  grid.base = grid.base.reshape({-1});
  grid.step = grid.step.reshape({-1});
  return grid;
}

// Σ_k (x_k − q(x_k))² / d_k for each row of x [..., g] quantized on its own first-level min-max grid (containing
// 0, integer zero point), where `excluded` entries neither widen the grid nor count (they are kept exactly).
at::Tensor groupError(const at::Tensor& x, const at::Tensor& excluded, const at::Tensor& d, double maxq) {
  const double inf = std::numeric_limits<double>::infinity();
  const at::Tensor lo = x.masked_fill(excluded, inf).amin(-1, /*keepdim=*/true).clamp_max(0);
  const at::Tensor hi = x.masked_fill(excluded, -inf).amax(-1, /*keepdim=*/true).clamp_min(0);
  const at::Tensor s = ((hi - lo) / maxq).clamp_min(kMinScale);
  const at::Tensor z = at::clamp(at::round(-lo / s), 0.0, maxq);
  const at::Tensor q = (at::clamp(at::round(x / s + z), 0.0, maxq) - z) * s;
  return ((x - q).square() / d).masked_fill(excluded, 0).sum(-1);
}

}  // namespace

void SpqrOptions::validate(const std::string& who) const {
  if (bits < 2 || bits > 8) throw InputError(who + ": SpQR bits must be in 2..8, got " + std::to_string(bits));
  if (groupSize < 1) throw InputError(who + ": SpQR group size must be positive, got " + std::to_string(groupSize));
  if (scaleBits < 2 || scaleBits > 8)
    throw InputError(who + ": SpQR scale bits must be in 2..8, got " + std::to_string(scaleBits));
  if (scaleGroup < 1)
    throw InputError(who + ": SpQR scale group must be positive, got " + std::to_string(scaleGroup));
  const bool ratio = outlierRatio >= 0, threshold = outlierThreshold >= 0;
  if (ratio == threshold)
    throw InputError(who + ": SpQR needs exactly one of outlier ratio and outlier threshold, got " +
                     (ratio ? std::string("both") : std::string("neither")));
  if (ratio && !(outlierRatio <= 1))
    throw InputError(who + ": SpQR outlier ratio must be in [0, 1], got " + shortDecimal(outlierRatio));
  if (threshold && !std::isfinite(outlierThreshold))
    throw InputError(who + ": SpQR outlier threshold must be finite, got " + shortDecimal(outlierThreshold));
  checkObsOptions(damp, blockSize, maxDampRetries, who, "SpQR");
}

double SpqrResult::bitsPerWeight() const {
  if (!codes.defined() || codes.numel() == 0) return 0;
  const int64_t rows = codes.size(0), cols = codes.size(1);
  return double(spqrStoredBits(rows, cols, bits, groupSize, scaleBits, scaleGroup, report.outliers)) /
         double(rows * cols);
}

SpqrResult spqrKeptColumns(const SpqrResult& r, const at::Tensor& keep) {
  const std::string what = "SpQR kept columns: ";
  if (!keep.defined() || keep.scalar_type() != at::kBool || keep.sizes() != r.codes.sizes())
    throw InputError(what + "the keep mask must be bool of the codes' shape");
  const int64_t rows = r.codes.size(0), cols = r.codes.size(1);
  const at::Tensor mask = keep.to(r.codes.device());
  const at::Tensor perRow = mask.sum(1);
  const int64_t kept = perRow[0].item<int64_t>();
  if (!(perRow == kept).all().item<bool>()) throw InputError(what + "the rows keep different numbers of weights");
  const int64_t groups = cols / r.groupSize;
  if (kept % groups != 0 ||
      !(mask.reshape({rows, groups, r.groupSize}).sum(2) == kept / groups).all().item<bool>())
    throw InputError(what + "the groups of " + std::to_string(r.groupSize) +
                     " columns do not each keep the same number of weights");
  SpqrResult out = r;
  out.codes = r.codes.masked_select(mask).view({rows, kept});
  out.dequantized = r.dequantized.masked_select(mask.to(r.dequantized.device())).view({rows, kept});
  out.groupSize = kept / groups;
  const int64_t nnz = r.outlierColumns.numel();
  if (nnz > 0) {
    // The kept-value index of column c in its row: the kept weights before it.
    const at::Tensor keptIndex = mask.to(at::kLong).cumsum(1) - 1;
    const at::Tensor counts = r.outlierRowOffsets.to(mask.device(), at::kLong).diff();
    const at::Tensor rowIndex = at::repeat_interleave(at::arange(rows, counts.options()), counts);
    const at::Tensor columns = r.outlierColumns.to(mask.device(), at::kLong);
    if (!mask.index({rowIndex, columns}).all().item<bool>())
      throw InputError(what + "an outlier sits on a pruned weight");
    out.outlierColumns = keptIndex.index({rowIndex, columns});
  } else {
    out.outlierColumns = r.outlierColumns.to(at::kLong);
  }
  out.outlierColumns = out.outlierColumns.to(r.codes.device(), kept <= 32767 ? at::kShort : at::kInt).contiguous();
  return out;
}

SpqrResult spqrQuantize(const at::Tensor& weight, const at::Tensor& hessian, const SpqrOptions& options,
                        const std::string& moduleName) {
  const std::string who = solverSubject(moduleName);
  options.validate(who);
  checkQuantWeight(weight, QuantSpec::group(options.bits, options.groupSize, /*symmetric=*/false), moduleName);
  const int64_t rows = weight.size(0), columns = weight.size(1);
  if (rows % options.scaleGroup != 0)
    throw InputError(who + ": " + std::to_string(rows) + " output rows are not a multiple of the SpQR scale group " +
                     std::to_string(options.scaleGroup));
  const at::ScalarType work = obsWorkType(weight);
  ObsInputs inputs = obsInputs(weight, hessian, options.keep, work, who, "SpQR");
  at::Tensor w = std::move(inputs.weight), h = std::move(inputs.hessian);
  // Pruned weights: 0 from the start, never outliers, outside every grid, fixed at 0 in the sweep.
  const at::Tensor pruned =
      inputs.pruned.defined() ? inputs.pruned : at::zeros(w.sizes(), w.options().dtype(at::kBool));
  const at::Tensor keep = pruned.logical_not();
  const int64_t groupSize = options.groupSize, groups = columns / groupSize;
  const int64_t scaleGroup = options.scaleGroup;
  const double maxq = double((int64_t(1) << options.bits) - 1);

  SpqrResult result;
  SpqrReport& report = result.report;
  report.deadInputs = inputs.deadInputs;

  const DampedInverse damped = dampedInverse(h, options.damp, options.maxDampRetries, who, "SpQR");
  noteDamping(report, damped.damping);
  const at::Tensor hinvDiagonal = damped.inverseDiagonal();
  const at::Tensor hinv = damped.upper;
  // U_jj²: the inverse-Hessian diagonal of column j over the columns not yet fixed when the sweep reaches j.
  const at::Tensor sweepDiagonal = hinv.diagonal().square();
  h = at::Tensor();

  // Up-front outliers by saliency w² / [H⁻¹]_jj on the (dead-zeroed) original weights; pruned weights score −1,
  // below every real saliency, so they are never chosen.
  const at::Tensor saliency = (w.square() / hinvDiagonal.unsqueeze(0)).masked_fill(pruned, -1);
  at::Tensor outlier;
  const bool byRatio = options.outlierRatio >= 0;
  if (byRatio) {
    const int64_t kept = keep.sum().item<int64_t>();
    const int64_t count = std::min(kept, int64_t(std::llround(options.outlierRatio * double(kept))));
    outlier = at::zeros({rows * columns}, w.options().dtype(at::kBool));
    if (count > 0) outlier.index_fill_(0, std::get<1>(saliency.reshape({-1}).topk(count)), true);
    outlier = outlier.reshape({rows, columns});
  } else {
    outlier = saliency > options.outlierThreshold;
  }
  const bool inSweep = options.selection == OutlierSelection::InSweep;
  std::vector<int64_t> quota;  // ratio mode, in sweep: outliers per group, from the up-front choice
  if (inSweep && byRatio) {
    const at::Tensor perGroup =
        outlier.reshape({rows, groups, groupSize}).sum(at::IntArrayRef{0, 2}).to(at::kCPU, at::kLong);
    quota.assign(perGroup.data_ptr<int64_t>(), perGroup.data_ptr<int64_t>() + groups);
  }

  const auto floatOptions = w.options().dtype(at::kFloat);
  at::Tensor scales = at::ones({rows, groups}, floatOptions), zeros = at::zeros({rows, groups}, floatOptions);
  at::Tensor scaleCodes = at::zeros({rows, groups}, floatOptions);
  const int64_t blocks = rows / scaleGroup;
  at::Tensor scaleBase = at::zeros({blocks, groups}, floatOptions), scaleStep = at::ones({blocks, groups}, floatOptions);
  const double inf = std::numeric_limits<double>::infinity();

  at::Tensor codes = at::empty({rows, columns}, w.options());
  // A group of groupSize input columns, when the sweep reaches it: its outliers (in sweep) and its grid, from its
  // current, error-updated weights (its later columns may lie beyond the lazy block).
  const auto beginGroup = [&](int64_t group, const at::Tensor& current) {
    const int64_t column = group * groupSize;
    const at::Tensor groupPruned = pruned.narrow(1, column, groupSize);
    if (inSweep) {
      const at::Tensor d = sweepDiagonal.narrow(0, column, groupSize);
      at::Tensor chosen;
      if (byRatio) {
        chosen = at::zeros({rows * groupSize}, w.options().dtype(at::kBool));
        if (quota[group] > 0) {
          // What keeping one weight exact saves: the group's error on its grid, less the error when that
          // weight is left out of the grid (the paper's leave-one-out criterion).
          const at::Tensor base = groupError(current, groupPruned, d, maxq);
          const at::Tensor alone = at::eye(groupSize, groupPruned.options()).unsqueeze(0);
          const at::Tensor leftOut = groupError(current.unsqueeze(1).expand({rows, groupSize, groupSize}),
                                                groupPruned.unsqueeze(1).logical_or(alone), d, maxq);
          const at::Tensor saving = (base.unsqueeze(1) - leftOut).masked_fill(groupPruned, -inf);
          chosen.index_fill_(0, std::get<1>(saving.reshape({-1}).topk(quota[group])), true);
        }
        chosen = chosen.reshape({rows, groupSize});
      } else {
        chosen = (current.square() / d.unsqueeze(0)).masked_fill(groupPruned, -1) > options.outlierThreshold;
      }
      outlier.narrow(1, column, groupSize).copy_(chosen);
    }
    // The grid over the rest: min-max containing 0, outliers and pruned weights excluded.
    const at::Tensor excluded = outlier.narrow(1, column, groupSize).logical_or(groupPruned);
    const at::Tensor lo =
        current.masked_fill(excluded, inf).amin(1).clamp_max(0).to(at::kFloat);   // all excluded: inf → 0
    const at::Tensor hi = current.masked_fill(excluded, -inf).amax(1).clamp_min(0).to(at::kFloat);
    at::Tensor s = (hi - lo) / maxq;
    const at::Tensor degenerate = s <= 0;
    at::Tensor fallback = s.reshape({blocks, scaleGroup}).amax(1, /*keepdim=*/true);
    fallback = at::where(fallback > 0, fallback, at::ones_like(fallback)).expand({blocks, scaleGroup});
    s = at::where(degenerate, fallback.reshape({rows}), s).clamp_min(kMinScale);
    const StatGrid sGrid = quantizeStat(s, options.scaleBits, scaleGroup, who, "scales");
    const at::Tensor z = at::clamp(at::round(-lo / sGrid.value), 0.0, maxq);
    scales.select(1, group).copy_(sGrid.value);
    zeros.select(1, group).copy_(z);
    scaleCodes.select(1, group).copy_(sGrid.codes);
    scaleBase.select(1, group).copy_(sGrid.base);
    scaleStep.select(1, group).copy_(sGrid.step);
  };
  ObsSweepHooks hooks;
  hooks.fixColumn = [&](const ObsSweepState& sweep, int64_t column, const at::Tensor& values) {
    const int64_t group = column / groupSize;
    if (column % groupSize == 0) beginGroup(group, sweep.current(column, groupSize));
    const at::Tensor scale = scales.select(1, group), zero = zeros.select(1, group);
    // Pruned weights take the zero code, which dequantizes to exactly 0.
    const at::Tensor q = at::where(pruned.select(1, column), zero.to(work),
                                   at::clamp(at::round(values / scale.to(work) + zero.to(work)), 0.0, maxq));
    const at::Tensor exact = values.to(at::kHalf).to(work);
    const at::Tensor dq = at::where(outlier.select(1, column), exact, spqrDequantizeWeight(q, scale, zero).to(work));
    codes.select(1, column).copy_(q);
    return dq;
  };
  const ObsSweepResult swept = obsSweep(w, hinv, options.blockSize, hooks);
  w = swept.weight;
  checkSweptWeight(w, who, "SpQR", report.damp,
                   "the Hessian is likely degenerate or an outlier exceeds the fp16 range");
  report.loss = swept.loss;
  report.outliers = outlier.sum().item<int64_t>();

  result.dequantized = w.to(weight.scalar_type());
  result.codes = codes.to(at::kByte);
  result.scaleCodes = scaleCodes.to(at::kByte);
  result.zeroCodes = zeros.to(at::kByte);
  result.scaleBase = scaleBase.to(at::kHalf);
  result.scaleStep = scaleStep.to(at::kHalf);
  result.scales = scales;
  result.zeros = zeros;

  // CSR of the outliers, row-major (nonzero returns indices in row-major order).
  const at::Tensor positions = at::nonzero(outlier);  // [nnz, 2]
  const at::Tensor perRow = outlier.sum(1);
  result.outlierRowOffsets = at::cat({at::zeros({1}, perRow.options()), perRow.cumsum(0)}).to(at::kInt);
  result.outlierColumns = positions.select(1, 1).to(columns <= 32767 ? at::kShort : at::kInt).contiguous();
  result.outlierValues = w.masked_select(outlier).to(at::kHalf);
  result.bits = options.bits;
  result.scaleBits = options.scaleBits;
  result.groupSize = groupSize;
  result.scaleGroup = scaleGroup;
  return result;
}

}  // namespace pareto
