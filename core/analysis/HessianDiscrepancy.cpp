#include "analysis/HessianDiscrepancy.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <sstream>

#include "util/Error.h"

namespace pareto {
namespace {

// Precision of the factor and the Lanczos vectors. On the CPU, up to this width, float64 costs about twice the
// float32 time and makes δ exact to far below the tolerance (the tests use it as a reference). Beyond it, or on
// a GPU, float32: a float64 copy of L and H_c − H_t at width 14336 would add 3.3 GB to the two float32 Hessians,
// GPUs run float64 at a fraction of float32 speed, and the damping bounds cond(H_t + λI) by about
// max(diag H_t)/λ, so float32 triangular solves stay accurate well inside a 1e-3 tolerance.
constexpr int64_t kFloat64MaxWidth = 4096;

// Damping tried: damp, 10·damp, … 10^kDampRetries·damp.
constexpr int kDampRetries = 4;

std::string subject(const std::string& moduleName) {
  return moduleName.empty() ? std::string("Hessian discrepancy") : "Hessian discrepancy of '" + moduleName + "'";
}

std::string shapeText(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}

at::ScalarType computeDtype(const at::Tensor& target) {
  return target.device().is_cpu() && target.size(0) <= kFloat64MaxWidth ? at::kDouble : at::kFloat;
}

struct DampedFactor {
  at::Tensor lower;   // L with H_t + λI = LLᵀ
  double damp = 0;
};

DampedFactor dampedCholesky(const at::Tensor& target, double damp, const std::string& moduleName) {
  const double meanDiagonal = target.diagonal().mean().item<double>();
  if (!(meanDiagonal > 0))
    throw InputError(subject(moduleName) + ": the target Hessian has no positive diagonal (mean " +
                     std::to_string(meanDiagonal) + "); it saw no activations");
  at::Tensor damped = target.clone();
  double added = 0;
  for (int attempt = 0; attempt <= kDampRetries; ++attempt, damp *= 10) {
    damped.diagonal().add_(damp * meanDiagonal - added);
    added = damp * meanDiagonal;
    auto factorisation = at::linalg_cholesky_ex(damped);
    if (std::get<1>(factorisation).item<int64_t>() == 0) return {std::get<0>(factorisation), damp};
  }
  throw Error(subject(moduleName) + ": the target Hessian does not factorise even with damping " +
              std::to_string(damp / 10) + " × mean diagonal");
}

// M v = L⁻¹ (H_c − H_t) L⁻ᵀ v, the target-whitened difference. L⁻ᵀ v is solved from the right (y L = vᵀ) so
// that Lᵀ is never materialised.
at::Tensor applyWhitenedDifference(const at::Tensor& lower, const at::Tensor& difference, const at::Tensor& v) {
  const at::Tensor right =
      at::linalg_solve_triangular(lower, v.unsqueeze(0), /*upper=*/false, /*left=*/false).squeeze(0);
  const at::Tensor mixed = at::mv(difference, right);
  return at::linalg_solve_triangular(lower, mixed.unsqueeze(1), /*upper=*/false).squeeze(1);
}

// Uniform in [-1, 1) from a fixed engine, so that a seed gives the same vector on every platform and device.
at::Tensor seededStartVector(int64_t n, uint64_t seed, const at::TensorOptions& options) {
  std::mt19937_64 engine(seed);
  at::Tensor start = at::empty({n}, at::kDouble);
  double* values = start.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) values[i] = double(engine() >> 11) * 0x1.0p-52 - 1.0;
  return start.to(options);
}

struct RitzEstimate {
  double value = 0;      // the Ritz value of largest magnitude
  double residual = 0;   // ‖M y − θ y‖ for its Ritz vector y; some eigenvalue of M lies within it of θ
};

// alphas: the diagonal of the Lanczos tridiagonal T (k entries), betas: its off-diagonal (k − 1), nextBeta: the
// coupling to the next, not yet built, basis vector.
RitzEstimate largestMagnitudeRitz(const std::vector<double>& alphas, const std::vector<double>& betas,
                                  double nextBeta) {
  const auto k = int64_t(alphas.size());
  at::Tensor tridiagonal = at::zeros({k, k}, at::kDouble);
  auto entries = tridiagonal.accessor<double, 2>();
  for (int64_t i = 0; i < k; ++i) {
    entries[i][i] = alphas[size_t(i)];
    if (i + 1 < k) entries[i][i + 1] = entries[i + 1][i] = betas[size_t(i)];
  }
  const auto eigen = at::linalg_eigh(tridiagonal);
  const auto values = std::get<0>(eigen).accessor<double, 1>();
  const auto vectors = std::get<1>(eigen).accessor<double, 2>();
  const int64_t best = std::abs(values[0]) > std::abs(values[k - 1]) ? 0 : k - 1;
  return {values[best], std::abs(nextBeta * vectors[k - 1][best])};
}

struct LanczosOutcome {
  double eigenvalue = 0;
  int iterations = 0;
  bool converged = false;
};

// Largest-magnitude eigenvalue of a symmetric operator by Lanczos with full reorthogonalisation (two classical
// Gram-Schmidt passes; the basis is at most maxIterations × n). Converged when the estimate moved by less than
// `tolerance` relative since the previous step and its residual is below `tolerance` relative as well, or when
// the Krylov space became invariant (then T holds exact eigenvalues).
LanczosOutcome lanczosLargestMagnitude(const std::function<at::Tensor(const at::Tensor&)>& apply,
                                       const at::Tensor& start, double tolerance, int maxIterations) {
  const int64_t n = start.size(0);
  const int64_t steps = std::min<int64_t>(maxIterations, n);
  const double roundoff = start.scalar_type() == at::kDouble ? std::numeric_limits<double>::epsilon()
                                                             : double(std::numeric_limits<float>::epsilon());
  at::Tensor basis = at::empty({steps, n}, start.options());
  basis[0].copy_(start / start.norm());
  std::vector<double> alphas, betas;
  double operatorScale = 0;
  double previous = std::numeric_limits<double>::quiet_NaN();
  for (int64_t k = 0; k < steps; ++k) {
    const at::Tensor q = basis[k];
    at::Tensor w = apply(q);
    alphas.push_back(at::dot(q, w).item<double>());
    const at::Tensor span = basis.narrow(0, 0, k + 1);
    for (int pass = 0; pass < 2; ++pass) w.addmv_(span.t(), at::mv(span, w), /*beta=*/1, /*alpha=*/-1);
    const double beta = w.norm().item<double>();
    operatorScale = std::max({operatorScale, std::abs(alphas.back()), beta});

    const RitzEstimate ritz = largestMagnitudeRitz(alphas, betas, beta);
    const double magnitude = std::abs(ritz.value);
    const bool invariant = beta <= 100 * roundoff * operatorScale || k + 1 == n;
    const bool settled = std::abs(ritz.value - previous) <= tolerance * magnitude &&
                         ritz.residual <= tolerance * magnitude;
    if (invariant || settled) return {ritz.value, int(k + 1), true};
    previous = ritz.value;
    if (k + 1 < steps) {
      basis[k + 1].copy_(w / beta);
      betas.push_back(beta);
    }
  }
  return {previous, int(steps), false};
}

void checkHessian(const at::Tensor& hessian, const char* role, const std::string& moduleName) {
  if (!hessian.defined()) throw InputError(subject(moduleName) + ": the " + role + " Hessian is undefined");
  if (!at::isFloatingType(hessian.scalar_type()))
    throw InputError(subject(moduleName) + ": the " + role + " Hessian must be floating point");
  if (hessian.dim() != 2 || hessian.size(0) != hessian.size(1) || hessian.size(0) == 0)
    throw InputError(subject(moduleName) + ": the " + role + " Hessian must be square and non-empty, got " +
                     shapeText(hessian.sizes()));
}

}  // namespace

