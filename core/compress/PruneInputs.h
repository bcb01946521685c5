// Argument checks shared by the pruning solvers, so that every method rejects the same bad input with the same
// message naming the module.
#pragma once

#include <ATen/core/Tensor.h>
#include <string>

#include "compress/SolverInputs.h"
#include "compress/SparsityPattern.h"

namespace pareto {

// Throws InputError unless `weight` is a defined 2-D floating tensor [out, in] of finite values whose `in`
// fits the pattern.
void checkPruneWeight(const at::Tensor& weight, const SparsityPattern& pattern, const std::string& moduleName);

}  // namespace pareto
