// Parsing the user's --device / --dtype choices into LibTorch values, with clear errors when the build or
// the machine cannot honour them.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <string>

namespace pareto {

struct RuntimeOptions {
  c10::Device device = c10::Device(c10::kCPU);
  c10::ScalarType dtype = c10::kFloat;   // compute and weight dtype on the device
  // Keep a compressed folder's packed modules packed (runtime/PackedLinear.h: the GEMV kernels on CUDA, their
  // references on the CPU) instead of unpacking them to dense weights. Needs a float16/bfloat16 dtype; modules
  // without a kernel for their format still load dense (LlamaModel::runtimeNotes() lists them).
  bool packedWeights = false;
};

// "cpu", "cuda", "cuda:1". Throws InputError for an unknown name or when CUDA is asked for but absent.
c10::Device parseDevice(const std::string& name);
// "float32", "bfloat16", "float16" (also "fp32", "bf16", "fp16"). Throws InputError otherwise.
c10::ScalarType parseDtype(const std::string& name);
std::string dtypeLabel(c10::ScalarType dtype);
// Throws InputError when the pair cannot run (float16 matmuls are not implemented on the CPU).
RuntimeOptions makeRuntimeOptions(const std::string& device, const std::string& dtype);

// The compute dtype a job runs in unless the user picks another, on every device and in both front ends: float32,
// so that one recipe gives the same calibration, weights and metrics from the CLI and from the workbench.
inline constexpr const char* kDefaultComputeDtype = "float32";
// "cpu" or the CUDA device's name ("NVIDIA H200").
std::string deviceDescription(const c10::Device& device);
// Waits for the work queued on the device's current stream (of this thread); nothing on the CPU.
void synchronizeCurrentStream(const c10::Device& device);

}  // namespace pareto
