#include "compress/SparseGpt.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include "compress/PruneInputs.h"
#include "compress/PruneMask.h"
#include "util/Error.h"

namespace pareto {
namespace {

std::string decimal(double value) {
  std::ostringstream out;
  out.precision(6);
  out << value;
  return out.str();
}

void checkOptions(const SparseGptOptions& options, const SparsityPattern& pattern, const std::string& who) {
  if (!std::isfinite(options.damp) || options.damp <= 0)
    throw InputError(who + ": SparseGPT damp must be a positive fraction of mean(diag H), got " +
                     decimal(options.damp));
  if (options.blockSize < 1)
    throw InputError(who + ": SparseGPT block size must be positive, got " + std::to_string(options.blockSize));
  // The reference picks N:M groups at block-relative offsets; a block that is not a whole number of groups would
  // make groups straddle blocks and no longer line up with the mask words.
  if (pattern.isNM() && options.blockSize % pattern.m() != 0)
    throw InputError(who + ": SparseGPT block size " + std::to_string(options.blockSize) +
                     " is not a multiple of M = " + std::to_string(pattern.m()) + " for pattern " + pattern.label());
  if (options.maxDampRetries < 0)
    throw InputError(who + ": SparseGPT damping retries must be >= 0, got " + std::to_string(options.maxDampRetries));
}

void checkHessian(const at::Tensor& hessian, int64_t columns, const std::string& who) {
  if (!hessian.defined()) throw InputError(who + ": Hessian is undefined");
  if (hessian.dim() != 2 || hessian.size(0) != columns || hessian.size(1) != columns) {
    std::ostringstream shape;
    shape << hessian.sizes();
    throw InputError(who + ": Hessian of shape " + shape.str() + " does not match " + std::to_string(columns) +
                     " input columns");
  }
  if (!at::isFloatingType(hessian.scalar_type()))
    throw InputError(who + ": Hessian must be floating point, got " + std::string(c10::toString(hessian.scalar_type())));
  if (!at::isfinite(hessian).all().item<bool>()) throw InputError(who + ": Hessian contains NaN or infinity");
}

// The upper Cholesky factor U of (H + λI)⁻¹, growing λ tenfold while a factorisation fails. Its rows give, for
// every column i, the OBS update over the columns after i with the earlier ones already fixed; Uᵢᵢ² is the
// matching [H⁻¹]ᵢᵢ. `hessian` is damped in place.
at::Tensor dampedInverseCholesky(at::Tensor& hessian, const SparseGptOptions& options, const std::string& who,
                                 SparseGptReport& report) {
  const double meanDiagonal = hessian.diagonal().mean().item<double>();
  double applied = 0;
  for (int attempt = 0; attempt <= options.maxDampRetries; ++attempt) {
    const double damp = options.damp * std::pow(10.0, attempt);
    const double lambda = damp * meanDiagonal;
    hessian.diagonal().add_(lambda - applied);
    applied = lambda;
    report.damp = damp;
    report.lambda = lambda;
    report.dampRetries = attempt;

    at::Tensor lower, info;
    std::tie(lower, info) = at::linalg_cholesky_ex(hessian);
    if (info.item<int>() != 0) continue;
    at::Tensor upper;
    std::tie(upper, info) = at::linalg_cholesky_ex(at::cholesky_inverse(lower), /*upper=*/true);
    if (info.item<int>() != 0 || !at::isfinite(upper).all().item<bool>()) continue;
    return upper;
  }
  throw Error(who + ": SparseGPT Hessian is not positive definite even with damping " + decimal(report.damp) +
              " of mean(diag H) = " + decimal(meanDiagonal) + " (after " + std::to_string(options.maxDampRetries) +
              " tenfold increases)");
}

}  // namespace

SparseGptResult sparseGptPrune(const at::Tensor& weight, const at::Tensor& hessian, const SparsityPattern& pattern,
                               const SparseGptOptions& options, const std::string& moduleName) {
  const std::string who = pruneSubject(moduleName);
  checkPruneWeight(weight, pattern, moduleName);
  checkOptions(options, pattern, who);
  const int64_t rows = weight.size(0), columns = weight.size(1);
  checkHessian(hessian, columns, who);

  SparseGptResult result;
  SparseGptReport& report = result.report;
  const bool copy = true;
  at::Tensor w = weight.to(weight.device(), at::kFloat, /*non_blocking=*/false, copy).contiguous();
  at::Tensor h = hessian.to(weight.device(), at::kFloat, /*non_blocking=*/false, copy).contiguous();

  // An input that is never active has no curvature: give it a unit one so H stays invertible, and drop its
  // weights, which cannot affect the calibration outputs.
  const at::Tensor dead = h.diagonal() == 0;
  report.deadInputs = dead.sum().item<int64_t>();
  h.diagonal().masked_fill_(dead, 1);
  w.masked_fill_(dead.unsqueeze(0), 0);

  const at::Tensor hinv = dampedInverseCholesky(h, options, who, report);
  h = at::Tensor();  // the damped H is no longer needed; free it before the sweep

  at::Tensor keep = at::ones({rows, columns}, w.options().dtype(at::kBool));
  at::Tensor losses = at::zeros({rows}, w.options());
  for (int64_t i1 = 0; i1 < columns; i1 += options.blockSize) {
    const int64_t count = std::min(options.blockSize, columns - i1), i2 = i1 + count;
    at::Tensor block = w.narrow(1, i1, count).clone();
    at::Tensor pruned = at::zeros_like(block);
    at::Tensor errors = at::zeros_like(block);
    const at::Tensor hinvBlock = hinv.narrow(0, i1, count).narrow(1, i1, count);
    const at::Tensor hinvDiagonal = hinvBlock.diagonal();
    at::Tensor keepBlock = keep.narrow(1, i1, count);

    if (pattern.isUnstructured()) {
      const at::Tensor scores = block.square() / hinvDiagonal.square().unsqueeze(0);
      keepBlock.copy_(keepMaskFromScores(scores, pattern, UnstructuredScope::WholeTensor));
    }
    for (int64_t i = 0; i < count; ++i) {
      if (pattern.isNM() && i % pattern.m() == 0) {
        const int64_t m = pattern.m();
        const at::Tensor scores = block.narrow(1, i, m).square() / hinvDiagonal.narrow(0, i, m).square().unsqueeze(0);
        keepBlock.narrow(1, i, m).copy_(keepMaskFromScores(scores, pattern, UnstructuredScope::PerRow));
      }
      const at::Tensor column = block.select(1, i);
      const at::Tensor kept = column.masked_fill(keepBlock.select(1, i).logical_not(), 0);
      const at::Tensor d = hinvBlock.select(0, i).select(0, i);
      pruned.select(1, i).copy_(kept);
      const at::Tensor error = (column - kept) / d;
      losses.add_(error.square());
      block.narrow(1, i, count - i).addr_(error, hinvBlock.select(0, i).narrow(0, i, count - i), 1, -1);
      errors.select(1, i).copy_(error);
    }
    w.narrow(1, i1, count).copy_(pruned);
    if (i2 < columns)
      w.narrow(1, i2, columns - i2).addmm_(errors, hinv.narrow(0, i1, count).narrow(1, i2, columns - i2), 1, -1);
  }

  if (!at::isfinite(w).all().item<bool>())
    throw Error(who + ": SparseGPT produced NaN or infinite weights (damping " + decimal(report.damp) +
                "); the Hessian is likely degenerate");
  report.loss = losses.sum().item<double>() / 2;
  result.pruned = {w.to(weight.scalar_type()), keep};
  return result;
}

}  // namespace pareto
