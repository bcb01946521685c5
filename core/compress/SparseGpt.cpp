#include "compress/SparseGpt.h"

#include "compress/ObsBlockKernel.h"
#include "compress/ObsSweep.h"
#include "compress/SolverInputs.h"

#include <ATen/ATen.h>

#include <utility>

#include "compress/PruneInputs.h"
#include "compress/PruneMask.h"
#include "util/Error.h"

namespace pareto {

SparseGptResult sparseGptPrune(const at::Tensor& weight, const at::Tensor& hessian, const SparsityPattern& pattern,
                               const SparseGptOptions& options, const std::string& moduleName) {
  const std::string who = solverSubject(moduleName);
  checkPruneWeight(weight, pattern, moduleName);
  checkObsOptions(options.damp, options.blockSize, options.maxDampRetries, who, "SparseGPT");
  // The reference picks N:M groups at block-relative offsets; a block that is not a whole number of groups would
  // make groups straddle blocks and no longer line up with the mask words.
  if (pattern.isNM() && options.blockSize % pattern.m() != 0)
    throw InputError(who + ": SparseGPT block size " + std::to_string(options.blockSize) +
                     " is not a multiple of M = " + std::to_string(pattern.m()) + " for pattern " + pattern.label());
  ObsInputs inputs = obsInputs(weight, hessian, /*keep=*/{}, at::kFloat, who, "SparseGPT");
  const at::Tensor w = std::move(inputs.weight);
  SparseGptResult result;
  SparseGptReport& report = result.report;
  report.deadInputs = inputs.deadInputs;
  const DampedInverse damped = dampedInverse(inputs.hessian, options.damp, options.maxDampRetries, who, "SparseGPT");
  noteDamping(report, damped.damping);
  inputs.hessian = at::Tensor();  // the damped H is no longer needed; free it before the sweep
  const at::Tensor hinvDiagonal = damped.upper.diagonal();

  // The mask, by the score w² / U_jj² on the current weights: unstructured per lazy block, N:M per group of M
  // columns just before the group is pruned.
  const at::Tensor keep = at::ones(w.sizes(), w.options().dtype(at::kBool));
  ObsSweepHooks hooks;
  if (pattern.isUnstructured())
    hooks.beginBlock = [&](const ObsSweepState& sweep) {
      const at::Tensor scores =
          sweep.block().square() / hinvDiagonal.narrow(0, sweep.start(), sweep.width()).square().unsqueeze(0);
      keep.narrow(1, sweep.start(), sweep.width())
          .copy_(keepMaskFromScores(scores, pattern, UnstructuredScope::WholeTensor));
    };
  hooks.fixColumn = [&](const ObsSweepState& sweep, int64_t column, const at::Tensor& values) {
    if (pattern.isNM() && column % pattern.m() == 0) {
      const int64_t m = pattern.m();
      const at::Tensor scores =
          sweep.current(column, m).square() / hinvDiagonal.narrow(0, column, m).square().unsqueeze(0);
      keep.narrow(1, column, m).copy_(keepMaskFromScores(scores, pattern, UnstructuredScope::PerRow));
    }
    return values.masked_fill(keep.select(1, column).logical_not(), 0);
  };
  ObsBlockRule rule;
  if (obsBlockKernelAvailable(w)) {
    rule.kind = pattern.isNM() ? ObsBlockRule::Kind::NMMask : ObsBlockRule::Kind::GivenMask;
    rule.keep = keep;
    rule.n = pattern.n();
    rule.m = pattern.m();
    hooks.fixBlock = [&](const ObsSweepState& sweep, const at::Tensor& hinvBlock, const at::Tensor& errorsT,
                         const at::Tensor& losses) { return obsBlockKernel(rule, sweep, hinvBlock, errorsT, losses); };
  }
  const ObsSweepResult swept = obsSweep(w, damped.upper, options.blockSize, hooks);

  checkSweptWeight(swept.weight, who, "SparseGPT", report.damp);
  report.loss = swept.loss;
  result.pruned = {swept.weight.to(weight.scalar_type()), keep};
  return result;
}

}  // namespace pareto
