// The decoder-only transformer of the Llama family (Llama 1-3.x, Mistral, Qwen2, Qwen3) in LibTorch,
// numerically following Hugging Face transformers' eager implementation so that logits match it.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

#include "checkpoint/ModelConfig.h"
#include "model/Device.h"
#include "model/KVCache.h"
#include "model/Linear.h"
#include "util/Progress.h"

namespace pareto {

class Checkpoint;
struct CompressionManifest;
namespace model_detail {
class WeightLoader;
}

// The four distinct inputs of a block's linears. Linears that share an input (q/k/v, gate/up) are one group,
// so whatever looks at inputs (Hessians) sees each activation once.
enum class LinearGroup { AttentionInput, AttentionOutput, MlpInput, MlpHidden };
const char* linearGroupName(LinearGroup group);

// Per-sequence layout of a padded batch (left-padded prompts in batched generation, right-padded calibration
// sequences). Without it every sequence starts at the cache's position and nothing is padding.
struct BatchLayout {
  at::Tensor positions;    // [batch, T] int64 RoPE positions of the new tokens
  at::Tensor keyPadding;   // [batch, S] bool over every cache slot so far incl. the new ones; true = never attend
};

// Sees the input of each linear group of a block during a forward pass ([batch, T, in] in the model dtype).
using LinearInputObserver = std::function<void(int64_t layer, LinearGroup group, const at::Tensor& input)>;

// RoPE inverse frequencies [headDim/2] exactly as transformers computes them (float32; llama3 scaling).
at::Tensor ropeInverseFrequencies(const ModelConfig& config, at::Device device);

class LlamaModel {
 public:
  // Copies the checkpoint's weights to opts.device in opts.dtype. Throws InputError naming the tensor and file
  // when a tensor is missing, has the wrong shape, or is not one this architecture uses.
  // A compressed folder's manifest says which modules are stored packed; they are unpacked to dense weights.
  // Reports stage "load" as the blocks are read and checks `cancel` before each tensor (throwing Cancelled), so
  // a job cancelled while a large model loads stops within one tensor.
  LlamaModel(const ModelConfig& config, const Checkpoint& checkpoint, const RuntimeOptions& opts,
             const CompressionManifest* manifest = nullptr, const ProgressCallback& progress = {},
             const CancelToken* cancel = nullptr);

  // A streamed model, for models larger than the device (or the host): every tensor is checked from the
  // headers now, but only the norms are read. A block's weights are read from the memory-mapped checkpoint by
  // loadLayer() and freed by releaseLayer(); embed() reads only the rows its ids use; the output head comes with
  // loadHead()/releaseHead(). The checkpoint stays open as long as the model.
  LlamaModel(const ModelConfig& config, std::shared_ptr<const Checkpoint> checkpoint, const RuntimeOptions& opts,
             const CompressionManifest* manifest = nullptr);
  bool streamed() const { return source_ != nullptr; }
  // No-ops on a model that holds all its weights. block() on a layer not loaded throws. Which blocks are
  // resident is a cache of the checkpoint, not part of what the model computes, so these are const.
  void loadLayer(int64_t layer) const;
  void releaseLayer(int64_t layer) const;
  bool layerLoaded(int64_t layer) const;
  void loadHead() const;
  void releaseHead() const;
  bool lmHeadLoaded() const;

  // ids: [batch, T] integer token ids. Without a cache the sequence starts at position 0; with one it continues
  // at cache->length() and the cache grows by T. Returns float32 logits [batch, T, vocab] on the model's device,
  // or [batch, 1, vocab] for the last position only when lastOnly is set (decode does not need the rest).
  at::Tensor forward(const at::Tensor& ids, KVCache* cache = nullptr, bool lastOnly = false,
                     const BatchLayout* layout = nullptr) const;

  // The same computation in pieces, for passes that go block by block (calibration, the sequential
  // compression pass): prepare() once per sequence shape, embed(), block() for each layer, head().
  struct Context {
    at::Tensor cos, sin;     // [T, D] or [batch, 1, T, D]
    at::Tensor blocked;      // bool mask broadcastable to [batch, kv, groups, T, S], or undefined
    int64_t startPos = 0;
  };
  Context prepare(int64_t batch, int64_t T, const KVCache* cache, const BatchLayout* layout) const;
  at::Tensor embed(const at::Tensor& ids) const;
  at::Tensor block(int64_t layer, const at::Tensor& x, const Context& ctx, KVCache* cache = nullptr,
                   const LinearInputObserver& observer = {}) const;
  at::Tensor head(const at::Tensor& x) const;   // final norm + output head → float32 logits

  int64_t numLayers() const { return static_cast<int64_t>(layers_.size()); }
  // The linears of a layer with the group each reads, in execution order (q, k, v, o, gate, up, down).
  std::vector<std::pair<LinearGroup, Linear*>> layerLinears(int64_t layer);
  std::vector<std::pair<LinearGroup, const Linear*>> layerLinears(int64_t layer) const;
  const Linear& outputHead() const { return lmHead_; }
  // The tensors besides the linears, for runtimes that run the model their own way (decode/DecodeModel.h).
  struct LayerNorms {
    at::Tensor input, postAttention, q, k;   // q/k: Qwen3's per-head norms, undefined otherwise
  };
  LayerNorms layerNorms(int64_t layer) const;
  const at::Tensor& embedding() const { return embedding_; }
  const at::Tensor& finalNorm() const { return finalNorm_; }
  const at::Tensor& invFreq() const { return invFreq_; }

  // A cache able to hold `capacity` positions for `batch` sequences.
  KVCache makeCache(int64_t batch, int64_t capacity) const;

  const ModelConfig& config() const { return config_; }
  const RuntimeOptions& options() const { return opts_; }
  // With RuntimeOptions::packedWeights: the packed modules that still run dense, and why.
  const std::vector<std::string>& runtimeNotes() const { return runtimeNotes_; }

 private:
  struct Layer {
    at::Tensor inputNorm, postAttentionNorm, qNorm, kNorm;
    Linear q, k, v, o, gate, up, down;
  };

  Layer readLayer(model_detail::WeightLoader& loader, int64_t layer) const;
  Linear readHead(model_detail::WeightLoader& loader) const;
  at::Tensor rmsNorm(const at::Tensor& x, const at::Tensor& weight) const;
  at::Tensor attention(const Layer& layer, int64_t index, const at::Tensor& x, const Context& ctx,
                       KVCache* cache, const LinearInputObserver& observer) const;

  ModelConfig config_;
  RuntimeOptions opts_;
  at::Tensor embedding_;   // [vocab, hidden]
  mutable std::vector<Layer> layers_;   // mutable: a streamed model reads and drops them (loadLayer)
  at::Tensor finalNorm_;
  mutable Linear lmHead_;
  at::Tensor invFreq_;     // [headDim/2] float32 on the device
  mutable std::vector<std::string> runtimeNotes_;
  std::shared_ptr<const Checkpoint> source_;   // streamed: where the layers are read from
  std::shared_ptr<const CompressionManifest> sourceManifest_;
};

}  // namespace pareto
