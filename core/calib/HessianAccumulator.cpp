#include "calib/HessianAccumulator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <sstream>

#include "dist/ProcessGroup.h"
#include "util/Error.h"

namespace pareto {
namespace {

// Temporary float32 rows per addmm_. 64 MiB keeps the copy small next to a 14336-wide H (822 MB) while each
// product still has ~1000 rows of depth, enough to run the GEMM near peak.
constexpr int64_t kChunkBytes = int64_t(64) << 20;

std::string subject(const std::string& name) {
  return name.empty() ? std::string("Hessian accumulator") : "Hessian of '" + name + "'";
}

std::string shapeText(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}

}  // namespace

HessianAccumulator::HessianAccumulator(int64_t columns, c10::Device device, std::string name)
    : columns_(columns), chunkRows_(1), name_(std::move(name)) {
  if (columns <= 0) throw InputError(subject(name_) + ": columns must be positive, got " + std::to_string(columns));
  chunkRows_ = std::max<int64_t>(1, kChunkBytes / (columns * int64_t(sizeof(float))));
  sum_ = at::zeros({columns, columns}, at::TensorOptions().dtype(at::kFloat).device(device));
}

void HessianAccumulator::add(const at::Tensor& x, const at::Tensor& weights) {
  if (!x.defined()) throw InputError(subject(name_) + ": activations are undefined");
  if (!at::isFloatingType(x.scalar_type()))
    throw InputError(subject(name_) + ": activations must be floating point, got " +
                     std::string(c10::toString(x.scalar_type())));
  if (x.dim() < 1 || x.size(-1) != columns_)
    throw InputError(subject(name_) + ": activations of shape " + shapeText(x.sizes()) + " do not end in " +
                     std::to_string(columns_) + " columns");
  const auto leading = x.sizes().slice(0, x.dim() - 1);
  const at::Tensor rows = x.reshape({-1, columns_});

  at::Tensor rowWeights;
  if (weights.defined()) {
    if (weights.sizes() != leading)
      throw InputError(subject(name_) + ": weights of shape " + shapeText(weights.sizes()) +
                       " do not match activations of shape " + shapeText(x.sizes()) + " (expected " +
                       shapeText(leading) + ")");
    rowWeights = weights.reshape({-1}).to(x.device(), at::kDouble);
    if (!at::isfinite(rowWeights).all().item<bool>() || (rowWeights < 0).any().item<bool>())
      throw InputError(subject(name_) + ": weights must be finite and >= 0");
  }
  accumulateRows(rows, rowWeights);
}

// Rows are scaled by sqrt(w) so that one addmm_ gives Σ w x xᵀ. Each chunk is selected on x's own device before
// it is converted, so a bf16 activation on the GPU never exists as a whole float32 copy.
void HessianAccumulator::accumulateRows(const at::Tensor& rows, const at::Tensor& rowWeights) {
  const int64_t total = rows.size(0);
  for (int64_t start = 0; start < total; start += chunkRows_) {
    const int64_t count = std::min(chunkRows_, total - start);
    at::Tensor chunk = rows.narrow(0, start, count);
    if (!rowWeights.defined()) {
      const at::Tensor xs = chunk.to(sum_.device(), at::kFloat);
      sum_.addmm_(xs.t(), xs);
      weightSum_ += double(count);
      samples_ += count;
      continue;
    }
    at::Tensor chunkWeights = rowWeights.narrow(0, start, count);
    const at::Tensor kept = (chunkWeights > 0).nonzero().squeeze(1);
    const int64_t keptCount = kept.size(0);
    if (keptCount == 0) continue;
    if (keptCount < count) {
      chunk = chunk.index_select(0, kept);
      chunkWeights = chunkWeights.index_select(0, kept);
    }
    weightSum_ += chunkWeights.sum().item<double>();
    samples_ += keptCount;
    const at::Tensor rootWeights = chunkWeights.to(sum_.device(), at::kFloat).sqrt_().unsqueeze(1);
    const at::Tensor xs = chunk.to(sum_.device(), at::kFloat) * rootWeights;
    sum_.addmm_(xs.t(), xs);
  }
}

void HessianAccumulator::setChunkRows(int64_t rows) {
  if (rows < 1) throw InputError(subject(name_) + ": chunk rows must be at least 1");
  chunkRows_ = rows;
}

void HessianAccumulator::merge(const HessianAccumulator& other) {
  if (other.columns_ != columns_)
    throw InputError(subject(name_) + ": cannot merge a " + std::to_string(other.columns_) + "-column " +
                     subject(other.name_) + " into " + std::to_string(columns_) + " columns");
  sum_.add_(other.sum_.to(sum_.device()));
  weightSum_ += other.weightSum_;
  samples_ += other.samples_;
}

void HessianAccumulator::sumAcrossRanks(ProcessGroup& group) {
  group.allReduceSum(sum_);
  // float64 counts: exact for any sample count a calibration set reaches (< 2^53).
  at::Tensor counts = at::tensor({weightSum_, static_cast<double>(samples_)}, at::kDouble);
  group.allReduceSum(counts);
  weightSum_ = counts[0].item<double>();
  samples_ = static_cast<int64_t>(counts[1].item<double>());
}

at::Tensor HessianAccumulator::mean() const {
  if (!(weightSum_ > 0))
    throw InputError(subject(name_) + ": no calibration rows with positive weight were added");
  return sum_ / weightSum_;
}

}  // namespace pareto
