#include "runtime/DecodeOps.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

// kernels/DecodeOps.h, spelled with its folder: a plain "DecodeOps.h" would find this file's own header.
#include "kernels/DecodeOps.h"
#include "util/Error.h"

#ifdef PARETO_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace pareto {
namespace {

namespace k = kernels;

std::string shapeText(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

// Validates the tensors of one op; every message starts with the op's name and names the tensor.
class Checks {
 public:
  explicit Checks(std::string op) : op_(std::move(op)) {}

  [[noreturn]] void fail(const std::string& what) const { throw InputError(op_ + ": " + what); }

  // The tensor that fixes the device and dtype of the others: fp16 or bf16, on the CPU or a CUDA device.
  void primary(const at::Tensor& t, const std::string& name, int64_t dims) {
    if (!t.defined()) fail(name + " is missing");
    if (t.dim() != dims) fail(name + " must have " + std::to_string(dims) + " dimensions, got " + shapeText(t.sizes()));
    if (t.scalar_type() != at::kHalf && t.scalar_type() != at::kBFloat16)
      fail(name + " must be float16 or bfloat16, got " + std::string(c10::toString(t.scalar_type())));
    if (!t.is_cpu() && !t.is_cuda()) fail(name + " must be on the CPU or a CUDA device, got " + t.device().str());
    device_ = t.device();
    dtype_ = t.scalar_type();
    primaryName_ = name;
    contiguous(t, name);
  }

  // A tensor of exactly `sizes`, of `dtype` (the primary's when omitted), on the primary's device, contiguous.
  void tensor(const at::Tensor& t, const std::string& name, const std::vector<int64_t>& sizes,
              std::optional<at::ScalarType> dtype = std::nullopt) const {
    if (!t.defined()) fail(name + " is missing");
    if (t.sizes() != at::IntArrayRef(sizes)) fail(name + " must be " + shapeText(sizes) + ", got " + shapeText(t.sizes()));
    const at::ScalarType want = dtype.value_or(dtype_);
    if (t.scalar_type() != want)
      fail(name + " must be " + std::string(c10::toString(want)) + ", got " + std::string(c10::toString(t.scalar_type())));
    if (t.device() != device_)
      fail(name + " is on " + t.device().str() + " but " + primaryName_ + " is on " + device_.str());
    contiguous(t, name);
  }

  // The single int64 slot, on the primary's device.
  void slot(const at::Tensor& t, const std::string& name) const {
    if (!t.defined()) fail(name + " is missing");
    if (t.numel() != 1) fail(name + " must hold one value, got " + shapeText(t.sizes()));
    if (t.scalar_type() != at::kLong) fail(name + " must be int64, got " + std::string(c10::toString(t.scalar_type())));
    if (t.device() != device_)
      fail(name + " is on " + t.device().str() + " but " + primaryName_ + " is on " + device_.str());
  }

  void kernelCheck(const std::string& error) const {
    if (!error.empty()) fail(error);
  }

  // A row count for the kernels' problems: huge counts stay huge, so that their checks reject them.
  static int rows(int64_t n) { return int(std::min<int64_t>(n, 1 << 20)); }

  k::ActivationType type() const {
    return dtype_ == at::kHalf ? k::ActivationType::Float16 : k::ActivationType::BFloat16;
  }

 private:
  void contiguous(const at::Tensor& t, const std::string& name) const {
    if (!t.is_contiguous()) fail(name + " must be contiguous");
  }

  std::string op_;
  at::Device device_ = at::kCPU;
  at::ScalarType dtype_ = at::kHalf;
  std::string primaryName_;
};

#ifdef PARETO_WITH_CUDA
cudaStream_t currentStream() { return at::cuda::getCurrentCUDAStream().stream(); }
#endif

// transformers' LlamaRMSNorm: normalise in fp32, round to the dtype, then multiply by the weight in the dtype.
at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  at::Tensor xf = x.to(at::kFloat);
  const at::Tensor variance = xf.pow(2).mean(-1, /*keepdim=*/true);
  xf = xf * at::rsqrt(variance + eps);
  return weight * xf.to(x.scalar_type());
}

// A 16-bit matrix product as ATen computes one (fp32 accumulation, one rounding to the dtype), written out
// because LibTorch 1.13 has no fp16 matrix product on the CPU.
at::Tensor matmul16(const at::Tensor& a, const at::Tensor& b) {
  return at::matmul(a.to(at::kFloat), b.to(at::kFloat)).to(a.scalar_type());
}

at::Tensor rotateHalf(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

bool decodeKernelsBuilt() {
#ifdef PARETO_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void addRmsNorm(const at::Tensor& residual, const at::Tensor& delta, const at::Tensor& weight, double eps,
                const at::Tensor& out) {
  Checks c("addRmsNorm");
  c.primary(residual, "residual", 2);
  const int64_t B = residual.size(0), H = residual.size(1);
  k::AddRmsNormProblem p;
  p.batch = Checks::rows(B);
  p.hidden = H;
  p.type = c.type();
  p.eps = float(eps);
  c.kernelCheck(k::checkAddRmsNorm(p));
  if (delta.defined()) c.tensor(delta, "delta", {B, H});
  c.tensor(weight, "weight", {H});
  c.tensor(out, "out", {B, H});

  if (residual.is_cuda()) {
#ifdef PARETO_WITH_CUDA
    const c10::cuda::CUDAGuard guard(residual.device());
    p.residual = residual.data_ptr();
    p.delta = delta.defined() ? delta.data_ptr() : nullptr;
    p.weight = weight.data_ptr();
    p.out = out.data_ptr();
    c.kernelCheck(k::runAddRmsNorm(p, currentStream()));
    return;
#else
    c.fail("this build has no CUDA kernels (configure with PARETO_CUDA=ON)");
#endif
  }
  at::Tensor r = residual;  // the caller's buffer, updated in place
  if (delta.defined()) r.add_(delta);
  out.copy_(rmsNorm(r, weight, eps));
}

namespace {

// The sizes the attention problems share (batch rows, query and key-value heads, cache slots, head dim, dtype).
template <class Problem>
void setShape(Problem& p, const Checks& c, int64_t B, int64_t Hq, int64_t Hkv, int64_t C, int64_t D) {
  p.batch = Checks::rows(B);
  p.qHeads = Hq;
  p.kvHeads = Hkv;
  p.headDim = D;
  p.capacity = C;
  p.type = c.type();
}

// The KV cache and the slot a problem reads, checked and pointed at: RopeCacheProblem's and
// DecodeAttentionProblem's.
template <class Problem>
void pointAtCache(Problem& p, const Checks& c, int64_t B, int64_t Hkv, int64_t C, int64_t D, const at::Tensor& keys,
                  const at::Tensor& values, const at::Tensor& slot) {
  c.tensor(keys, "keys", {B, Hkv, C, D});
  c.tensor(values, "values", {B, Hkv, C, D});
  c.slot(slot, "slot");
  p.keys = keys.data_ptr();
  p.values = values.data_ptr();
  p.slot = slot.data_ptr<int64_t>();
}

// The RoPE + cache write's problem with every tensor but q checked and pointed at (the CPU's pointers are unused):
// the part ropeAndCacheWrite and ropeAttention share.
k::RopeCacheProblem ropeCacheProblem(const Checks& c, int64_t B, int64_t Hq, int64_t Hkv, int64_t C, int64_t D,
                                     const at::Tensor& qkv, const at::Tensor& qNorm, const at::Tensor& kNorm,
                                     double eps, const at::Tensor& positions, const at::Tensor& invFreq,
                                     const at::Tensor& slot, const at::Tensor& keys, const at::Tensor& values) {
  k::RopeCacheProblem p;
  setShape(p, c, B, Hq, Hkv, C, D);
  p.eps = float(eps);
  c.kernelCheck(k::checkRopeCache(p));
  pointAtCache(p, c, B, Hkv, C, D, keys, values, slot);
  c.tensor(qkv, "qkv", {B, (Hq + 2 * Hkv) * D});
  if (qNorm.defined()) c.tensor(qNorm, "qNorm", {D});
  if (kNorm.defined()) c.tensor(kNorm, "kNorm", {D});
  c.tensor(positions, "positions", {B}, at::kLong);
  c.tensor(invFreq, "invFreq", {D / 2}, at::kFloat);
  p.qkv = qkv.data_ptr();
  p.qNorm = qNorm.defined() ? qNorm.data_ptr() : nullptr;
  p.kNorm = kNorm.defined() ? kNorm.data_ptr() : nullptr;
  p.positions = positions.data_ptr<int64_t>();
  p.invFreq = invFreq.data_ptr<float>();
  return p;
}

// The attention's problem with every tensor but q checked and pointed at: decodeAttention's and ropeAttention's.
k::DecodeAttentionProblem attentionProblem(const Checks& c, int64_t B, int64_t Hq, int64_t Hkv, int64_t C, int64_t D,
                                           const at::Tensor& keys, const at::Tensor& values, const at::Tensor& slot,
                                           const at::Tensor& validFrom, double scale, const at::Tensor& out) {
  k::DecodeAttentionProblem p;
  setShape(p, c, B, Hq, Hkv, C, D);
  p.scale = float(scale);
  c.kernelCheck(k::checkDecodeAttention(p));
  pointAtCache(p, c, B, Hkv, C, D, keys, values, slot);
  if (validFrom.defined()) c.tensor(validFrom, "validFrom", {B}, at::kLong);
  c.tensor(out, "out", {B, Hq * D});
  p.validFrom = validFrom.defined() ? validFrom.data_ptr<int64_t>() : nullptr;
  p.out = out.data_ptr();
  return p;
}

#ifdef PARETO_WITH_CUDA
// The split attention's scratch, from the caching allocator (the graph's pool when captured), released after the
// launch; undefined when the split needs none.
at::Tensor attentionWorkspace(const k::DecodeAttentionProblem& p, const k::DecodeAttentionSplit& split,
                              const at::TensorOptions& options) {
  const size_t bytes = k::decodeAttentionWorkspaceBytes(p, split);
  if (bytes == 0) return {};
  return at::empty({int64_t((bytes + sizeof(float) - 1) / sizeof(float))}, options.dtype(at::kFloat));
}
void* pointerOf(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
// One split over the cache for the fused kernel and the two-kernel path alike, sized by the fused kernel's
// residency: the ranges' partials are merged in the split's order, so the step's bits must not depend on which
// path ran (PARETO_DECODE_FUSED; DecodeOpsCuda.RopeAttentionEqualsTheTwoKernelsBitForBit). The unfused kernel holds
// one block more a multiprocessor, so its own residency would cut the cache into other ranges.
k::DecodeAttentionSplit stepAttentionSplit(const k::DecodeAttentionProblem& p) {
  return k::decodeRopeAttentionSplit(p, at::cuda::getCurrentDeviceProperties()->multiProcessorCount,
                                     k::decodeAttentionResidentBlocks(p, /*fused=*/true));
}
#endif

}  // namespace

void ropeAndCacheWrite(const at::Tensor& qkv, const at::Tensor& qNorm, const at::Tensor& kNorm, double eps,
                       const at::Tensor& positions, const at::Tensor& invFreq, const at::Tensor& slot,
                       const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values) {
  Checks c("ropeAndCacheWrite");
  c.primary(qkv, "qkv", 2);
  if (!q.defined() || q.dim() != 3) c.fail("q must be [batch, query heads, head dim]");
  if (!keys.defined() || keys.dim() != 4) c.fail("keys must be [batch, key-value heads, capacity, head dim]");
  const int64_t B = qkv.size(0), Hq = q.size(1), D = q.size(2), Hkv = keys.size(1), C = keys.size(2);
  k::RopeCacheProblem p =
      ropeCacheProblem(c, B, Hq, Hkv, C, D, qkv, qNorm, kNorm, eps, positions, invFreq, slot, keys, values);
  c.tensor(q, "q", {B, Hq, D});

  if (qkv.is_cuda()) {
#ifdef PARETO_WITH_CUDA
    const c10::cuda::CUDAGuard guard(qkv.device());
    p.q = q.data_ptr();
    c.kernelCheck(k::runRopeCache(p, currentStream()));
    return;
#else
    c.fail("this build has no CUDA kernels (configure with PARETO_CUDA=ON)");
#endif
  }
  const int64_t slotIndex = slot.item<int64_t>();
  if (slotIndex < 0 || slotIndex >= C)
    c.fail("slot " + std::to_string(slotIndex) + " is outside the cache's " + std::to_string(C) + " slots");
  const at::Tensor heads = qkv.view({B, Hq + 2 * Hkv, D});
  at::Tensor qh = heads.narrow(1, 0, Hq);
  at::Tensor kh = heads.narrow(1, Hq, Hkv);
  const at::Tensor vh = heads.narrow(1, Hq + Hkv, Hkv);
  if (qNorm.defined()) qh = rmsNorm(qh, qNorm, eps);
  if (kNorm.defined()) kh = rmsNorm(kh, kNorm, eps);
  // As transformers' rotary embedding: angles in fp32 from the integer positions, cos and sin in the dtype.
  const at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) * invFreq;  // [B, D/2]
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  const at::Tensor cos = emb.cos().to(qkv.scalar_type()).unsqueeze(1);      // [B, 1, D]
  const at::Tensor sin = emb.sin().to(qkv.scalar_type()).unsqueeze(1);
  q.copy_(qh * cos + rotateHalf(qh) * sin);
  keys.select(2, slotIndex).copy_(kh * cos + rotateHalf(kh) * sin);
  values.select(2, slotIndex).copy_(vh);
}

void decodeAttention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values, const at::Tensor& slot,
                     const at::Tensor& validFrom, double scale, const at::Tensor& out) {
  Checks c("decodeAttention");
  c.primary(q, "q", 3);
  if (!keys.defined() || keys.dim() != 4) c.fail("keys must be [batch, key-value heads, capacity, head dim]");
  const int64_t B = q.size(0), Hq = q.size(1), D = q.size(2), Hkv = keys.size(1), C = keys.size(2);
  k::DecodeAttentionProblem p = attentionProblem(c, B, Hq, Hkv, C, D, keys, values, slot, validFrom, scale, out);

  if (q.is_cuda()) {
#ifdef PARETO_WITH_CUDA
    const c10::cuda::CUDAGuard guard(q.device());
    p.q = q.data_ptr();
    const k::DecodeAttentionSplit split = stepAttentionSplit(p);
    const at::Tensor workspace = attentionWorkspace(p, split, q.options());
    c.kernelCheck(k::runDecodeAttention(p, split, pointerOf(workspace), currentStream()));
    return;
#else
    c.fail("this build has no CUDA kernels (configure with PARETO_CUDA=ON)");
#endif
  }
  const int64_t last = slot.item<int64_t>();
  if (last < 0 || last >= C)
    c.fail("slot " + std::to_string(last) + " is outside the cache's " + std::to_string(C) + " slots");
  const int64_t G = Hq / Hkv;
  for (int64_t b = 0; b < B; ++b) {
    int64_t first = validFrom.defined() ? validFrom[b].item<int64_t>() : 0;
    first = first < 0 ? 0 : first > last ? last : first;  // as the kernel: at least the row's own slot
    // Only the attended slots, rather than transformers' −inf mask over the whole cache: the masked slots add
    // exact zeros there, so the result is the same, but unused slots of a static cache may hold NaN (0·NaN).
    const at::Tensor k = keys[b].narrow(1, first, last - first + 1);   // [Hkv, S, D]
    const at::Tensor v = values[b].narrow(1, first, last - first + 1);
    const at::Tensor qg = q[b].view({Hkv, G, D});
    const at::Tensor scores = matmul16(qg, k.transpose(-1, -2)) * scale;  // [Hkv, G, S], in the dtype
    const at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
    out[b].copy_(matmul16(probs, v).reshape({Hq * D}));
  }
}

int64_t decodeAttentionCounters(int64_t batch, int64_t qHeads, int64_t kvHeads) {
  k::DecodeAttentionProblem p;
  p.batch = int(batch);
  p.qHeads = qHeads;
  p.kvHeads = kvHeads;
  return k::decodeRopeAttentionCounters(p);
}

void ropeAttention(const at::Tensor& qkv, const at::Tensor& qNorm, const at::Tensor& kNorm, double eps,
                   const at::Tensor& positions, const at::Tensor& invFreq, const at::Tensor& slot,
                   const at::Tensor& keys, const at::Tensor& values, const at::Tensor& validFrom, double scale,
                   const at::Tensor& counters, const at::Tensor& out) {
  Checks c("ropeAttention");
  c.primary(qkv, "qkv", 2);
  if (!keys.defined() || keys.dim() != 4) c.fail("keys must be [batch, key-value heads, capacity, head dim]");
  if (!out.defined() || out.dim() != 2) c.fail("out must be [batch, query heads · head dim]");
  const int64_t B = qkv.size(0), Hkv = keys.size(1), C = keys.size(2), D = keys.size(3);
  if (D < 1 || out.size(1) % D != 0) c.fail("out's width " + std::to_string(out.size(1)) + " is not a whole number of heads of " + std::to_string(D));
  const int64_t Hq = out.size(1) / D;
  c.tensor(counters, "counters", {decodeAttentionCounters(B, Hq, Hkv)}, at::kInt);
  if (!qkv.is_cuda()) {  // the reference: the two ops
    at::Tensor q = at::empty({B, Hq, D}, qkv.options());
    ropeAndCacheWrite(qkv, qNorm, kNorm, eps, positions, invFreq, slot, q, keys, values);
    decodeAttention(q, keys, values, slot, validFrom, scale, out);
    return;
  }
  k::RopeAttentionProblem f;
  f.rope = ropeCacheProblem(c, B, Hq, Hkv, C, D, qkv, qNorm, kNorm, eps, positions, invFreq, slot, keys, values);
  f.attention = attentionProblem(c, B, Hq, Hkv, C, D, keys, values, slot, validFrom, scale, out);
#ifdef PARETO_WITH_CUDA
  const c10::cuda::CUDAGuard guard(qkv.device());
  f.counters = reinterpret_cast<unsigned*>(counters.data_ptr<int32_t>());
  const k::DecodeAttentionSplit split = stepAttentionSplit(f.attention);
  const at::Tensor workspace = attentionWorkspace(f.attention, split, qkv.options());
  c.kernelCheck(k::runDecodeRopeAttention(f, split, pointerOf(workspace), currentStream()));
#else
  c.fail("this build has no CUDA kernels (configure with PARETO_CUDA=ON)");
#endif
}

void greedyNextToken(const at::Tensor& logits, const at::Tensor& next, const at::Tensor& ids,
                     const at::Tensor& positions, const at::Tensor& slot, const at::Tensor& generated,
                     const at::Tensor& counter) {
  Checks c("greedyNextToken");
  c.primary(logits, "logits", 2);
  const int64_t B = logits.size(0), V = logits.size(1);
  c.tensor(next, "next", {B}, at::kLong);
  c.tensor(ids, "ids", {B}, at::kLong);
  c.tensor(positions, "positions", {B}, at::kLong);
  c.slot(slot, "slot");
  if (!generated.defined() || generated.dim() != 2) c.fail("generated must be [batch, columns]");
  c.tensor(generated, "generated", {B, generated.size(1)}, at::kLong);
  c.tensor(counter, "counter", {1}, at::kInt);
  k::NextTokenProblem p;
  p.batch = Checks::rows(B);
  p.vocab = V;
  p.type = c.type();
  p.generatedColumns = generated.size(1);
  c.kernelCheck(k::checkNextToken(p));
  if (logits.is_cuda()) {
#ifdef PARETO_WITH_CUDA
    const c10::cuda::CUDAGuard guard(logits.device());
    p.logits = logits.data_ptr();
    p.next = next.data_ptr<int64_t>();
    p.ids = ids.data_ptr<int64_t>();
    p.positions = positions.data_ptr<int64_t>();
    p.slot = slot.data_ptr<int64_t>();
    p.generated = generated.data_ptr<int64_t>();
    p.counter = reinterpret_cast<unsigned*>(counter.data_ptr<int32_t>());
    c.kernelCheck(k::runNextToken(p, currentStream()));
    return;
#else
    c.fail("this build has no CUDA kernels (configure with PARETO_CUDA=ON)");
#endif
  }
  at::Tensor picked = next;  // the caller's buffer, written in place
  at::argmax_out(picked, logits.to(at::kFloat), -1);
  positions.add_(1);
  slot.add_(1);
  ids.copy_(next);
  const int64_t at = slot.item<int64_t>();
  if (at >= 0 && at < generated.size(1)) generated.select(1, at).copy_(next);
}

void siluMul(const at::Tensor& gateUp, const at::Tensor& out) {
  Checks c("siluMul");
  c.primary(gateUp, "gateUp", 2);
  if (!out.defined() || out.dim() != 2) c.fail("out must be [batch, width]");
  const int64_t B = gateUp.size(0), F = out.size(1);
  c.tensor(gateUp, "gateUp", {B, 2 * F});
  c.tensor(out, "out", {B, F});
  k::SiluMulProblem p;
  p.batch = Checks::rows(B);
  p.width = F;
  p.type = c.type();
  c.kernelCheck(k::checkSiluMul(p));

  if (gateUp.is_cuda()) {
#ifdef PARETO_WITH_CUDA
    const c10::cuda::CUDAGuard guard(gateUp.device());
    p.gateUp = gateUp.data_ptr();
    p.out = out.data_ptr();
    c.kernelCheck(k::runSiluMul(p, currentStream()));
    return;
#else
    c.fail("this build has no CUDA kernels (configure with PARETO_CUDA=ON)");
#endif
  }
  // silu of a 16-bit tensor is computed in fp32 and rounded (done here by hand: LibTorch 1.13 has no fp16 silu
  // on the CPU), then multiplied in the dtype.
  const at::Tensor gate = gateUp.narrow(1, 0, F), up = gateUp.narrow(1, F, F);
  out.copy_(at::silu(gate.to(at::kFloat)).to(gate.scalar_type()) * up);
}

}  // namespace pareto
