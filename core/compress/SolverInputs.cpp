#include "compress/SolverInputs.h"

#include <ATen/ATen.h>

#include <sstream>

#include "util/Error.h"

namespace pareto {

std::string solverSubject(const std::string& moduleName) {
  return moduleName.empty() ? std::string("weight") : "module '" + moduleName + "'";
}

void checkWeightMatrix(const at::Tensor& weight, const std::string& who) {
  if (!weight.defined()) throw InputError(who + ": weight is undefined");
  if (weight.dim() != 2) {
    std::ostringstream shape;
    shape << weight.sizes();
    throw InputError(who + ": weight must be 2-D [out, in], got shape " + shape.str());
  }
  if (!at::isFloatingType(weight.scalar_type()))
    throw InputError(who + ": weight must be floating point, got " + std::string(c10::toString(weight.scalar_type())));
}

void checkFiniteWeight(const at::Tensor& weight, const std::string& who) {
  if (!at::isfinite(weight).all().item<bool>()) throw InputError(who + ": weight contains NaN or infinity");
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

}  // namespace pareto
