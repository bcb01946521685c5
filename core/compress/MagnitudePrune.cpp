#include "compress/MagnitudePrune.h"

#include <ATen/ATen.h>

#include "compress/PruneInputs.h"
#include "compress/PruneMask.h"

namespace pareto {

PruneResult magnitudePrune(const at::Tensor& weight, const SparsityPattern& pattern, const std::string& moduleName) {
  checkPruneWeight(weight, pattern, moduleName);
  const at::Tensor keep = keepMaskFromScores(weight.abs().to(at::kFloat), pattern, UnstructuredScope::WholeTensor);
  return {weight.masked_fill(keep.logical_not(), 0), keep};
}

}  // namespace pareto
