#include "KernelSwitches.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pareto::kernels {

SwitchSetting kernelSwitch(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return SwitchSetting::Unset;
  if (std::strcmp(v, "0") == 0) return SwitchSetting::Off;
  if (std::strcmp(v, "1") == 0) return SwitchSetting::On;
  std::fprintf(stderr, "pareto: %s=%s is neither 0 nor 1; the kernels ignore it\n", name, v);
  return SwitchSetting::Unset;
}

}  // namespace pareto::kernels
