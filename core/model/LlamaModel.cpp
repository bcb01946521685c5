#include "model/LlamaModel.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "checkpoint/Safetensors.h"
#include "formats/CompressionManifest.h"
#include "formats/PackedModuleIO.h"
#include "model/TensorIO.h"
#include "runtime/PackedLinear.h"
#include "util/Error.h"

namespace pareto {
namespace {

std::string shapeText(at::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// A checkpoint's tensors as formats/PackedModuleIO.h reads a module's: each one read is checked to be finite and
// counted as used.
class CheckpointTensors : public StoredTensors {
 public:
  CheckpointTensors(const Checkpoint& ckpt, std::set<std::string>& used) : ckpt_(ckpt), used_(used) {}

  std::optional<Entry> find(const std::string& name) const override {
    const TensorEntry* e = ckpt_.find(name);
    if (e == nullptr) return std::nullopt;
    return Entry{scalarType(e->dtype), e->shape, e->file};
  }
  at::Tensor read(const std::string& name) const override {
    const TensorEntry& e = ckpt_.at(name);
    used_.insert(e.name);
    return readChecked(e);
  }
  std::string location() const override { return ckpt_.directory(); }

  // Weights, scales and outlier values must be finite: a NaN would otherwise run as token 0 forever, print
  // "nan" as a perplexity, or pass into an export. Checked where each tensor is read, so every command that
  // opens the folder refuses it alike.
  static void requireFinite(const at::Tensor& t, const std::string& file, const std::string& name) {
    if (!at::isFloatingType(t.scalar_type()) || at::isfinite(t).all().item<bool>()) return;
    const int64_t bad = (~at::isfinite(t)).sum().item<int64_t>();
    throw InputError(fileMessage(file, "tensor " + name + " holds " + std::to_string(bad) + " NaN or infinite " +
                                           "value" + (bad == 1 ? "" : "s") + " of " + std::to_string(t.numel()) +
                                           "; the checkpoint is corrupt (or was saved after training diverged)"));
  }

  at::Tensor readChecked(const TensorEntry& e) const {
    at::Tensor t = readTensor(e);
    ckpt_.releasePages(e);   // copied out: the mapping need not stay resident (a streamed model reads it layer by layer)
    requireFinite(t, e.file, e.name);
    return t;
  }

 private:
  const Checkpoint& ckpt_;
  std::set<std::string>& used_;
};

}  // namespace

namespace model_detail {

// Reads the tensors the model needs, checking each shape against what config.json implies, and remembers
// which ones were used so that leftovers (a different architecture's tensors) can be refused. The modules
// pareto.json lists are read in their stored format through formats/PackedModuleIO.h.
// With headersOnly nothing is read: shapes and dtypes are checked from the headers and every tensor comes back
// undefined (a streamed model checks the whole checkpoint up front and reads each layer when it is used).
class WeightLoader {
 public:
  WeightLoader(const Checkpoint& ckpt, const RuntimeOptions& opts, const CompressionManifest* manifest,
               bool headersOnly = false, const CancelToken* cancel = nullptr)
      : ckpt_(ckpt), opts_(opts), manifest_(manifest), stored_(ckpt, used_), headersOnly_(headersOnly),
        cancel_(cancel) {}

