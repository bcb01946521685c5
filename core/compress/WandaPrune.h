// Wanda (Sun et al. 2023): score each weight by |W_ij| · ‖x_j‖₂, the size of its contribution to the output over
// the calibration inputs; no weight update.
#pragma once

#include <ATen/core/Tensor.h>
#include <string>

#include "compress/PruneResult.h"
#include "compress/SparsityPattern.h"

namespace pareto {

// ‖x_j‖₂ per input j from a Hessian Σ w·x xᵀ [in, in] (HessianAccumulator::sum(); its mean gives the same
// ranking): the square root of its diagonal, float32 on the Hessian's device.
at::Tensor wandaInputNorms(const at::Tensor& hessian);

// weight: [out, in]; inputNorms: [in] (any device, moved to the weight's). Unstructured removes floor(s · in)
// weights in every output row; N:M keeps the N best of every M consecutive inputs. Throws InputError naming the
// module for bad shapes or non-finite / negative norms.
PruneResult wandaPrune(const at::Tensor& weight, const at::Tensor& inputNorms, const SparsityPattern& pattern,
                       const std::string& moduleName = {});

}  // namespace pareto
