#include "model/Device.h"

#include <ATen/Context.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "util/Error.h"

#ifdef PARETO_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace pareto {

c10::Device parseDevice(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    if (!at::hasCUDA())
      throw InputError("device \"" + name +
                       "\" asked for, but CUDA is not available (this build or this machine has no CUDA GPU)");
    int index = 0;
    if (name.size() > 5) {
      try {
        size_t used = 0;
        index = std::stoi(name.substr(5), &used);
        if (used != name.size() - 5 || index < 0) throw std::invalid_argument(name);
      } catch (const std::exception&) {
        throw InputError("device \"" + name + "\": expected cuda or cuda:N");
      }
    }
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw InputError("unknown device \"" + name + "\" (expected cpu, cuda or cuda:N)");
}

c10::ScalarType parseDtype(const std::string& name) {
  if (name == "float32" || name == "fp32" || name == "float") return c10::kFloat;
  if (name == "bfloat16" || name == "bf16") return c10::kBFloat16;
  if (name == "float16" || name == "fp16" || name == "half") return c10::kHalf;
  throw InputError("unknown dtype \"" + name + "\" (expected float32, bfloat16 or float16)");
}

std::string dtypeLabel(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat: return "float32";
    case c10::kBFloat16: return "bfloat16";
    case c10::kHalf: return "float16";
    default: return c10::toString(dtype);
  }
}

RuntimeOptions makeRuntimeOptions(const std::string& device, const std::string& dtype) {
  RuntimeOptions opts;
  opts.device = parseDevice(device);
  opts.dtype = parseDtype(dtype);
  if (opts.device.is_cpu() && opts.dtype == c10::kHalf)
    throw InputError("dtype float16 is not supported on the CPU (use float32 or bfloat16, or --device cuda)");
  return opts;
}

std::string deviceDescription(const c10::Device& device) {
  if (device.is_cpu()) return "cpu";
#ifdef PARETO_WITH_CUDA
  const auto* prop = at::cuda::getDeviceProperties(device.has_index() ? device.index() : 0);
  return std::string(prop->name);
#else
  return device.str();
#endif
}

void synchronizeCurrentStream(const c10::Device& device) {
  if (!device.is_cuda()) return;
  const c10::impl::VirtualGuardImpl guard(device.type());
  guard.synchronizeStream(guard.getStream(device));
}

}  // namespace pareto
