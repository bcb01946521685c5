#include "search/DecodeTimeModel.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace pareto {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

}  // namespace

DecodeTimeModel::DecodeTimeModel(const DecodeBandwidth& b) {
  for (const KernelMeasurement& m : b.gemvs) {
    int64_t rows = 0, cols = 0;
    if (!parseGemvShape(m.shape, rows, cols) || !(m.secondsPerCall > 0)) continue;
    gemv_[m.kernel].exact.emplace(std::make_pair(rows, cols), m.secondsPerCall);
    if (device_.empty()) device_ = m.device;
  }
  // Least squares of seconds on weights per kernel, with neither part negative (a launch never takes negative time,
  // a weight never saves any). Where the free fit breaks one of them the best fit lies on that bound: the constant
  // (the mean) or the line through the origin, whichever leaves the smaller squared error. Small GEMVs are bound by
  // launch and latency, so their times need not grow with their shapes at all; a line through the origin would
  // price a smaller shape than the measured ones at a fraction of any measured time.
  for (auto& [kernel, fit] : gemv_) {
    double n = 0, sw = 0, st = 0, sww = 0, swt = 0, stt = 0;
    for (const auto& [shape, seconds] : fit.exact) {
      const double w = double(shape.first) * double(shape.second);
      n += 1, sw += w, st += seconds, sww += w * w, swt += w * seconds, stt += seconds * seconds;
    }
    const double det = n * sww - sw * sw;
    if (n >= 2 && det > 0) {
      fit.perWeight = (n * swt - sw * st) / det;
      fit.fixed = (st - fit.perWeight * sw) / n;
    }
    if (n >= 2 && det > 0 && fit.fixed >= 0 && fit.perWeight > 0) continue;
    const double throughOrigin = sww > 0 ? swt / sww : 0;
    const double originError = stt - throughOrigin * swt;      // Σ (t − a·w)² at the least-squares a
    const double constantError = n > 0 ? stt - st * st / n : 0;  // Σ (t − mean)²
    if (n >= 2 && constantError <= originError) {
      fit.fixed = st / n;
      fit.perWeight = 0;
    } else {  // also a single shape: time in proportion to the weights
      fit.fixed = 0;
      fit.perWeight = throughOrigin;
    }
  }
  perGemv_ = gemv_.count("dense") != 0;
  for (const KernelMeasurement& k : b.kernels)
    if (std::isfinite(k.bytesPerSecond) && k.bytesPerSecond > 0) bandwidth_.emplace(k.kernel, k.bytesPerSecond);
  if (bandwidth_.count("dense") == 0) bandwidth_.clear();
  else if (device_.empty()) device_ = b.kernels.front().device;
  one_ = b.bytesPerSecond > 0 && std::isfinite(b.bytesPerSecond) ? b.bytesPerSecond : 0;
  bandwidthSource_ = b.source;
  denseStep_ = b.denseStepSeconds > 0 && std::isfinite(b.denseStepSeconds) ? b.denseStepSeconds : 0;
  stepSource_ = b.denseStepSource;
}

std::string DecodeTimeModel::source() const {
  std::string s;
  if (perGemv_) {
    s = "GEMVs timed alone on " + device_ + " (" + std::to_string(gemv_.size()) + " kernels)";
  } else if (!bandwidth_.empty()) {
    s = "stored kernel benchmarks of " + device_ + " (" + std::to_string(bandwidth_.size()) + " kernels)";
  } else if (one_ > 0) {
    s = bandwidthSource_.empty() ? "bytes / " + fixed(one_ / 1e9, 1) + " GB/s" : bandwidthSource_;
  } else {
    return "";
  }
  s += denseStep_ > 0 ? "; the rest of the step from " + stepSource_
                      : "; the rest of the step from its bytes alone (no stored `bench decode` of this model)";
  return s;
}

double DecodeTimeModel::gemvSeconds(const std::string& kernel, int64_t rows, int64_t cols, uint64_t bytes) const {
  if (perGemv_) {
    const auto it = gemv_.find(kernel);
    if (it == gemv_.end()) return kNaN;
    const auto exact = it->second.exact.find({rows, cols});
    if (exact != it->second.exact.end()) return exact->second;
    return it->second.fixed + it->second.perWeight * double(rows) * double(cols);
  }
  if (!bandwidth_.empty()) {
    const auto it = bandwidth_.find(kernel);
    return it == bandwidth_.end() ? kNaN : double(bytes) / it->second;
  }
  return one_ > 0 ? double(bytes) / one_ : kNaN;
}

double DecodeTimeModel::otherSeconds(double denseLinearSeconds, uint64_t otherBytes) const {
  if (denseStep_ > 0 && std::isfinite(denseLinearSeconds)) return std::max(0.0, denseStep_ - denseLinearSeconds);
  const auto dense = bandwidth_.find("dense");
  const double rate = dense != bandwidth_.end() ? dense->second : one_;
  return rate > 0 ? double(otherBytes) / rate : 0.0;
}

}  // namespace pareto
