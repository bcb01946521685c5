#include "calib/SequentialPass.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <numeric>
#include <vector>

#include "dist/ProcessGroup.h"
#include "model/Device.h"
#include "util/Error.h"

namespace pareto {
namespace {

// Right-padded batches of calibration sequences. Right padding needs no mask: causal attention already keeps
// real positions from seeing the padding after them, and padding has weight 0 in the Hessian.
struct CalibrationBatch {
  at::Tensor ids;       // [b, T] int64
  at::Tensor weights;   // [b, T] float32, 0 on padding
};

// Similar lengths together keep padding small; order does not change the Hessian sums.
std::vector<std::vector<size_t>> batchMembers(const CalibrationSet& data, int64_t batch) {
  std::vector<size_t> order(data.sequences.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return data.sequences[a].ids.size() > data.sequences[b].ids.size();
  });
  std::vector<std::vector<size_t>> members;
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch))
    members.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start),
                         order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), start + static_cast<size_t>(batch))));
  return members;
}

std::vector<CalibrationBatch> makeBatches(const CalibrationSet& data, int64_t batch) {
  std::vector<CalibrationBatch> batches;
  for (const std::vector<size_t>& rows : batchMembers(data, batch)) {
    const int64_t T = static_cast<int64_t>(data.sequences[rows.front()].ids.size());
    const int64_t b = static_cast<int64_t>(rows.size());
    CalibrationBatch cb;
    cb.ids = at::zeros({b, T}, at::kLong);
    cb.weights = at::zeros({b, T}, at::kFloat);
    for (int64_t row = 0; row < b; ++row) {
      const auto& s = data.sequences[rows[static_cast<size_t>(row)]];
      const int64_t len = static_cast<int64_t>(s.ids.size());
      if (s.weights.size() != s.ids.size()) throw Error("calibration sequence has mismatched weights");
      cb.ids[row].narrow(0, 0, len).copy_(at::tensor(s.ids, at::TensorOptions().dtype(at::kLong)));
      cb.weights[row].narrow(0, 0, len).copy_(at::tensor(s.weights, at::TensorOptions().dtype(at::kFloat)));
    }
    batches.push_back(std::move(cb));
  }
  return batches;
}

// The batches, and their block-0 inputs (the embeddings) in a store placed as the options say.
struct PassState {
  std::vector<CalibrationBatch> batches;
  std::unique_ptr<ActivationStore> hidden;
};

PassState prepareBatches(const LlamaModel& model, const CalibrationSet& data, const SequentialPassOptions& opts) {
  if (data.sequences.empty() && opts.group == nullptr) throw InputError("calibration set is empty");
  for (const auto& s : data.sequences)
    if (static_cast<int64_t>(s.ids.size()) > model.config().maxPositionEmbeddings)
      throw InputError("calibration sequence of " + std::to_string(s.ids.size()) + " tokens exceeds the model's " +
                       std::to_string(model.config().maxPositionEmbeddings) + " positions");
  const c10::Device device = model.options().device;
  PassState state;
  state.batches = makeBatches(data, passBatch(opts.batch, device));
  std::vector<std::vector<int64_t>> shapes;
  for (const CalibrationBatch& b : state.batches) shapes.push_back({b.ids.size(0), b.ids.size(1), model.config().hiddenSize});
  state.hidden = std::make_unique<ActivationStore>(opts.activations, shapes, model.options().dtype, device, opts.scratchDir);
  for (size_t i = 0; i < state.batches.size(); ++i) {
    CalibrationBatch& b = state.batches[i];
    b.weights = b.weights.to(device);
    state.hidden->put(i, model.embed(b.ids));
  }
  return state;
}

// Runs block `layer` over every batch, feeding each linear group's input to its accumulator. With `advance` each
// batch's output replaces its input (the weights will not change); otherwise the outputs are dropped (keeping
// them would double the activations) and recomputed once the block has its new weights.
void observeLayer(const LlamaModel& model, int64_t layer, PassState& state,
                  std::map<LinearGroup, HessianAccumulator>& hessians, bool advance) {
  for (size_t i = 0; i < state.batches.size(); ++i) {
    const CalibrationBatch& b = state.batches[i];
    const at::Tensor& w = b.weights;
    LlamaModel::Context ctx = model.prepare(b.ids.size(0), b.ids.size(1), nullptr, nullptr);
    at::Tensor out = model.block(layer, state.hidden->get(i), ctx, nullptr,
                                 [&](int64_t, LinearGroup g, const at::Tensor& x) { hessians.at(g).add(x, w); });
    if (advance) state.hidden->put(i, out);
  }
}

