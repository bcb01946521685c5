#include "compress/PruneInputs.h"

#include <ATen/ATen.h>

#include <sstream>

#include "util/Error.h"

namespace pareto {

std::string pruneSubject(const std::string& moduleName) {
  return moduleName.empty() ? std::string("weight") : "module '" + moduleName + "'";
}

void checkPruneWeight(const at::Tensor& weight, const SparsityPattern& pattern, const std::string& moduleName) {
  const std::string who = pruneSubject(moduleName);
  if (!weight.defined()) throw InputError(who + ": weight is undefined");
  if (weight.dim() != 2) {
    std::ostringstream shape;
    shape << weight.sizes();
    throw InputError(who + ": weight must be 2-D [out, in], got shape " + shape.str());
  }
  if (!at::isFloatingType(weight.scalar_type()))
    throw InputError(who + ": weight must be floating point, got " + std::string(c10::toString(weight.scalar_type())));
  pattern.checkColumns(weight.size(1), moduleName);
  if (!at::isfinite(weight).all().item<bool>()) throw InputError(who + ": weight contains NaN or infinity");
}

}  // namespace pareto
