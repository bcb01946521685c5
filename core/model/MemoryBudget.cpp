#include "model/MemoryBudget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>

#include "checkpoint/ShardPlan.h"
#include "util/Error.h"
#include "util/InputFile.h"

#ifdef PARETO_WITH_CUDA
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace pareto {

MemoryBudget MemoryBudget::parse(const std::string& gpu, const std::string& host) {
  MemoryBudget b;
  auto one = [](const std::string& text, const char* option) -> uint64_t {
    if (text.empty()) return 0;
    try {
      const uint64_t bytes = parseByteSize(text);
      if (bytes == 0) throw InputError("0 bytes");
      return bytes;
    } catch (const InputError& e) {
      throw InputError(std::string(option) + " \"" + text + "\": " + e.what() + " (a size such as 8GiB or 24GB)");
    }
  };
  b.gpuBytes = one(gpu, "--max-gpu-memory");
  b.hostBytes = one(host, "--max-host-memory");
  return b;
}

uint64_t hostResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t hostPeakResidentBytes() {
  struct rusage usage {};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;   // Linux reports KiB
}

#ifdef PARETO_WITH_CUDA
namespace {
// The caching allocator sets itself up on the first CUDA allocation; its statistics and limits refuse a device
// before that ("Invalid device argument"), so each call makes sure one allocation happened.
c10::DeviceIndex indexOf(const c10::Device& device) {
  (void)at::empty({1}, at::TensorOptions().device(device).dtype(at::kByte));
  return device.has_index() ? device.index() : 0;
}
}  // namespace

uint64_t gpuReservedBytes(const c10::Device& device) {
  if (!device.is_cuda()) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(indexOf(device));
  return static_cast<uint64_t>(stats.reserved_bytes[0].current);
}

uint64_t gpuPeakBytes(const c10::Device& device) {
  if (!device.is_cuda()) return 0;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(indexOf(device));
  return static_cast<uint64_t>(stats.reserved_bytes[0].peak);
}

void resetGpuPeak(const c10::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(indexOf(device));
}

uint64_t gpuTotalBytes(const c10::Device& device) {
  if (!device.is_cuda()) return 0;
  size_t free = 0, total = 0;
  if (cudaSetDevice(indexOf(device)) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return total;
}

void limitGpuMemory(const c10::Device& device, uint64_t bytes) {
  if (!device.is_cuda()) return;
  const uint64_t total = gpuTotalBytes(device);
  if (bytes > total)
    throw InputError("--max-gpu-memory " + formatBytes(bytes) + " is more than the " + formatBytes(total) + " this GPU has");
  c10::cuda::CUDACachingAllocator::setMemoryFraction(bytes == 0 ? 1.0 : double(bytes) / double(total),
                                                      indexOf(device));
}
#else
uint64_t gpuReservedBytes(const c10::Device&) { return 0; }
uint64_t gpuPeakBytes(const c10::Device&) { return 0; }
void resetGpuPeak(const c10::Device&) {}
uint64_t gpuTotalBytes(const c10::Device&) { return 0; }
void limitGpuMemory(const c10::Device&, uint64_t) {}
#endif

GpuMemoryLimit::GpuMemoryLimit(const c10::Device& device, uint64_t bytes) : device_(device) {
  if (!device.is_cuda() || bytes == 0) return;
  limitGpuMemory(device, bytes);
  active_ = true;
}

GpuMemoryLimit::~GpuMemoryLimit() {
  if (!active_) return;
  try {
    limitGpuMemory(device_, 0);
  } catch (...) {
    // nothing to restore into
  }
}

uint64_t blockWeightBytes(const ModelConfig& c, c10::ScalarType dtype) {
  const uint64_t H = c.hiddenSize, D = c.headDim, F = c.intermediateSize;
  const uint64_t q = c.numHeads * D, kv = c.numKvHeads * D;
  uint64_t weights = H * q + 2 * H * kv + q * H + 3 * H * F + 2 * H;
  if (c.attentionBias) weights += q + 2 * kv;
  if (c.oProjBias) weights += H;
  if (c.mlpBias) weights += 2 * F + H;
  if (c.qkNorm) weights += 2 * D;
  return weights * c10::elementSize(dtype);
}

uint64_t embeddingBytes(const ModelConfig& c, c10::ScalarType dtype) {
  return static_cast<uint64_t>(c.vocabSize) * c.hiddenSize * c10::elementSize(dtype);
}

uint64_t modelWeightBytes(const ModelConfig& c, c10::ScalarType dtype) {
  return blockWeightBytes(c, dtype) * c.numLayers + embeddingBytes(c, dtype) * (c.tieWordEmbeddings ? 1 : 2) +
         static_cast<uint64_t>(c.hiddenSize) * c10::elementSize(dtype);
}

uint64_t withHeadroom(uint64_t bytes) { return static_cast<uint64_t>(double(bytes) * 1.15); }

uint64_t wholeModelGenerationBytes(const ModelConfig& c, c10::ScalarType dtype, int64_t batch, int64_t positions,
                                   int models) {
  const uint64_t e = c10::elementSize(dtype);
  const uint64_t kv = 2 * uint64_t(c.numLayers) * batch * c.numKvHeads * positions * c.headDim * e;
  const uint64_t logits = uint64_t(batch) * positions * c.vocabSize * 4;
  return withHeadroom(uint64_t(models) * (modelWeightBytes(c, dtype) + kv) + logits);
}

void requireGenerationFits(const ModelConfig& config, const c10::Device& device, c10::ScalarType dtype,
                           const MemoryBudget& budget, int64_t batch, int64_t positions, int models,
                           const std::string& what) {
  const bool cuda = device.is_cuda();
  const uint64_t limit = cuda ? budget.gpuBytes : budget.hostBytes;
  if (limit == 0) return;
  const uint64_t need = wholeModelGenerationBytes(config, dtype, batch, positions, models);
  if (need <= limit) return;
  throw InputError(what + " generates with " + (models == 1 ? std::string("the whole model") : "both whole models") +
                   " (every layer for every new token, so it cannot stream block by block): " +
                   std::to_string(batch) + " sequences of up to " + std::to_string(positions) +
                   " positions need about " + formatBytes(need) + ", more than the " + formatBytes(limit) + " of " +
                   (cuda ? "--max-gpu-memory" : "--max-host-memory") +
                   "; raise it, lower --batch or the tokens generated per prompt, or run it where the model fits");
}

}  // namespace pareto
