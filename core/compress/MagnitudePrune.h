// Magnitude pruning: remove the weights of smallest |W|. No calibration data; the baseline the others must beat.
#pragma once

#include <ATen/core/Tensor.h>
#include <string>

#include "compress/PruneResult.h"
#include "compress/SparsityPattern.h"

namespace pareto {

// weight: [out, in] floating, any device. Unstructured removes floor(s · numel) smallest |W| over the whole
// tensor; N:M keeps the N largest |W| of every M consecutive inputs. Throws InputError naming the module.
PruneResult magnitudePrune(const at::Tensor& weight, const SparsityPattern& pattern,
                           const std::string& moduleName = {});

}  // namespace pareto
