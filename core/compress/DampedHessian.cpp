#include "compress/DampedHessian.h"

#include <ATen/ATen.h>

#include <cmath>
#include <sstream>

#include "compress/SolveTimings.h"
#include "util/Error.h"

namespace pareto {

std::string shortDecimal(double value) {
  std::ostringstream o;
  o << value;
  return o.str();
}

DampedInverse dampedInverse(at::Tensor& hessian, double damp, int maxRetries, const std::string& who,
                            const std::string& method) {
  const SolveTimings::Step step("damped inverse", hessian);
  const double meanDiagonal = hessian.diagonal().mean().item<double>();
  DampedInverse result;
  double applied = 0;
  for (int attempt = 0; attempt <= maxRetries; ++attempt) {
    result.damping.damp = damp * std::pow(10.0, attempt);
    result.damping.lambda = result.damping.damp * meanDiagonal;
    result.damping.retries = attempt;
    hessian.diagonal().add_(result.damping.lambda - applied);
    applied = result.damping.lambda;

    // U without forming the inverse: with J the reversal of rows and columns, J (H + λI) J = L Lᵀ gives
    // H + λI = R Rᵀ with R = J L J upper triangular, so (H + λI)⁻¹ = R⁻ᵀ R⁻¹ = Uᵀ U with U = R⁻¹ = J L⁻¹ J, upper
    // with a positive diagonal: the unique factor. One Cholesky and one triangular solve, where the inverse and its
    // Cholesky took a Cholesky, a Cholesky solve against the identity and a second Cholesky (about twice the work).
    at::Tensor lower, info;
    std::tie(lower, info) = at::linalg_cholesky_ex(hessian.flip({0, 1}));
    if (info.item<int>() != 0) continue;
    const at::Tensor lowerInverse =
        at::linalg_solve_triangular(lower, at::eye(lower.size(0), lower.options()), /*upper=*/false);
    lower = at::Tensor();
    // Row-major: the triangular solve returns a column-major result (LAPACK's and cuSOLVER's layout) and flip keeps
    // it, but the sweep reads U by rows, and the fused block kernel takes only unit-stride rows.
    result.upper = lowerInverse.flip({0, 1}).contiguous();
    if (!at::isfinite(result.upper).all().item<bool>()) continue;
    return result;
  }
  throw Error(who + ": " + method + " Hessian is not positive definite even with damping " +
              shortDecimal(result.damping.damp) + " of mean(diag H) = " + shortDecimal(meanDiagonal) + " (after " +
              std::to_string(maxRetries) + " tenfold increases)");
}

at::Tensor DampedInverse::inverseDiagonal() const { return upper.square().sum(0); }

}  // namespace pareto
