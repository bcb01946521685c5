#include "compress/PruneInputs.h"

#include <ATen/ATen.h>

#include <sstream>

#include "util/Error.h"

namespace pareto {

void checkPruneWeight(const at::Tensor& weight, const SparsityPattern& pattern, const std::string& moduleName) {
  const std::string who = solverSubject(moduleName);
  checkWeightMatrix(weight, who);
  pattern.checkColumns(weight.size(1), moduleName);
  checkFiniteWeight(weight, who);
}

}  // namespace pareto