DiscrepancyResult hessianDiscrepancy(const at::Tensor& calibration, const at::Tensor& target,
                                     const DiscrepancyOptions& options, const std::string& moduleName) {
  checkHessian(calibration, "calibration", moduleName);
  checkHessian(target, "target", moduleName);
  if (calibration.size(0) != target.size(0))
    throw InputError(subject(moduleName) + ": calibration Hessian " + shapeText(calibration.sizes()) +
                     " and target Hessian " + shapeText(target.sizes()) + " differ in size");
  if (!(options.damp > 0) || !(options.tolerance > 0) || options.maxIterations < 1)
    throw InputError(subject(moduleName) + ": damp and tolerance must be positive and maxIterations at least 1");

  const at::Tensor targetWork = target.to(computeDtype(target));
  if (!at::isfinite(targetWork).all().item<bool>())
    throw InputError(subject(moduleName) + ": the target Hessian has non-finite entries");
  const at::Tensor difference = calibration.to(targetWork.options()) - targetWork;
  if (!at::isfinite(difference).all().item<bool>())
    throw InputError(subject(moduleName) + ": the calibration Hessian has non-finite entries");

  const DampedFactor factor = dampedCholesky(targetWork, options.damp, moduleName);
  const auto whitened = [&](const at::Tensor& v) { return applyWhitenedDifference(factor.lower, difference, v); };
  const LanczosOutcome outcome =
      lanczosLargestMagnitude(whitened, seededStartVector(target.size(0), options.seed, targetWork.options()),
                              options.tolerance, options.maxIterations);

  DiscrepancyResult result;
  result.delta = std::abs(outcome.eigenvalue);
  result.extremeEigenvalue = outcome.eigenvalue;
  result.iterations = outcome.iterations;
  result.converged = outcome.converged;
  result.dampUsed = factor.damp;
  return result;
}

DiscrepancySummary summarizeDiscrepancies(const std::vector<double>& deltaText,
                                          const std::vector<double>& deltaDecode) {
  if (deltaText.size() != deltaDecode.size())
    throw InputError("Hessian discrepancy summary: " + std::to_string(deltaText.size()) + " text and " +
                     std::to_string(deltaDecode.size()) + " decode values");
  DiscrepancySummary summary;
  summary.modules = int(deltaText.size());
  if (deltaText.empty()) {
    summary.fractionDecodeSmaller = summary.medianRatio = std::numeric_limits<double>::quiet_NaN();
    return summary;
  }
  std::vector<double> ratios;
  int decodeSmaller = 0;
  for (size_t i = 0; i < deltaText.size(); ++i) {
    const double text = deltaText[i], decode = deltaDecode[i];
    if (!(text >= 0) || !(decode >= 0))
      throw InputError("Hessian discrepancy summary: module " + std::to_string(i) + " has a negative or NaN δ");
    if (decode < text) ++decodeSmaller;
    if (decode > 0) ratios.push_back(text / decode);
    else ratios.push_back(text > 0 ? std::numeric_limits<double>::infinity() : 1.0);
  }
  std::sort(ratios.begin(), ratios.end());
  const size_t middle = ratios.size() / 2;
  summary.medianRatio = ratios.size() % 2 == 1 ? ratios[middle] : (ratios[middle - 1] + ratios[middle]) / 2;
  summary.fractionDecodeSmaller = double(decodeSmaller) / double(ratios.size());
  return summary;
}

}  // namespace pareto
