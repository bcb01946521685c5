#include "compress/ObsBlockKernel.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>

#include "compress/ObsSweep.h"
#include "util/Error.h"

#ifdef PARETO_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>

#include "kernels/ObsBlockSweep.h"
#endif

namespace pareto {
namespace {

bool fusedEnabled() {
  const char* v = std::getenv("PARETO_OBS_FUSED");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

#ifdef PARETO_WITH_CUDA
// A [out, in] matrix's pointer at column `start`, and its row stride; null where the tensor is absent.
template <class T>
T* atColumn(const at::Tensor& t, int64_t start) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) + start : nullptr;
}
#endif

}  // namespace

bool obsBlockKernelAvailable(const at::Tensor& w) {
#ifdef PARETO_WITH_CUDA
  return w.is_cuda() && w.scalar_type() == at::kFloat && fusedEnabled();
#else
  (void)w;
  return false;
#endif
}

bool obsBlockKernel(const ObsBlockRule& rule, const ObsSweepState& state, const at::Tensor& hinvBlock,
                    const at::Tensor& errorsT, const at::Tensor& losses) {
#ifdef PARETO_WITH_CUDA
  namespace k = pareto::kernels;
  const at::Tensor& block = state.block();
  if (!obsBlockKernelAvailable(block) || !block.is_contiguous() || hinvBlock.stride(1) != 1 ||
      !errorsT.is_contiguous() || !losses.is_contiguous())
    return false;
  k::ObsBlockSweepProblem p;
  p.rows = block.size(0);
  p.width = int(block.size(1));
  p.start = state.start();
  p.block = block.data_ptr<float>();
  p.hinv = hinvBlock.data_ptr<float>();
  p.hinvStride = hinvBlock.stride(0);
  p.errors = errorsT.data_ptr<float>();
  p.losses = losses.data_ptr<float>();
  switch (rule.kind) {
    case ObsBlockRule::Kind::GivenMask:
    case ObsBlockRule::Kind::NMMask:
      p.rule = rule.kind == ObsBlockRule::Kind::NMMask ? k::ObsRule::NMMask : k::ObsRule::GivenMask;
      p.keep = atColumn<uint8_t>(rule.keep, p.start);
      p.keepStride = rule.keep.stride(0);
      p.n = int(rule.n);
      p.m = int(rule.m);
      break;
    case ObsBlockRule::Kind::Quantize:
      p.rule = k::ObsRule::Quantize;
      p.scales = rule.scales.data_ptr<float>();
      p.zeros = rule.zeros.data_ptr<float>();
      p.gridStride = rule.scales.size(0) == 1 ? 0 : rule.scales.stride(0);
      p.groupSize = rule.groupSize;
      p.dynamicGroups = rule.dynamicGroups;
      p.symmetric = rule.symmetric;
      p.qmin = float(rule.qmin);
      p.qmax = float(rule.qmax);
      p.codes = atColumn<float>(rule.codes, p.start);
      p.codesStride = rule.codes.stride(0);
      p.pruned = atColumn<uint8_t>(rule.pruned, p.start);
      p.prunedStride = rule.pruned.defined() ? rule.pruned.stride(0) : 0;
      p.overflow = rule.overflow.defined() ? rule.overflow.data_ptr<int>() : nullptr;
      break;
  }
  if (!k::checkObsBlockSweep(p).empty()) return false;
  const std::string e = k::runObsBlockSweep(p, at::cuda::getCurrentCUDAStream().stream());
  if (!e.empty()) throw Error("OBS block sweep at column " + std::to_string(p.start) + ": " + e);
  return true;
#else
  (void)rule, (void)state, (void)hinvBlock, (void)errorsT, (void)losses;
  return false;
#endif
}

}  // namespace pareto
