#include "compress/SparseGpt.h"

#include "compress/DampedHessian.h"
#include "compress/SolverInputs.h"

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

void checkOptions(const SparseGptOptions& options, const SparsityPattern& pattern, const std::string& who) {
  if (!std::isfinite(options.damp) || options.damp <= 0)
    throw InputError(who + ": SparseGPT damp must be a positive fraction of mean(diag H), got " +
                     shortDecimal(options.damp));
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

}  // namespace

SparseGptResult sparseGptPrune(const at::Tensor& weight, const at::Tensor& hessian, const SparsityPattern& pattern,
                               const SparseGptOptions& options, const std::string& moduleName) {
  const std::string who = solverSubject(moduleName);
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

  const DampedInverse damped = dampedInverse(h, options.damp, options.maxDampRetries, who, "SparseGPT");
  report.damp = damped.damping.damp;
  report.lambda = damped.damping.lambda;
  report.dampRetries = damped.damping.retries;
  const at::Tensor& hinv = damped.upper;
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
      pruned.select(1, i).copy_(kept);
      obsFixColumn(block, hinvBlock, i, column, kept, errors, losses);
    }
    w.narrow(1, i1, count).copy_(pruned);
    obsPropagateBlock(w, errors, hinv, i1, count);
  }

  if (!at::isfinite(w).all().item<bool>())
    throw Error(who + ": SparseGPT produced NaN or infinite weights (damping " + shortDecimal(report.damp) +
                "); the Hessian is likely degenerate");
  report.loss = losses.sum().item<double>() / 2;
  result.pruned = {w.to(weight.scalar_type()), keep};
  return result;
}

}  // namespace pareto
