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