// Replaces every batch's input with the block's output.
void advance(const LlamaModel& model, int64_t layer, PassState& state) {
  for (size_t i = 0; i < state.batches.size(); ++i) {
    const CalibrationBatch& b = state.batches[i];
    LlamaModel::Context ctx = model.prepare(b.ids.size(0), b.ids.size(1), nullptr, nullptr);
    state.hidden->put(i, model.block(layer, state.hidden->get(i), ctx));
  }
}

std::map<LinearGroup, HessianAccumulator> makeAccumulators(const LlamaModel& model, int64_t layer) {
  std::map<LinearGroup, HessianAccumulator> hessians;
  for (const auto& [group, linear] : model.layerLinears(layer))
    if (hessians.count(group) == 0)
      hessians.emplace(group, HessianAccumulator(linear->inFeatures(), model.options().device,
                                                 "model.layers." + std::to_string(layer) + " " + linearGroupName(group)));
  return hessians;
}

// The distributed form of solving a block's linears: the Hessians summed over the ranks, each linear solved by
// its rank while the others solve theirs, then every new weight broadcast from the rank that made it.
void solveAcrossRanks(LlamaModel& model, int64_t layer, std::map<LinearGroup, HessianAccumulator>& hessians,
                      const ModuleCallback& onModule, ProcessGroup& group) {
  for (auto& [g, h] : hessians) h.sumAcrossRanks(group);
  const auto linears = model.layerLinears(layer);
  const std::vector<int> owner = moduleRanks(model, layer, group.size());
  std::vector<at::Tensor> updated(linears.size());
  for (size_t j = 0; j < linears.size(); ++j)
    if (owner[j] == group.rank())
      updated[j] = onModule(linears[j].second->name(), linears[j].second->weight(), hessians.at(linears[j].first));
  for (size_t j = 0; j < linears.size(); ++j) {
    Linear& linear = *linears[j].second;
    const bool mine = owner[j] == group.rank();
    at::Tensor changed = at::tensor({mine && updated[j].defined() ? 1.0f : 0.0f}, at::kFloat);
    group.broadcast(changed, owner[j]);
    if (changed.item<float>() == 0) continue;
    at::Tensor w = mine ? updated[j].to(linear.weight().options()).contiguous() : at::empty_like(linear.weight());
    group.broadcast(w, owner[j]);
    linear.setWeight(w);
  }
}

