#include "compress/DampedHessian.h"

#include <ATen/ATen.h>

#include <cmath>
#include <sstream>

#include "util/Error.h"

namespace pareto {

std::string shortDecimal(double value) {
  std::ostringstream o;
  o << value;
  return o.str();
}

void obsFixColumn(const at::Tensor& block, const at::Tensor& hinvBlock, int64_t i, const at::Tensor& original,
                  const at::Tensor& fixed, const at::Tensor& errors, const at::Tensor& losses) {
  const int64_t count = block.size(1);
  const at::Tensor error = (original - fixed) / hinvBlock.select(0, i).select(0, i);
  losses.add_(error.square());
  block.narrow(1, i, count - i).addr_(error, hinvBlock.select(0, i).narrow(0, i, count - i), 1, -1);
  errors.select(1, i).copy_(error);
}

void obsPropagateBlock(const at::Tensor& w, const at::Tensor& errors, const at::Tensor& hinv, int64_t i1,
                       int64_t count) {
  const int64_t i2 = i1 + count, columns = w.size(1);
  if (i2 < columns)
    w.narrow(1, i2, columns - i2).addmm_(errors, hinv.narrow(0, i1, count).narrow(1, i2, columns - i2), 1, -1);
}

DampedInverse dampedInverse(at::Tensor& hessian, double damp, int maxRetries, const std::string& who,
                            const std::string& method) {
  const double meanDiagonal = hessian.diagonal().mean().item<double>();
  DampedInverse result;
  double applied = 0;
  for (int attempt = 0; attempt <= maxRetries; ++attempt) {
    result.damping.damp = damp * std::pow(10.0, attempt);
    result.damping.lambda = result.damping.damp * meanDiagonal;
    result.damping.retries = attempt;
    hessian.diagonal().add_(result.damping.lambda - applied);
    applied = result.damping.lambda;

    at::Tensor lower, info;
    std::tie(lower, info) = at::linalg_cholesky_ex(hessian);
    if (info.item<int>() != 0) continue;
    result.inverse = at::cholesky_inverse(lower);
    std::tie(result.upper, info) = at::linalg_cholesky_ex(result.inverse, /*upper=*/true);
    if (info.item<int>() != 0 || !at::isfinite(result.upper).all().item<bool>()) continue;
    return result;
  }
  throw Error(who + ": " + method + " Hessian is not positive definite even with damping " +
              shortDecimal(result.damping.damp) + " of mean(diag H) = " + shortDecimal(meanDiagonal) + " (after " +
              std::to_string(maxRetries) + " tenfold increases)");
}

}  // namespace pareto
