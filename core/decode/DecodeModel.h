// The model as the decode runtime runs it: the Llama-family architecture with q/k/v and gate/up fused into one
// linear each (one kernel reads what three or two would), each linear in its own weight format (dense or
// packed: runtime/PackedLinear.h), plus the norms, the embedding and the output head. Built from a loaded model
// (a dense folder or a `compress` output loaded with packed weights) or as a synthetic model: a published
// configuration (checkpoint/ModelPresets.h) with random weights made directly on the device in the requested format,
// so speed can be measured without downloading weights, the way serving engines offer dummy weights.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/ModelConfig.h"
#include "model/Device.h"
#include "runtime/PackedLinear.h"
#include "util/Progress.h"

namespace pareto {

class LlamaModel;

// Linears that read the same input, run as one when their formats allow (concatRows) and otherwise one after
// the other into slices of the output.
struct FusedLinear {
  std::vector<PackedLinear> parts;   // one when fused
  int64_t rows() const;
  int64_t cols() const;
  int64_t weightBytes() const;
  // out [N, rows] = x [N, cols] · Ŵᵀ
  void forward(const at::Tensor& x, const at::Tensor& out, const std::string& what) const;
  // The same with a small op folded in (PackedLinear::forward with a GemvFusion): inside the GEMV where one packed
  // part holds all the rows (fusesInKernel), else the op around the parts' products.
  void forward(const at::Tensor& x, const at::Tensor& out, const std::string& what, const GemvFusion& fusion) const;
  bool fusesInKernel() const { return parts.size() == 1 && parts.front().fusesInKernel(); }
  static FusedLinear fuse(const std::vector<const PackedLinear*>& parts);
};

struct DecodeLayer {
  at::Tensor inputNorm, postAttentionNorm, qNorm, kNorm;   // q/k norms: Qwen3 only
  FusedLinear qkv, o, gateUp, down;
};

class DecodeModel {
 public:
  // Shares the loaded model's tensors (fused linears are new copies; drop the LlamaModel afterwards to free
  // the originals). Needs float16 or bfloat16 (the decode kernels' activations).
  static DecodeModel fromModel(const LlamaModel& model);

  struct SyntheticOptions {
    std::string format = "dense";     // runtime/PackedLinear.h names, of the block linears
    // The output head's (a recipe's "lm_head" block): "dense" is the embedding when the configuration ties them,
    // a packed head is its own weight.
    std::string headFormat = "dense";
    int64_t layers = 0;               // 0: the configuration's
    uint64_t seed = 0;
    double spqrOutlierFraction = 0.01;
  };
  // Random weights of `config`'s architecture in `format`, made on opts.device (float16/bfloat16).
  static DecodeModel synthetic(const ModelConfig& config, const SyntheticOptions& synthetic, const RuntimeOptions& opts,
                               const ProgressCallback& progress = {});

  const ModelConfig& config() const { return config_; }
  const RuntimeOptions& options() const { return opts_; }
  int64_t numLayers() const { return static_cast<int64_t>(layers_.size()); }
  const DecodeLayer& layer(int64_t i) const { return layers_.at(static_cast<size_t>(i)); }
  const at::Tensor& embedding() const { return embedding_; }
  const at::Tensor& finalNorm() const { return finalNorm_; }
  const PackedLinear& outputHead() const { return lmHead_; }
  const at::Tensor& invFreq() const { return invFreq_; }

  // Bytes one decode step reads from the weights: every linear as laid out for its kernel, the output head,
  // the norms and one embedding row per sequence.
  int64_t weightBytesPerStep(int64_t batch) const;
  // "int4-g128" when every layer linear has that format, else e.g. "bitmask-2:4 ×160, dense ×64".
  std::string formatSummary() const;
  // Packed modules of the source folder that run dense (LlamaModel::runtimeNotes()).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  ModelConfig config_;
  RuntimeOptions opts_;
  at::Tensor embedding_, finalNorm_, invFreq_;
  PackedLinear lmHead_;
  std::vector<DecodeLayer> layers_;
  std::vector<std::string> notes_;
};

}  // namespace pareto