// Hands every linear of the block to the callback and installs the new weights in execution order. With more
// than one solver thread the linears are solved concurrently; on CUDA each worker runs on its own stream: the
// current stream is synchronised before (the Hessians and weights were written on it) and every task synchronises
// its stream before returning, so the results are complete when they are installed and no memory is shared
// across streams while work on it is in flight. `streams` holds the workers' streams from one block to the next:
// the caching allocator keeps freed blocks per stream, so a worker that met a new pool stream at every block
// would allocate its Hessian-sized buffers from the driver again each time (and the reserved memory grows with
// every stream used).
void solveLayer(LlamaModel& model, int64_t layer, const std::map<LinearGroup, HessianAccumulator>& hessians,
                const ModuleCallback& onModule, int threads, std::vector<c10::Stream>& streams) {
  const auto linears = model.layerLinears(layer);
  std::vector<at::Tensor> updated(linears.size());
  const c10::Device device = model.options().device;
  auto solveOne = [&](size_t i) {
    const auto& [group, linear] = linears[i];
    updated[i] = onModule(linear->name(), linear->weight(), hessians.at(group));
  };
  if (threads <= 1 || linears.size() < 2) {
    for (size_t i = 0; i < linears.size(); ++i) solveOne(i);
  } else {
    const bool cuda = device.is_cuda();
    const c10::impl::VirtualGuardImpl guard(device.type());
    if (cuda) {
      // LibTorch loads its CUDA linear algebra (the solvers' Cholesky) on the first call, through a wrapper that
      // fails when two threads make that first call together; one small call here loads it for all.
      static std::once_flag linalgLoaded;
      std::call_once(linalgLoaded, [&] { at::linalg_cholesky_ex(at::ones({1, 1}, at::TensorOptions(device))); });
      guard.synchronizeStream(guard.getStream(device));
    }
    // The longest sweeps (most input columns) first, so that the widest module does not start last.
    std::vector<size_t> order(linears.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return linears[a].second->inFeatures() > linears[b].second->inFeatures();
    });
    const size_t count = std::min(linears.size(), static_cast<size_t>(threads));
    while (cuda && streams.size() < count) streams.push_back(guard.getStreamFromGlobalPool(device));
    auto solve = [&](size_t i, size_t worker) {
      if (!cuda) return solveOne(i);
      const c10::Stream stream = streams[worker];
      const c10::StreamGuard onStream(stream);
      solveOne(i);
      guard.synchronizeStream(stream);
    };
    // Work is taken in that order by `threads` workers; the first error stops the others after their current
    // module and is rethrown once all are joined. Grad mode is thread-local: the workers take the caller's.
    const bool gradMode = c10::GradMode::is_enabled();
    std::atomic<size_t> next{0};
    std::mutex errorMutex;
    std::exception_ptr error;
    std::vector<std::future<void>> workers;
    for (size_t w = 0; w < count; ++w)
      workers.push_back(std::async(std::launch::async, [&, w] {
        const c10::AutoGradMode mode(gradMode);
        for (size_t k = next++; k < linears.size(); k = next++) {
          try {
            solve(order[k], w);
          } catch (...) {
            const std::lock_guard<std::mutex> lock(errorMutex);
            if (!error) error = std::current_exception();
            next = linears.size();
          }
        }
      }));
    for (auto& w : workers) w.get();
    if (error) std::rethrow_exception(error);
  }
  for (size_t i = 0; i < linears.size(); ++i)
    if (updated[i].defined()) linears[i].second->setWeight(updated[i]);
}

// `stages`: the layer's own stage times ("read 0.31 s, observe 0.82 s, ..."), shown after its number so that a log
// of a run cut short still says where each layer's time went.
void reportLayer(const SequentialPassOptions& opts, int64_t layer, int64_t layers, const std::string& stages = {}) {
  if (opts.progress)
    opts.progress({"sequential pass", double(layer + 1) / layers,
                   "layer " + std::to_string(layer + 1) + "/" + std::to_string(layers) +
                       (stages.empty() ? "" : " (" + stages + ")")});
}

// Where a block's time goes (SequentialPassOptions::stageSeconds): on CUDA each stage ends with a synchronisation
// of the current stream, so the device's queued work is counted in the stage that queued it.
class StageClock {
 public:
  StageClock(const c10::Device& device, std::map<std::string, double>* seconds)
      : device_(device), seconds_(seconds), start_(clock::now()) {}
  void end(const char* stage) {
    if (seconds_ == nullptr) return;
    synchronizeCurrentStream(device_);
    const auto now = clock::now();
    const double seconds = std::chrono::duration<double>(now - start_).count();
    (*seconds_)[stage] += seconds;
    char text[64];
    std::snprintf(text, sizeof text, "%s%s %.2f s", layer_.empty() ? "" : ", ", stage, seconds);
    layer_ += text;
    start_ = now;
  }
  // The stages ended since the clock started, with their times.
  const std::string& layerStages() const { return layer_; }

 private:
  using clock = std::chrono::steady_clock;
  c10::Device device_;
  std::map<std::string, double>* seconds_;
  clock::time_point start_;
  std::string layer_;
};

}  // namespace

std::vector<int> moduleRanks(const LlamaModel& model, int64_t layer, int ranks) {
  const auto linears = model.layerLinears(layer);
  std::vector<size_t> order(linears.size());
  std::iota(order.begin(), order.end(), 0);
  auto cost = [&](size_t j) {
    const double rows = static_cast<double>(linears[j].second->outFeatures());
    const double cols = static_cast<double>(linears[j].second->inFeatures());
    return rows * cols * cols;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost(a) > cost(b); });
  std::vector<double> load(static_cast<size_t>(std::max(ranks, 1)), 0.0);
  std::vector<int> owner(linears.size(), 0);
  for (size_t j : order) {
    const size_t r = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[j] = static_cast<int>(r);
    load[r] += cost(j);
  }
  return owner;
}

int64_t passBatch(int64_t requested, const c10::Device& device) {
  return requested > 0 ? requested : (device.is_cuda() ? 32 : 8);
}

