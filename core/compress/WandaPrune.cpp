#include "compress/WandaPrune.h"

#include <ATen/ATen.h>

#include "compress/PruneInputs.h"
#include "compress/SolverInputs.h"
#include "compress/PruneMask.h"
#include "util/Error.h"

namespace pareto {

at::Tensor wandaInputNorms(const at::Tensor& hessian) {
  if (!hessian.defined() || hessian.dim() != 2 || hessian.size(0) != hessian.size(1))
    throw InputError("Wanda input norms: the Hessian must be a square 2-D tensor");
  // Rounding can leave a tiny negative diagonal entry for an input that is always zero.
  return hessian.diagonal().to(at::kFloat).clamp_min(0).sqrt();
}

PruneResult wandaPrune(const at::Tensor& weight, const at::Tensor& inputNorms, const SparsityPattern& pattern,
                       const std::string& moduleName) {
  checkPruneWeight(weight, pattern, moduleName);
  const std::string who = solverSubject(moduleName);
  if (!inputNorms.defined() || inputNorms.dim() != 1 || inputNorms.size(0) != weight.size(1))
    throw InputError(who + ": Wanda input norms must be a vector of " + std::to_string(weight.size(1)) +
                     " entries, one per input column");
  const at::Tensor norms = inputNorms.to(weight.device(), at::kFloat);
  if (!at::isfinite(norms).all().item<bool>() || (norms < 0).any().item<bool>())
    throw InputError(who + ": Wanda input norms must be finite and >= 0");
  const at::Tensor scores = weight.abs().to(at::kFloat) * norms.unsqueeze(0);
  const at::Tensor keep = keepMaskFromScores(scores, pattern, UnstructuredScope::PerRow);
  return {weight.masked_fill(keep.logical_not(), 0), keep};
}

}  // namespace pareto
