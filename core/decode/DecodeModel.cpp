#include "decode/DecodeModel.h"

#include <ATen/ATen.h>

#include <map>

#include "model/LlamaModel.h"
#include "runtime/SyntheticWeights.h"
#include "util/Error.h"

namespace pareto {
namespace {

int64_t tensorBytes(const at::Tensor& t) { return t.defined() ? t.numel() * int64_t(t.element_size()) : 0; }

// A Linear of the loaded model in the runtime's form: its packed weight, or its dense weight and bias.
PackedLinear runtimeForm(const Linear& l) {
  if (l.packed() != nullptr) return *l.packed();
  return PackedLinear::dense(l.weight(), l.bias());
}

void requireHalfDtype(const RuntimeOptions& opts) {
  if (opts.dtype != at::kHalf && opts.dtype != at::kBFloat16)
    throw InputError("the decode runtime runs float16 or bfloat16 (its kernels' activations), not " +
                     dtypeLabel(opts.dtype) + ": pass --dtype float16 or bfloat16");
}

}  // namespace

int64_t FusedLinear::rows() const {
  int64_t r = 0;
  for (const auto& p : parts) r += p.rows();
  return r;
}
int64_t FusedLinear::cols() const { return parts.empty() ? 0 : parts.front().cols(); }
int64_t FusedLinear::weightBytes() const {
  int64_t b = 0;
  for (const auto& p : parts) b += p.weightBytes();
  return b;
}

void FusedLinear::forward(const at::Tensor& x, const at::Tensor& out, const std::string& what) const {
  if (parts.size() == 1) return parts.front().forward(x, out, what);
  // Each part into its own contiguous buffer, then one copy into the column slices of `out`.
  std::vector<at::Tensor> pieces;
  for (const auto& p : parts) pieces.push_back(p.forward(x, what));
  at::cat_out(const_cast<at::Tensor&>(out), pieces, 1);
}

void FusedLinear::forward(const at::Tensor& x, const at::Tensor& out, const std::string& what,
                          const GemvFusion& fusion) const {
  if (parts.size() == 1) return parts.front().forward(x, out, what, fusion);
  forwardAroundOps(x, out, rows(), cols(), fusion, what,
                   [&](const at::Tensor& in, const at::Tensor& y) { forward(in, y, what); });
}

FusedLinear FusedLinear::fuse(const std::vector<const PackedLinear*>& parts) {
  FusedLinear f;
  try {
    f.parts.push_back(concatRows(parts));
  } catch (const InputError&) {
    for (const PackedLinear* p : parts) f.parts.push_back(*p);   // mixed formats: run them one by one
  }
  return f;
}

DecodeModel DecodeModel::fromModel(const LlamaModel& model) {
  DecodeModel d;
  d.config_ = model.config();
  d.opts_ = model.options();
  requireHalfDtype(d.opts_);
  d.embedding_ = model.embedding();
  d.finalNorm_ = model.finalNorm();
  d.invFreq_ = model.invFreq();
  d.lmHead_ = runtimeForm(model.outputHead());
  d.notes_ = model.runtimeNotes();
  for (int64_t i = 0; i < model.numLayers(); ++i) {
    const auto linears = model.layerLinears(i);   // q, k, v, o, gate, up, down
    std::vector<PackedLinear> forms;
    for (const auto& [group, linear] : linears) forms.push_back(runtimeForm(*linear));
    DecodeLayer L;
    const LlamaModel::LayerNorms norms = model.layerNorms(i);
    L.inputNorm = norms.input;
    L.postAttentionNorm = norms.postAttention;
    L.qNorm = norms.q;
    L.kNorm = norms.k;
    L.qkv = FusedLinear::fuse({&forms[0], &forms[1], &forms[2]});
    L.o = FusedLinear::fuse({&forms[3]});
    L.gateUp = FusedLinear::fuse({&forms[4], &forms[5]});
    L.down = FusedLinear::fuse({&forms[6]});
    d.layers_.push_back(std::move(L));
  }
  return d;
}

DecodeModel DecodeModel::synthetic(const ModelConfig& config, const SyntheticOptions& s, const RuntimeOptions& opts,
                                   const ProgressCallback& progress) {
  requireHalfDtype(opts);
  checkPackedFormatName(s.format);
  checkPackedFormatName(s.headFormat);
  DecodeModel d;
  d.config_ = config;
  if (s.layers > 0) d.config_.numLayers = s.layers;
  d.opts_ = opts;
  const ModelConfig& c = d.config_;
  const at::Device dev = opts.device;
  const at::ScalarType dt = opts.dtype;
  const int64_t H = c.hiddenSize, D = c.headDim, F = c.intermediateSize;
  const int64_t qkvRows = (c.numHeads + 2 * c.numKvHeads) * D;
  uint64_t seed = s.seed * 1000003 + 17;
  auto ones = [&](int64_t n) { return at::ones({n}, at::TensorOptions().device(dev).dtype(dt)); };
  auto linear = [&](int64_t rows, int64_t cols, bool bias) {
    FusedLinear f;
    f.parts.push_back(randomPackedLinear(s.format, rows, cols, dt, dev, seed++, s.spqrOutlierFraction));
    if (bias) {
      const PackedLinear& p = f.parts.front();
      f.parts.front() = PackedLinear(p.weight(), p.format(), p.rows(), p.cols(),
                                     randomDenseWeight(1, rows, dt, dev, seed++).view({rows}));
    }
    return f;
  };
  d.embedding_ = randomDenseWeight(c.vocabSize, H, dt, dev, seed++);
  for (int64_t i = 0; i < c.numLayers; ++i) {
    if (progress)
      progress({"synthetic model", double(i) / double(c.numLayers),
                "layer " + std::to_string(i + 1) + "/" + std::to_string(c.numLayers) + " (" + s.format + ")"});
    DecodeLayer L;
    L.inputNorm = ones(H);
    L.postAttentionNorm = ones(H);
    if (c.qkNorm) {
      L.qNorm = ones(D);
      L.kNorm = ones(D);
    }
    L.qkv = linear(qkvRows, H, c.attentionBias);
    L.o = linear(H, c.numHeads * D, c.oProjBias);
    L.gateUp = linear(2 * F, H, c.mlpBias);
    L.down = linear(H, F, c.mlpBias);
    d.layers_.push_back(std::move(L));
  }
  d.finalNorm_ = ones(H);
  if (s.headFormat != "dense")
    d.lmHead_ = randomPackedLinear(s.headFormat, c.vocabSize, H, dt, dev, seed++, s.spqrOutlierFraction);
  else
    d.lmHead_ = c.tieWordEmbeddings ? PackedLinear::dense(d.embedding_)
                                    : PackedLinear::dense(randomDenseWeight(c.vocabSize, H, dt, dev, seed++));
  d.invFreq_ = ropeInverseFrequencies(c, dev);
  if (progress) progress({"synthetic model", 1.0, "built"});
  return d;
}

int64_t DecodeModel::weightBytesPerStep(int64_t batch) const {
  int64_t bytes = lmHead_.weightBytes() + tensorBytes(finalNorm_) +
                  batch * config_.hiddenSize * int64_t(embedding_.element_size());
  for (const auto& L : layers_) {
    bytes += L.qkv.weightBytes() + L.o.weightBytes() + L.gateUp.weightBytes() + L.down.weightBytes();
    bytes += tensorBytes(L.inputNorm) + tensorBytes(L.postAttentionNorm) + tensorBytes(L.qNorm) + tensorBytes(L.kNorm);
  }
  return bytes;
}

std::string DecodeModel::formatSummary() const {
  std::map<std::string, int> counts;
  for (const auto& L : layers_)
    for (const FusedLinear* f : {&L.qkv, &L.o, &L.gateUp, &L.down})
      for (const auto& p : f->parts) ++counts[p.format()];
  if (counts.size() == 1) return counts.begin()->first;
  std::string out;
  for (const auto& [format, n] : counts) out += (out.empty() ? "" : ", ") + format + " ×" + std::to_string(n);
  return out;
}

}  // namespace pareto
