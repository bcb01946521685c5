// Argument checks shared by every solver (pruning and quantization), so that each rejects the same bad input with
// the same message naming the module.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace pareto {

// "module 'name'" or "weight" when no name is given: the subject of every solver message.
std::string solverSubject(const std::string& moduleName);

// Throws InputError naming `who` unless `weight` is a defined 2-D floating tensor [out, in].
void checkWeightMatrix(const at::Tensor& weight, const std::string& who);

// Throws InputError naming `who` if `weight` holds NaN or infinity.
void checkFiniteWeight(const at::Tensor& weight, const std::string& who);

// Throws InputError naming `who` unless `hessian` is a finite floating [columns, columns] matrix.
void checkHessian(const at::Tensor& hessian, int64_t columns, const std::string& who);

}  // namespace pareto
