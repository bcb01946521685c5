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
  // Least squares of seconds on weights per kernel; an intercept below zero (a noisy pair of large shapes) is
  // dropped for the line through the origin, which never predicts a negative time.
  for (auto& [kernel, fit] : gemv_) {
    double n = 0, sw = 0, st = 0, sww = 0, swt = 0;
    for (const auto& [shape, seconds] : fit.exact) {
      const double w = double(shape.first) * double(shape.second);
      n += 1, sw += w, st += seconds, sww += w * w, swt += w * seconds;
    }
    const double det = n * sww - sw * sw;
    if (n >= 2 && det > 0) {
      fit.perWeight = (n * swt - sw * st) / det;
      fit.fixed = (st - fit.perWeight * sw) / n;
    }
    if (!(n >= 2 && det > 0) || fit.fixed < 0 || fit.perWeight <= 0) {
      fit.fixed = 0;
      fit.perWeight = sww > 0 ? swt / sww : 0;
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
