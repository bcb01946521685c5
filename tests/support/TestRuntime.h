// The device and dtype model tests run on: CPU float32 by default; PARETO_TEST_DEVICE=cuda and
// PARETO_TEST_DTYPE=bfloat16 run the same checks on the GPU machine.
#pragma once

#include <cstdlib>

#include "model/Device.h"

namespace pareto::test {

inline RuntimeOptions testRuntime() {
  const char* dev = std::getenv("PARETO_TEST_DEVICE");
  const char* dt = std::getenv("PARETO_TEST_DTYPE");
  return makeRuntimeOptions(dev ? dev : "cpu", dt ? dt : "float32");
}

inline bool reducedPrecision() { return testRuntime().dtype != c10::kFloat; }

}  // namespace pareto::test
