// The message of the InputError that `f` throws, or "(no InputError)": lets a test match what a refusal says
// (file, tensor, module, key) with gmock matchers instead of only that it threw.
#pragma once

#include <string>

#include "util/Error.h"

namespace pareto::test {

template <class F>
std::string inputErrorOf(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace pareto::test