std::vector<std::vector<int64_t>> activationShapes(const CalibrationSet& data, int64_t hiddenSize, int64_t batch,
                                                   const c10::Device& device) {
  std::vector<std::vector<int64_t>> shapes;
  for (const std::vector<size_t>& rows : batchMembers(data, passBatch(batch, device)))
    shapes.push_back({static_cast<int64_t>(rows.size()), static_cast<int64_t>(data.sequences[rows.front()].ids.size()),
                      hiddenSize});
  return shapes;
}

void runSequentialPass(LlamaModel& model, const CalibrationSet& data, const ModuleCallback& onModule,
                       const SequentialPassOptions& opts) {
  PassState state = prepareBatches(model, data, opts);
  const int64_t layers = model.numLayers();
  std::vector<c10::Stream> solverStreams;
  if (opts.restoredLayers < 0 || opts.restoredLayers > layers)
    throw Error("sequential pass: " + std::to_string(opts.restoredLayers) + " restored layers of a model with " +
                std::to_string(layers));
  if (opts.restoredLayers > 0 && opts.restoredLayers < layers)
    for (size_t i = 0; i < state.batches.size(); ++i) state.hidden->put(i, opts.restoredInput(i));
  SequentialPassOptions::BlockInputs inputs;
  if (opts.blockInputs) {
    for (const CalibrationBatch& b : state.batches)
      inputs.shapes.push_back({b.ids.size(0), b.ids.size(1), model.config().hiddenSize});
    inputs.dtype = model.options().dtype;
    inputs.input = [&](size_t i) { return state.hidden->get(i); };
  }
  for (int64_t layer = opts.restoredLayers; layer < layers; ++layer) {
    bool cancelled = opts.cancel != nullptr && opts.cancel->isCancelled();
    if (opts.group != nullptr) {
      opts.group->faultPoint(layer);
      cancelled = opts.group->any(cancelled);
    }
    if (cancelled) throw Cancelled();
    StageClock clock(model.options().device, opts.stageSeconds);
    model.loadLayer(layer);
    clock.end("read");
    {
      std::map<LinearGroup, HessianAccumulator> hessians = makeAccumulators(model, layer);
      observeLayer(model, layer, state, hessians, /*advance=*/false);
      clock.end("observe");
      if (opts.group != nullptr)
        solveAcrossRanks(model, layer, hessians, onModule, *opts.group);
      else
        solveLayer(model, layer, hessians, onModule, opts.solverThreads, solverStreams);
      clock.end("solve");
    }   // the Hessians are freed before the outputs are computed
    advance(model, layer, state);
    clock.end("advance");
    if (opts.blockInputs && layer + 1 < layers) {
      opts.blockInputs(layer + 1, inputs);
      clock.end("inputs saved");
    }
    if (opts.layerDone) opts.layerDone(layer);
    model.releaseLayer(layer);
    clock.end("finish");
    reportLayer(opts, layer, layers, clock.layerStages());
  }
}

void observeHessians(LlamaModel& model, const std::vector<const CalibrationSet*>& sets,
                     const HessianObserver& observer, const SequentialPassOptions& opts) {
  std::vector<PassState> states;
  for (const CalibrationSet* set : sets) states.push_back(prepareBatches(model, *set, opts));
  const int64_t layers = model.numLayers();
  for (int64_t layer = 0; layer < layers; ++layer) {
    if (opts.cancel != nullptr && opts.cancel->isCancelled()) throw Cancelled();
    model.loadLayer(layer);
    std::vector<std::map<LinearGroup, HessianAccumulator>> hessians;
    for (auto& state : states) {
      hessians.push_back(makeAccumulators(model, layer));
      observeLayer(model, layer, state, hessians.back(), /*advance=*/true);
    }
    std::map<LinearGroup, std::vector<std::string>> modules;
    for (const auto& [group, linear] : model.layerLinears(layer)) modules[group].push_back(linear->name());
    for (const auto& [group, names] : modules) {
      std::vector<const HessianAccumulator*> perSet;
      for (const auto& h : hessians) perSet.push_back(&h.at(group));
      observer(layer, group, names, perSet);
    }
    hessians.clear();
    model.releaseLayer(layer);
    reportLayer(opts, layer, layers);
  }
}

}  // namespace pareto
