#include "calib/SequentialPass.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "util/Error.h"

namespace pareto {
namespace {

// Right-padded batches of calibration sequences. Right padding needs no mask: causal attention already keeps
// real positions from seeing the padding after them, and padding has weight 0 in the Hessian.
struct CalibrationBatch {
  at::Tensor ids;       // [b, T] int64
  at::Tensor weights;   // [b, T] float32, 0 on padding
  at::Tensor hidden;    // [b, T, hidden]: the input of the block being processed
};

std::vector<CalibrationBatch> makeBatches(const CalibrationSet& data, int64_t batch) {
  // Similar lengths together keep padding small; order does not change the Hessian sums.
  std::vector<size_t> order(data.sequences.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return data.sequences[a].ids.size() > data.sequences[b].ids.size();
  });
  std::vector<CalibrationBatch> batches;
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch)) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(batch));
    const int64_t T = static_cast<int64_t>(data.sequences[order[start]].ids.size());
    const int64_t b = static_cast<int64_t>(end - start);
    CalibrationBatch cb;
    cb.ids = at::zeros({b, T}, at::kLong);
    cb.weights = at::zeros({b, T}, at::kFloat);
    for (size_t i = start; i < end; ++i) {
      const auto& s = data.sequences[order[i]];
      const int64_t len = static_cast<int64_t>(s.ids.size());
      if (s.weights.size() != s.ids.size()) throw Error("calibration sequence has mismatched weights");
      const int64_t row = static_cast<int64_t>(i - start);
      cb.ids[row].narrow(0, 0, len).copy_(at::tensor(s.ids, at::TensorOptions().dtype(at::kLong)));
      cb.weights[row].narrow(0, 0, len).copy_(at::tensor(s.weights, at::TensorOptions().dtype(at::kFloat)));
    }
    batches.push_back(std::move(cb));
  }
  return batches;
}

int64_t defaultBatch(const LlamaModel& model, const SequentialPassOptions& opts) {
  return opts.batch > 0 ? opts.batch : (model.options().device.is_cuda() ? 32 : 8);
}

std::vector<CalibrationBatch> prepareBatches(const LlamaModel& model, const CalibrationSet& data, int64_t batch) {
  if (data.sequences.empty()) throw InputError("calibration set is empty");
  for (const auto& s : data.sequences)
    if (static_cast<int64_t>(s.ids.size()) > model.config().maxPositionEmbeddings)
      throw InputError("calibration sequence of " + std::to_string(s.ids.size()) + " tokens exceeds the model's " +
                       std::to_string(model.config().maxPositionEmbeddings) + " positions");
  std::vector<CalibrationBatch> batches = makeBatches(data, batch);
  for (auto& b : batches) {
    b.weights = b.weights.to(model.options().device);
    b.hidden = model.embed(b.ids);
  }
  return batches;
}

// Runs block `layer` over every batch, feeding each linear group's input to its accumulator, and returns the
// block outputs.
std::vector<at::Tensor> observeLayer(const LlamaModel& model, int64_t layer, const std::vector<CalibrationBatch>& batches,
                                     std::map<LinearGroup, HessianAccumulator>& hessians) {
  std::vector<at::Tensor> outputs;
  outputs.reserve(batches.size());
  for (const auto& b : batches) {
    const at::Tensor& w = b.weights;
    LlamaModel::Context ctx = model.prepare(b.ids.size(0), b.ids.size(1), nullptr, nullptr);
    outputs.push_back(model.block(layer, b.hidden, ctx, nullptr,
                                  [&](int64_t, LinearGroup g, const at::Tensor& x) { hessians.at(g).add(x, w); }));
  }
  return outputs;
}

std::map<LinearGroup, HessianAccumulator> makeAccumulators(const LlamaModel& model, int64_t layer) {
  std::map<LinearGroup, HessianAccumulator> hessians;
  for (const auto& [group, linear] : model.layerLinears(layer))
    if (hessians.count(group) == 0)
      hessians.emplace(group, HessianAccumulator(linear->inFeatures(), model.options().device,
                                                 "model.layers." + std::to_string(layer) + " " + linearGroupName(group)));
  return hessians;
}