  at::Tensor load(const std::string& name, std::vector<int64_t> expected) {
    if (cancel_ != nullptr && cancel_->isCancelled()) throw Cancelled();
    const std::string suffix = ".weight";
    if (manifest_ != nullptr && name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string module = name.substr(0, name.size() - suffix.size());
      if (const ModuleFormat* f = manifest_->find(module)) {
        if (headersOnly_) {
          // The packed tensors are checked when the layer is read; here they only count as used.
          for (const TensorEntry* e : ckpt_.tensors())
            if (e->name.rfind(name, 0) == 0) used_.insert(e->name);
          return {};
        }
        at::Tensor t = unpackModule(module, *f, expected).to(opts_.device, opts_.dtype).contiguous();
        // A dense weight is checked after the conversion, as any checkpoint tensor is (fp16 can overflow).
        if (f->weight.isDense()) CheckpointTensors::requireFinite(t, ckpt_.at(name).file, name);
        return t;
      }
    }
    const TensorEntry* e = ckpt_.find(name);
    if (e == nullptr)
      throw InputError(fileMessage(ckpt_.directory(), "tensor " + name + " is missing from the checkpoint"));
    if (e->shape != expected)
      throw InputError(fileMessage(e->file, "tensor " + name + " has shape " + shapeText(e->shape) +
                                                ", but config.json implies " + shapeText(expected)));
    used_.insert(name);
    if (!isFloating(e->dtype))
      throw InputError(fileMessage(e->file, "tensor " + name + " has integer dtype " + dtypeName(e->dtype) +
                                                "; a weight must be F32, F16 or BF16"));
    if (headersOnly_) return {};
    // Copied out of the mapping (readTensor's copy is the one place a file truncated under us is caught), moved to
    // the device, then converted there: a copy that also converts would convert on the host into a pageable
    // temporary. .to() returns the tensor itself when device or dtype already match.
    at::Tensor t = readTensorFor(*e, opts_.device);
    ckpt_.releasePages(*e);
    t = t.to(opts_.device).to(opts_.dtype).contiguous();
    CheckpointTensors::requireFinite(t, e->file, name);
    return t;
  }

  // A linear's weight: packed for the runtime's kernels when asked for and the module's format has one,
  // dense otherwise.
  Linear loadLinear(const std::string& module, int64_t out, int64_t in, bool bias) {
    if (cancel_ != nullptr && cancel_->isCancelled()) throw Cancelled();
    at::Tensor b = loadOptional(module + ".bias", {out}, bias);
    if (headersOnly_) {
      load(module + ".weight", {out, in});
      return {};
    }
    const ModuleFormat* f = manifest_ != nullptr ? manifest_->find(module) : nullptr;
    if (opts_.packedWeights && f != nullptr && !f->weight.isDense()) {
      const bool halfDtype = opts_.dtype == at::kHalf || opts_.dtype == at::kBFloat16;
      std::string why = halfDtype ? "" : "the packed kernels take float16/bfloat16 activations";
      if (halfDtype) {
        try {
          if (std::optional<PackedLinear> p = packModule(module, *f, {out, in}, b)) return Linear(module, std::move(*p));
          why = "no kernel for this format";
        } catch (const InputError& err) {
          why = err.what();
        }
      }
      notes_.push_back(module + " (" + f->format + ") runs dense: " + why);
    }
    return Linear(module, load(module + ".weight", {out, in}), b);
  }

  // The stored parts of a module, checked against the shape config.json implies (not yet unpacked, on the CPU).
  PackedModule readModule(const std::string& module, const ModuleFormat& f, const std::vector<int64_t>& expected) {
    PackedModuleRecord record;
    record.actOrder = f.actOrder;
    record.spqrScaleGroup = f.scaleGroup;
    return readPackedModule(stored_, module, f.weight, expected.at(0), expected.at(1), record);
  }

  // Modules are unpacked to dense here unless the runtime keeps them packed (packModule).
  at::Tensor unpackModule(const std::string& module, const ModuleFormat& f, const std::vector<int64_t>& expected) {
    PackedModule p = readModule(module, f, expected);
    // On a GPU the masks and int grids are unpacked there: the same LibTorch expressions, so the same values, and
    // an 8B's worth of them takes the host about a minute but the device well under a second. SpQR's outliers
    // and GGUF's blocks are walked on the host.
    if (opts_.device.is_cuda() && !p.spqr && !f.weight.isGguf()) {
      for (at::Tensor* t : {&p.dense, &p.columnOrder}) *t = t->defined() ? t->to(opts_.device) : *t;
      if (p.bitmask) {
        p.bitmask->masks = p.bitmask->masks.to(opts_.device);
        if (p.bitmask->values.defined()) p.bitmask->values = p.bitmask->values.to(opts_.device);
      }
      if (p.quant)
        for (at::Tensor* t : {&p.quant->codes, &p.quant->scales, &p.quant->zeros}) *t = t->defined() ? t->to(opts_.device) : *t;
    }
    try {
      return p.unpack();
    } catch (const InputError& err) {
      throw InputError(fileMessage(ckpt_.directory(), module + " (" + f.format + "): " + err.what()));
    }
  }

