// decode_rope_cache: per head of the new token, the optional RMSNorm (Qwen3's q_norm / k_norm), rotary
// embedding, and the key and value written into the cache at the slot (DecodeOps.h).
//
// One block per (head, batch row) over q, k and v heads alike, one thread per rotation pair (i, i + D/2): a
// rotation needs both halves of the head and the norm needs the whole head, so a head is the natural unit, and
// with D ≤ 256 it is at most four warps. The arithmetic repeats transformers' sequence of 16-bit roundings
// (cos and sin rounded to the dtype, each product rounded, then the sum) so that results match the CPU path
// bit for bit except where cosf/sinf and the CPU's vectorised cos/sin differ in the last fp32 bit.
#include "DecodeOps.h"
#include "GemvDriver.cuh"

namespace pareto::kernels {
namespace {

using detail::Act;
using detail::aligned16;
using detail::blockSum;

constexpr int kMaxThreads = int(kDecodeMaxHeadDim / 2);

template <ActivationType T>
__global__ void __launch_bounds__(kMaxThreads) ropeCacheKernel(const RopeCacheProblem p) {
  using A = Act<T>;
  using E = typename A::type;
  __shared__ float warpTotals[kMaxThreads / 32];
  const int head = blockIdx.x;
  const int b = blockIdx.y;
  const int D = int(p.headDim), half = D / 2;
  const int i = threadIdx.x;
  const bool active = i < half;
  const int64_t heads = p.qHeads + 2 * p.kvHeads;
  const E* src = static_cast<const E*>(p.qkv) + (int64_t(b) * heads + head) * D;
  detail::allowDependentLaunch();
  detail::waitForPreviousGrid();  // qkv is the GEMV's output just before (ProgrammaticLaunch.cuh)
  const int64_t slot = *p.slot;
  const bool slotInCache = slot >= 0 && slot < p.capacity;

  float x0 = 0.f, x1 = 0.f;
  if (active) {
    x0 = A::toFloat(src[i]);
    x1 = A::toFloat(src[i + half]);
  }
  if (head >= p.qHeads + p.kvHeads) {  // a value head: into the cache as it is
    if (active && slotInCache) {
      const int64_t kvHead = head - p.qHeads - p.kvHeads;
      E* dst = static_cast<E*>(p.values) + ((int64_t(b) * p.kvHeads + kvHead) * p.capacity + slot) * D;
      dst[i] = src[i];
      dst[i + half] = src[i + half];
    }
    return;
  }
  const bool isQuery = head < p.qHeads;
  const E* norm = static_cast<const E*>(isQuery ? p.qNorm : p.kNorm);
  if (norm != nullptr) {  // the same for the whole block, so every thread reaches the reduction
    const float variance = blockSum(x0 * x0 + x1 * x1, warpTotals) / float(D);
    const float inv = 1.f / sqrtf(variance + p.eps);
    if (active) {
      x0 = A::toFloat(A::fromFloat(A::toFloat(A::fromFloat(x0 * inv)) * A::toFloat(norm[i])));
      x1 = A::toFloat(A::fromFloat(A::toFloat(A::fromFloat(x1 * inv)) * A::toFloat(norm[i + half])));
    }
  }
  if (!active) return;
  // angle = float32(position) · invFreq in fp32, then the precise cosf / sinf (not __cosf: positions in the
  // thousands need the full range reduction), each rounded to the dtype as emb.cos().to(dtype).
  const float angle = float(p.positions[b]) * p.invFreq[i];
  const float c = A::toFloat(A::fromFloat(cosf(angle)));
  const float s = A::toFloat(A::fromFloat(sinf(angle)));
  auto round = [](float v) { return A::toFloat(A::fromFloat(v)); };
  // q·cos + rotate_half(q)·sin, rotate_half(q) = [−q₂, q₁]: every product and the sum rounded to the dtype.
  const E out0 = A::fromFloat(round(x0 * c) - round(x1 * s));
  const E out1 = A::fromFloat(round(x1 * c) + round(x0 * s));
  E* dst;
  if (isQuery) {
    dst = static_cast<E*>(p.q) + (int64_t(b) * p.qHeads + head) * D;
  } else {
    if (!slotInCache) return;
    dst = static_cast<E*>(p.keys) + ((int64_t(b) * p.kvHeads + head - p.qHeads) * p.capacity + slot) * D;
  }
  dst[i] = out0;
  dst[i + half] = out1;
}

}  // namespace

std::string runRopeCache(const RopeCacheProblem& p, CUstream_st* stream) {
  if (auto e = checkRopeCache(p); !e.empty()) return e;
  if (p.qkv == nullptr || p.positions == nullptr || p.invFreq == nullptr || p.slot == nullptr || p.q == nullptr ||
      p.keys == nullptr || p.values == nullptr)
    return "missing input, position, frequency, slot or output pointer";
  if (!aligned16(p.qkv) || !aligned16(p.q) || !aligned16(p.keys) || !aligned16(p.values))
    return "tensors must be 16-byte aligned";
  const int threads = int((p.headDim / 2 + 31) / 32 * 32);
  const dim3 grid{unsigned(p.qHeads + 2 * p.kvHeads), unsigned(p.batch)}, block{unsigned(threads)};
  (void)cudaGetLastError();  // a stale error of an unrelated call must not be reported as this launch's
  const cudaError_t e =
      p.type == ActivationType::Float16
          ? detail::launchKernel(ropeCacheKernel<ActivationType::Float16>, grid, block, 0, stream, p)
          : detail::launchKernel(ropeCacheKernel<ActivationType::BFloat16>, grid, block, 0, stream, p);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "decode_rope_cache launch");
}

}  // namespace pareto::kernels