void reportLayer(const SequentialPassOptions& opts, int64_t layer, int64_t layers) {
  if (opts.progress)
    opts.progress({"sequential pass", double(layer + 1) / layers,
                   "layer " + std::to_string(layer + 1) + "/" + std::to_string(layers)});
}

}  // namespace

void runSequentialPass(LlamaModel& model, const CalibrationSet& data, const ModuleCallback& onModule,
                       const SequentialPassOptions& opts) {
  std::vector<CalibrationBatch> batches = prepareBatches(model, data, defaultBatch(model, opts));
  const int64_t layers = model.numLayers();
  if (opts.restoredLayers < 0 || opts.restoredLayers > layers)
    throw Error("sequential pass: " + std::to_string(opts.restoredLayers) + " restored layers of a model with " +
                std::to_string(layers));
  for (int64_t layer = 0; layer < layers; ++layer) {
    if (opts.cancel != nullptr && opts.cancel->isCancelled()) throw Cancelled();
    if (layer < opts.restoredLayers) {
      opts.restoreLayer(layer);
      for (auto& b : batches) {
        LlamaModel::Context ctx = model.prepare(b.ids.size(0), b.ids.size(1), nullptr, nullptr);
        b.hidden = model.block(layer, b.hidden, ctx);
      }
      reportLayer(opts, layer, layers);
      continue;
    }
    std::map<LinearGroup, HessianAccumulator> hessians = makeAccumulators(model, layer);
    std::vector<at::Tensor> outputs = observeLayer(model, layer, batches, hessians);

    bool changed = false;
    for (const auto& [group, linear] : model.layerLinears(layer)) {
      at::Tensor updated = onModule(linear->name(), linear->weight(), hessians.at(group));
      if (updated.defined()) {
        linear->setWeight(updated);
        changed = true;
      }
    }
    hessians.clear();   // free them before the next block's activations grow

    // With new weights the block's outputs must be recomputed; otherwise the observation already has them.
    for (size_t i = 0; i < batches.size(); ++i) {
      auto& b = batches[i];
      if (changed) {
        LlamaModel::Context ctx = model.prepare(b.ids.size(0), b.ids.size(1), nullptr, nullptr);
        b.hidden = model.block(layer, b.hidden, ctx);
      } else {
        b.hidden = outputs[i];
      }
    }
    if (opts.layerDone) opts.layerDone(layer);
    reportLayer(opts, layer, layers);
  }
}

void observeHessians(const LlamaModel& model, const std::vector<const CalibrationSet*>& sets,
                     const HessianObserver& observer, const SequentialPassOptions& opts) {
  std::vector<std::vector<CalibrationBatch>> batches;
  for (const CalibrationSet* set : sets) batches.push_back(prepareBatches(model, *set, defaultBatch(model, opts)));
  const int64_t layers = model.numLayers();
  for (int64_t layer = 0; layer < layers; ++layer) {
    if (opts.cancel != nullptr && opts.cancel->isCancelled()) throw Cancelled();
    std::vector<std::map<LinearGroup, HessianAccumulator>> hessians;
    for (auto& setBatches : batches) {
      hessians.push_back(makeAccumulators(model, layer));
      std::vector<at::Tensor> outputs = observeLayer(model, layer, setBatches, hessians.back());
      for (size_t i = 0; i < setBatches.size(); ++i) setBatches[i].hidden = outputs[i];
    }
    std::map<LinearGroup, std::vector<std::string>> modules;
    for (const auto& [group, linear] : model.layerLinears(layer)) modules[group].push_back(linear->name());
    for (const auto& [group, names] : modules) {
      std::vector<const HessianAccumulator*> perSet;
      for (const auto& h : hessians) perSet.push_back(&h.at(group));
      observer(layer, group, names, perSet);
    }
    reportLayer(opts, layer, layers);
  }
}

}  // namespace pareto