  // The kernel form of a packed module on the device, or nullopt when no kernel reads its format
  // (bitmask + SpQR, gguf-*). InputError when the kernel cannot take this instance (e.g. an N:M it does not unroll).
  std::optional<PackedLinear> packModule(const std::string& module, const ModuleFormat& f,
                                         const std::vector<int64_t>& expected, const at::Tensor& bias) {
    if (f.weight.values == WeightFormat::Values::Spqr && f.weight.isBitmask()) return std::nullopt;
    if (f.weight.isGguf()) return std::nullopt;   // dequantized at load, as llama.cpp's decoder defines the values
    PackedModule s = readModule(module, f, expected);
    const at::Device dev = opts_.device;
    auto onDevice = [&](at::Tensor& t) {
      if (t.defined()) t = t.to(dev);
    };
    const int64_t rows = expected[0], cols = expected[1];
    // The kernel's name (formats/WeightFormat.h), as bench tables and summaries show it.
    const std::string name = f.weight.kernel().empty() ? f.format : f.weight.kernel();
    PackedLinear::Weight w;
    if (s.spqr) {
      for (at::Tensor* t : {&s.spqr->codes, &s.spqr->scaleCodes, &s.spqr->zeroCodes, &s.spqr->scaleBase,
                            &s.spqr->scaleStep, &s.spqr->outlierRowOffsets, &s.spqr->outlierColumns,
                            &s.spqr->outlierValues})
        onDevice(*t);
      w = SpqrKernelWeight::fromPacked(*s.spqr);
    } else if (s.quant) {
      for (at::Tensor* t : {&s.quant->codes, &s.quant->scales, &s.quant->zeros}) onDevice(*t);
      if (s.bitmask) {
        if (s.quant->bits != 4) return std::nullopt;
        w = BitmaskInt4KernelWeight::fromPacked(s.bitmask->masks.to(dev), f.weight.n, f.weight.m, *s.quant);
      } else {
        w = QuantGroupKernelWeight::fromPacked(*s.quant);
      }
    } else {
      s.bitmask->masks = s.bitmask->masks.to(dev);
      s.bitmask->values = s.bitmask->values.to(dev, opts_.dtype);
      w = BitmaskNMKernelWeight::fromPacked(*s.bitmask);
    }
    return PackedLinear(std::move(w), name, rows, cols, bias);
  }

  at::Tensor loadOptional(const std::string& name, std::vector<int64_t> expected, bool wanted) {
    if (!wanted) return {};
    return load(name, std::move(expected));
  }

  void refuseUnused(const std::string& architecture, bool tied) const {
    for (const TensorEntry* e : ckpt_.tensors()) {
      if (used_.count(e->name) != 0) continue;
      // Older Llama exports carry the RoPE frequencies as a buffer; HF ignores them, so do we.
      if (e->name.find("rotary_emb.inv_freq") != std::string::npos) continue;
      if (tied && e->name == "lm_head.weight") continue;   // HF ties it to the embedding anyway
      throw InputError(fileMessage(e->file, "tensor " + e->name + " is not part of a " + architecture +
                                                " model as config.json describes it"));
    }
  }

 private:
  const Checkpoint& ckpt_;
  const RuntimeOptions& opts_;
  const CompressionManifest* manifest_;
  std::set<std::string> used_;
  CheckpointTensors stored_;
  bool headersOnly_ = false;
  const CancelToken* cancel_ = nullptr;

