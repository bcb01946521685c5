#include "runtime/CopyBandwidth.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "util/Error.h"

#ifdef PARETO_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#endif

namespace pareto {
namespace {

#ifdef PARETO_WITH_CUDA
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(e));
}

double deviceCopyBandwidth(const c10::Device& device) {
  const c10::cuda::CUDAGuard guard(device);
  const int64_t bytes = int64_t(2) << 30;
  at::Tensor a = at::empty({bytes}, at::TensorOptions().device(device).dtype(at::kByte));
  at::Tensor b = at::empty_like(a);
  c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device.index());
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> ms;
  for (int i = 0; i < 13; ++i) {
    check(cudaEventRecord(start, stream.stream()), "cudaEventRecord");
    b.copy_(a);
    check(cudaEventRecord(stop, stream.stream()), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float elapsed = 0;
    check(cudaEventElapsedTime(&elapsed, start, stop), "cudaEventElapsedTime");
    if (i >= 3) ms.push_back(elapsed);   // the first copies pay for allocation and clocks ramping up
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  const double median = ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
  return 2.0 * double(bytes) / (median * 1e-3);
}
#endif

}  // namespace

double measureHostCopyBandwidth(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1 << 20);
  std::unique_ptr<char[]> from(new char[bytes]), to(new char[bytes]);
  // Touch both buffers first so that page faults are not timed.
  std::memset(from.get(), 1, bytes);
  std::memset(to.get(), 0, bytes);
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(to.get(), from.get(), bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Keep the copy observable so that it is not optimised away.
    if (to[bytes / 2] != from[bytes / 2]) return 0;
    if (s > 0) best = std::max(best, 2.0 * double(bytes) / s);
  }
  return best;
}

double measureCopyBandwidth(const c10::Device& d) {
  if (!d.is_cuda()) return measureHostCopyBandwidth();
#ifdef PARETO_WITH_CUDA
  return deviceCopyBandwidth(d);
#else
  throw InputError("this build has no CUDA support");
#endif
}

}  // namespace pareto
