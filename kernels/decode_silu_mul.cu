// decode_silu_mul: out = silu(gate) · up for gateUp = [gate | up] (DecodeOps.h), with silu rounded to the dtype
// before the product, as transformers' act_fn(gate) * up (DecodeArithmetic.cuh).
//
// Purely elementwise: a thread takes 8 consecutive columns of gate and of up with one 16-byte load each, and
// the grid covers all rows at once, so even batch 1 of a 14336-wide MLP spreads over the whole device.
#include "DecodeOps.h"
#include "DecodeArithmetic.cuh"
#include "GemvDriver.cuh"

namespace pareto::kernels {
namespace {

using detail::aligned16;

constexpr int kThreads = 256;


template <ActivationType T>
__global__ void __launch_bounds__(kThreads) siluMulKernel(const SiluMulProblem p) {
  const int64_t perRow = p.width / 8;
  const int64_t v = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  detail::allowDependentLaunch();
  detail::waitForPreviousGrid();  // gateUp is the GEMV's output just before (ProgrammaticLaunch.cuh)
  if (v >= int64_t(p.batch) * perRow) return;
  const int64_t row = v / perRow, column = v - row * perRow;
  const uint4* gate = static_cast<const uint4*>(p.gateUp) + row * 2 * perRow + column;
  const uint4 g = *gate, u = *(gate + perRow);
  static_cast<uint4*>(p.out)[v] = detail::siluMul8<T>(g, u);
}

}  // namespace

std::string runSiluMul(const SiluMulProblem& p, CUstream_st* stream) {
  if (auto e = checkSiluMul(p); !e.empty()) return e;
  if (p.gateUp == nullptr || p.out == nullptr) return "missing input or output";
  if (!aligned16(p.gateUp) || !aligned16(p.out))
    return "tensors must be 16-byte aligned (the kernel reads 16 bytes at a time)";
  const int64_t vectors = int64_t(p.batch) * (p.width / 8);
  const dim3 grid{unsigned(ceilDiv(vectors, kThreads))}, block{unsigned(kThreads)};
  (void)cudaGetLastError();  // a stale error of an unrelated call must not be reported as this launch's
  const cudaError_t e =
      p.type == ActivationType::Float16
          ? detail::launchKernel(siluMulKernel<ActivationType::Float16>, grid, block, 0, stream, p)
          : detail::launchKernel(siluMulKernel<ActivationType::BFloat16>, grid, block, 0, stream, p);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "decode_silu_mul launch");
}

}  // namespace pareto::kernels