 public:
  std::vector<std::string> notes_;
};

}  // namespace model_detail

using model_detail::WeightLoader;

namespace {

at::Tensor rotateHalf(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

LlamaModel::LlamaModel(const ModelConfig& config, const Checkpoint& ckpt, const RuntimeOptions& opts,
                       const CompressionManifest* manifest, const ProgressCallback& progress,
                       const CancelToken* cancel)
    : config_(config), opts_(opts) {
  const auto& c = config_;
  WeightLoader w(ckpt, opts_, manifest, /*headersOnly=*/false, cancel);
  // The embedding and the head count as one block each.
  const double parts = double(c.numLayers + 2);
  auto report = [&](double done, const std::string& what) {
    if (progress) progress({"load", done / parts, ckpt.directory() + ": " + what});
  };

  report(0, "embedding");
  embedding_ = w.load("model.embed_tokens.weight", {c.vocabSize, c.hiddenSize});
  layers_.reserve(c.numLayers);
  for (int64_t i = 0; i < c.numLayers; ++i) {
    report(double(i + 1), "layer " + std::to_string(i + 1) + "/" + std::to_string(c.numLayers));
    layers_.push_back(readLayer(w, i));
  }
  report(double(c.numLayers + 1), "output head");
  finalNorm_ = w.load("model.norm.weight", {c.hiddenSize});
  lmHead_ = readHead(w);
  report(parts, "loaded");
  w.refuseUnused(c.architecture, c.tieWordEmbeddings);
  runtimeNotes_ = std::move(w.notes_);

  invFreq_ = ropeInverseFrequencies(c, opts_.device);
}

LlamaModel::LlamaModel(const ModelConfig& config, std::shared_ptr<const Checkpoint> ckpt, const RuntimeOptions& opts,
                       const CompressionManifest* manifest)
    : config_(config), opts_(opts), source_(std::move(ckpt)) {
  if (manifest != nullptr) sourceManifest_ = std::make_shared<const CompressionManifest>(*manifest);
  // Everything is checked now, from the headers, so that a bad checkpoint fails before hours of work.
  const auto& c = config_;
  WeightLoader w(*source_, opts_, manifest, /*headersOnly=*/true);
  w.load("model.embed_tokens.weight", {c.vocabSize, c.hiddenSize});
  for (int64_t i = 0; i < c.numLayers; ++i) readLayer(w, i);
  w.load("model.norm.weight", {c.hiddenSize});
  readHead(w);
  w.refuseUnused(c.architecture, c.tieWordEmbeddings);
  WeightLoader norms(*source_, opts_, manifest);
  finalNorm_ = norms.load("model.norm.weight", {c.hiddenSize});
  layers_.resize(static_cast<size_t>(c.numLayers));
  invFreq_ = ropeInverseFrequencies(c, opts_.device);
}

LlamaModel::Layer LlamaModel::readLayer(WeightLoader& w, int64_t i) const {
  const auto& c = config_;
  const int64_t H = c.hiddenSize, D = c.headDim, F = c.intermediateSize;
  const int64_t qOut = c.numHeads * D, kvOut = c.numKvHeads * D;
  const std::string p = "model.layers." + std::to_string(i) + ".";
  auto linear = [&](const std::string& name, int64_t out, int64_t in, bool bias) {
    return w.loadLinear(p + name, out, in, bias);
  };
  Layer L;
  L.inputNorm = w.load(p + "input_layernorm.weight", {H});
  L.postAttentionNorm = w.load(p + "post_attention_layernorm.weight", {H});
  L.q = linear("self_attn.q_proj", qOut, H, c.attentionBias);
  L.k = linear("self_attn.k_proj", kvOut, H, c.attentionBias);
  L.v = linear("self_attn.v_proj", kvOut, H, c.attentionBias);
  L.o = linear("self_attn.o_proj", H, qOut, c.oProjBias);
  L.qNorm = w.loadOptional(p + "self_attn.q_norm.weight", {D}, c.qkNorm);
  L.kNorm = w.loadOptional(p + "self_attn.k_norm.weight", {D}, c.qkNorm);
  L.gate = linear("mlp.gate_proj", F, H, c.mlpBias);
  L.up = linear("mlp.up_proj", F, H, c.mlpBias);
  L.down = linear("mlp.down_proj", H, F, c.mlpBias);
  return L;
}

Linear LlamaModel::readHead(WeightLoader& w) const {
  const auto& c = config_;
  if (c.tieWordEmbeddings)
    return Linear("lm_head", embedding_.defined() ? embedding_ : w.load("model.embed_tokens.weight", {c.vocabSize, c.hiddenSize}), {});
  // A head compress quantized (its own tensor, so never tied) runs packed where the block linears do.
  return w.loadLinear("lm_head", c.vocabSize, c.hiddenSize, false);
}

void LlamaModel::loadLayer(int64_t i) const {
  if (!streamed()) return;
  if (i < 0 || i >= numLayers()) throw Error("loadLayer: no layer " + std::to_string(i));
  if (layerLoaded(i)) return;
  WeightLoader w(*source_, opts_, sourceManifest_.get());
  layers_[static_cast<size_t>(i)] = readLayer(w, i);
  for (std::string& note : w.notes_) runtimeNotes_.push_back(std::move(note));
}

void LlamaModel::releaseLayer(int64_t i) const {
  if (streamed()) layers_.at(static_cast<size_t>(i)) = Layer{};
}

bool LlamaModel::layerLoaded(int64_t i) const {
  const Layer& L = layers_.at(static_cast<size_t>(i));
  return L.inputNorm.defined();
}

void LlamaModel::loadHead() const {
  if (!streamed() || lmHeadLoaded()) return;
  WeightLoader w(*source_, opts_, sourceManifest_.get());
  lmHead_ = readHead(w);
}

void LlamaModel::releaseHead() const {
  if (streamed()) lmHead_ = Linear();
}

bool LlamaModel::lmHeadLoaded() const { return lmHead_.weight().defined() || lmHead_.packed() != nullptr; }

// inv_freq exactly as transformers computes it (float32 pow of an int64 arange), so RoPE angles match.
at::Tensor ropeInverseFrequencies(const ModelConfig& c, at::Device device) {
  const int64_t D = c.headDim;
  auto f32 = at::TensorOptions().dtype(at::kFloat);
  at::Tensor exponents = at::arange(0, D, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) / double(D);
  at::Tensor invFreq = 1.0 / at::pow(at::scalar_tensor(c.ropeTheta, f32), exponents);
  if (c.llama3Rope) {
    const auto& s = *c.llama3Rope;
    const double lowWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
    const double highWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
    at::Tensor wavelen = 2 * M_PI / invFreq;
    at::Tensor scaled = at::where(wavelen > lowWavelen, invFreq / s.factor, invFreq);
    at::Tensor smooth = (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) /
                        (s.highFreqFactor - s.lowFreqFactor);
    at::Tensor smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
    at::Tensor medium = at::logical_not(wavelen < highWavelen).logical_and(at::logical_not(wavelen > lowWavelen));
    invFreq = at::where(medium, smoothed, scaled);
  }
  return invFreq.to(device);
}

KVCache LlamaModel::makeCache(int64_t batch, int64_t capacity) const {
  return KVCache(config_.numLayers, batch, config_.numKvHeads, capacity, config_.headDim,
                 at::TensorOptions().device(opts_.device).dtype(opts_.dtype));
}

// RMSNorm in float32 then back to the activation dtype before the weight, as transformers does; the order
// matters for bf16 results.
at::Tensor LlamaModel::rmsNorm(const at::Tensor& x, const at::Tensor& weight) const {
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor variance = xf.pow(2).mean(-1, /*keepdim=*/true);
  xf = xf * at::rsqrt(variance + config_.rmsNormEps);
  return weight * xf.to(x.scalar_type());
}

const char* linearGroupName(LinearGroup group) {
  switch (group) {
    case LinearGroup::AttentionInput: return "attention input (q/k/v)";
    case LinearGroup::AttentionOutput: return "attention output (o)";
    case LinearGroup::MlpInput: return "mlp input (gate/up)";
    case LinearGroup::MlpHidden: return "mlp hidden (down)";
  }
  return "?";
}

std::vector<std::pair<LinearGroup, Linear*>> LlamaModel::layerLinears(int64_t i) {
  Layer& L = layers_.at(static_cast<size_t>(i));
  return {{LinearGroup::AttentionInput, &L.q}, {LinearGroup::AttentionInput, &L.k},
          {LinearGroup::AttentionInput, &L.v}, {LinearGroup::AttentionOutput, &L.o},
          {LinearGroup::MlpInput, &L.gate},    {LinearGroup::MlpInput, &L.up},
          {LinearGroup::MlpHidden, &L.down}};
}

LlamaModel::LayerNorms LlamaModel::layerNorms(int64_t i) const {
  const Layer& L = layers_.at(static_cast<size_t>(i));
  return {L.inputNorm, L.postAttentionNorm, L.qNorm, L.kNorm};
}

std::vector<std::pair<LinearGroup, const Linear*>> LlamaModel::layerLinears(int64_t i) const {
  std::vector<std::pair<LinearGroup, const Linear*>> out;
  for (auto& [g, l] : const_cast<LlamaModel*>(this)->layerLinears(i)) out.emplace_back(g, l);
  return out;
}

LlamaModel::Context LlamaModel::prepare(int64_t batch, int64_t T, const KVCache* cache,
                                        const BatchLayout* layout) const {
  Context ctx;
  ctx.startPos = cache != nullptr ? cache->length() : 0;
  const int64_t S = ctx.startPos + T;
  auto longOpts = at::TensorOptions().dtype(at::kLong).device(opts_.device);

  at::Tensor positions;   // [T] or [batch, T]
  if (layout != nullptr && layout->positions.defined()) {
    if (layout->positions.sizes() != at::IntArrayRef({batch, T}))
      throw Error("BatchLayout positions must be [batch, T]");
    positions = layout->positions.to(opts_.device, at::kLong);
  } else {
    positions = at::arange(ctx.startPos, S, longOpts);
  }
  // RoPE angles in float32 from integer positions, as transformers computes them, then cast to the dtype.
  at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) * invFreq_;
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  ctx.cos = emb.cos().to(opts_.dtype);
  ctx.sin = emb.sin().to(opts_.dtype);
  if (positions.dim() == 2) {   // per-sequence positions broadcast over heads
    ctx.cos = ctx.cos.unsqueeze(1);
    ctx.sin = ctx.sin.unsqueeze(1);
  }

  // Masks work on cache slots (the causal order), so left padding only needs the padding mask.
  const auto& c = config_;
  const bool causal = T > 1;
  const bool window = c.slidingWindow && S > *c.slidingWindow;
  const bool padded = layout != nullptr && layout->keyPadding.defined();
  if (causal || window || padded) {
    at::Tensor qSlot = at::arange(ctx.startPos, S, longOpts).unsqueeze(1);
    at::Tensor kSlot = at::arange(0, S, longOpts).unsqueeze(0);
    at::Tensor blocked = kSlot > qSlot;   // [T, S]
    if (window) blocked = blocked.logical_or(kSlot <= qSlot - *c.slidingWindow);
    if (padded) {
      if (layout->keyPadding.sizes() != at::IntArrayRef({batch, S}))
        throw Error("BatchLayout keyPadding must be [batch, cache length + T]");
      // [batch, 1, 1, T, S] against scores [batch, kv, groups, T, S]
      // A padding query still attends to its own slot: a row with every key blocked would be NaN after the
      // softmax, and NaN values times zero probabilities would leak into real rows in the next layer.
      at::Tensor pad = layout->keyPadding.to(opts_.device, at::kBool).unsqueeze(1);   // [batch, 1, S]
      blocked = blocked.unsqueeze(0).logical_or(pad).logical_and((kSlot != qSlot).unsqueeze(0))
                    .view({batch, 1, 1, T, S});
    }
    ctx.blocked = blocked;
  }
  return ctx;
}

at::Tensor LlamaModel::attention(const Layer& L, int64_t index, const at::Tensor& x, const Context& ctx,
                                 KVCache* cache, const LinearInputObserver& observer) const {
  const auto& c = config_;
  const int64_t B = x.size(0), T = x.size(1), D = c.headDim, KV = c.numKvHeads, G = c.kvGroups();
  if (observer) observer(index, LinearGroup::AttentionInput, x);

  at::Tensor q = L.q.forward(x).view({B, T, c.numHeads, D});
  at::Tensor k = L.k.forward(x).view({B, T, KV, D});
  at::Tensor v = L.v.forward(x).view({B, T, KV, D}).transpose(1, 2);
  if (c.qkNorm) {   // Qwen3 normalises each head before RoPE
    q = rmsNorm(q, L.qNorm);
    k = rmsNorm(k, L.kNorm);
  }
  q = q.transpose(1, 2);   // [B, heads, T, D]
  k = k.transpose(1, 2);
  q = q * ctx.cos + rotateHalf(q) * ctx.sin;
  k = k * ctx.cos + rotateHalf(k) * ctx.sin;

  at::Tensor keys = k, values = v;
  if (cache != nullptr) std::tie(keys, values) = cache->append(index, k, v);
  const int64_t S = keys.size(2);

  // Grouped-query attention without materialising repeated K/V: query head h uses KV head h / G, so fold
  // the G query heads of each KV head into the row dimension of one matmul.
  at::Tensor qg = q.reshape({B, KV, G * T, D});
  at::Tensor scores = at::matmul(qg, keys.transpose(-1, -2)) * (1.0 / std::sqrt(double(D)));   // [B,KV,G*T,S]
  scores = scores.view({B, KV, G, T, S});
  if (ctx.blocked.defined()) scores = scores.masked_fill(ctx.blocked, -std::numeric_limits<double>::infinity());
  at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type()).view({B, KV, G * T, S});
  at::Tensor out = at::matmul(probs, values).view({B, c.numHeads, T, D}).transpose(1, 2).reshape({B, T, -1});
  if (observer) observer(index, LinearGroup::AttentionOutput, out);
  return L.o.forward(out);
}

at::Tensor LlamaModel::embed(const at::Tensor& ids) const {
  TORCH_CHECK(ids.dim() == 2, "LlamaModel expects [batch, T] token ids, got ", ids.sizes());
  if (embedding_.defined()) return at::embedding(embedding_, ids.to(opts_.device, at::kLong));
  // Streamed: only the rows these ids use are read (a 70B's table is 2 GB; a calibration set uses a few thousand
  // rows of it).
  const TensorEntry& e = source_->at("model.embed_tokens.weight");
  const at::Tensor cpuIds = ids.to(at::kCPU, at::kLong).contiguous();
  const auto [unique, inverse, counts] = at::_unique2(cpuIds.reshape({-1}), /*sorted=*/true, /*return_inverse=*/true);
  const int64_t H = config_.hiddenSize;
  const size_t rowBytes = static_cast<size_t>(H) * dtypeSize(e.dtype);
  at::Tensor rows = at::empty({unique.size(0), H}, at::TensorOptions().dtype(scalarType(e.dtype)));
  const int64_t* id = unique.data_ptr<int64_t>();
  for (int64_t r = 0; r < unique.size(0); ++r) {
    if (id[r] < 0 || id[r] >= config_.vocabSize)
      throw InputError("token id " + std::to_string(id[r]) + " is outside the vocabulary of " +
                       std::to_string(config_.vocabSize));
    TensorEntry row = e;
    row.data = e.data + static_cast<size_t>(id[r]) * rowBytes;
    row.nbytes = rowBytes;
    row.shape = {H};
    readTensorBytes(row, static_cast<std::byte*>(rows.data_ptr()) + static_cast<size_t>(r) * rowBytes);
  }
  source_->releasePages(e);
  const at::Tensor table = rows.to(opts_.device, opts_.dtype);
  return at::embedding(table, inverse.reshape(ids.sizes()).to(opts_.device));
}

at::Tensor LlamaModel::block(int64_t i, const at::Tensor& x, const Context& ctx, KVCache* cache,
                             const LinearInputObserver& observer) const {
  const Layer& L = layers_.at(static_cast<size_t>(i));
  if (!L.inputNorm.defined()) throw Error("model.layers." + std::to_string(i) + " is not loaded (streamed model: loadLayer first)");
  at::Tensor h = x + attention(L, i, rmsNorm(x, L.inputNorm), ctx, cache, observer);
  at::Tensor m = rmsNorm(h, L.postAttentionNorm);
  if (observer) observer(i, LinearGroup::MlpInput, m);
  at::Tensor hidden = at::silu(L.gate.forward(m)) * L.up.forward(m);
  if (observer) observer(i, LinearGroup::MlpHidden, hidden);
  return h + L.down.forward(hidden);
}

at::Tensor LlamaModel::head(const at::Tensor& x) const {
  if (!lmHeadLoaded()) throw Error("lm_head is not loaded (streamed model: loadHead first)");
  return lmHead_.forward(rmsNorm(x, finalNorm_)).to(at::kFloat);
}

at::Tensor LlamaModel::forward(const at::Tensor& ids, KVCache* cache, bool lastOnly, const BatchLayout* layout) const {
  TORCH_CHECK(ids.dim() == 2, "LlamaModel::forward expects [batch, T] token ids, got ", ids.sizes());
  const int64_t B = ids.size(0), T = ids.size(1);
  if (cache != nullptr && cache->batch() != B)
    throw Error("KV cache holds " + std::to_string(cache->batch()) + " sequences, forward got " + std::to_string(B));
  Context ctx = prepare(B, T, cache, layout);
  at::Tensor x = embed(ids);
  for (int64_t i = 0; i < numLayers(); ++i) x = block(i, x, ctx, cache);
  if (cache != nullptr) cache->advance(T);
  if (lastOnly) x = x.narrow(1, T - 1, 1);
  return head(x);
}

}  // namespace pareto
