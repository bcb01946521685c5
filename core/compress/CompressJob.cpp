#include "compress/CompressJob.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <mutex>

#include "calib/SequentialPass.h"
#include "checkpoint/Safetensors.h"
#include "checkpoint/ShardPlan.h"
#include "compress/CompressMemory.h"
#include "compress/CompressResume.h"
#include "compress/ModulePlan.h"
#include "compress/ModuleSolve.h"
#include "compress/SolveTimings.h"
#include "compress/RecipeCalibration.h"
#include "dist/ProcessGroup.h"
#include "formats/BitmaskNMWeight.h"
#include "formats/CompressionManifest.h"
#include "formats/PackedModuleIO.h"
#include "formats/QuantGroupWeight.h"
#include "formats/SpqrWeight.h"
#include "model/Device.h"
#include "model/LoadedModel.h"
#include "model/MemoryBudget.h"
#include "model/OutOfMemory.h"
#include "model/TensorIO.h"
#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/Json.h"
#include "util/OutputFolder.h"
#include "util/Version.h"


namespace pareto {
namespace fs = std::filesystem;
namespace {

using clock = std::chrono::steady_clock;
double since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }


// The module in its stored format; `weight`: the solvers' result on the CPU in the checkpoint's dtype.
PackedModule packOutcome(const ModuleOutcome& o, const at::Tensor& weight) {
  PackedModule p;
  p.format = o.format;
  p.rows = weight.size(0);
  p.cols = weight.size(1);
  if (o.format.isDense()) p.dense = weight;
  if (o.format.isBitmask()) {
    p.bitmask = BitmaskNMWeight::pack(weight, o.mask.to(weight.device()), o.pattern->n(), o.pattern->m());
    if (o.format.isQuantized()) p.bitmask->values = at::Tensor();   // the kept values are stored quantized
  }
  if (o.format.isGguf()) {
    p.gguf = o.ggufBlocks;
  } else if (o.spqr) {
    p.spqr = SpqrWeight::pack(*o.spqr);
  } else if (o.quant) {
    p.quant = QuantGroupWeight::pack(o.codes, o.quant->grid);
    // Act-order: the quantization order, beside codes kept in the original column order.
    if (o.permutation.defined()) p.columnOrder = o.permutation.to(at::kCPU, at::kInt).contiguous();
  }
  return p;
}

// A host copy of `t` that the write thread may read once syncHostCopies has returned: from a GPU into page-locked
// memory without waiting (the block inputs of an 8B are ~270 MB a layer, which a pageable copy moves at ~1.5 GB/s;
// LibTorch's caching host allocator hands the same pages back for the next block).
at::Tensor hostCopy(const at::Tensor& t) {
  if (!t.is_cuda()) return t.to(at::kCPU).clone(at::MemoryFormat::Contiguous);
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
  host.copy_(t, /*non_blocking=*/true);
  return host;
}


// pareto.json's entry for a compressed module; sets the report's bits per weight, known now that the stored
// bytes are.
nlohmann::json manifestEntry(ModuleOutcome& o, const PackedModule& packed, const TensorEntry& e) {
  nlohmann::json quantInfo;
  if (packed.quant) {
    quantInfo = {{"bits", packed.quant->bits}, {"symmetric", packed.quant->symmetric},
                 {"group_size", packed.quant->groupSize}};
    if (packed.columnOrder.defined()) quantInfo["act_order"] = true;
  } else if (packed.spqr) {
    quantInfo = {{"bits", packed.spqr->bits}, {"scale_bits", packed.spqr->scaleBits},
                 {"group_size", packed.spqr->groupSize}, {"scale_group", packed.spqr->scaleGroup},
                 {"outliers", packed.spqr->outlierValues.numel()}};
  }
  o.report.bitsPerWeight = 8.0 * static_cast<double>(packed.storedBytes()) / static_cast<double>(e.numel());
  nlohmann::json entry = {{"format", o.report.format},  {"bits_per_weight", o.report.bitsPerWeight},
                          {"sparsity", o.report.sparsity}, {"method", o.report.method},
                          {"pattern", o.report.pattern}, {"seconds", o.report.seconds}, {"shape", e.shape}};
  if (!quantInfo.is_null()) entry[packed.spqr ? "spqr" : "quant"] = quantInfo;
  if (!o.note.empty()) entry["note"] = o.note;
  if (o.report.method == "sparsegpt") {
    entry["damp_used"] = o.report.dampUsed;
    entry["damp_retries"] = o.report.dampRetries;
  }
  return entry;
}

// pareto.json's "memory": the budgets, the plan, and the peaks the run reached.
nlohmann::json memoryRecord(const CompressReport& r, const MemoryBudget& budget) {
  nlohmann::json j = {{"plan", r.memoryPlan},
                      {"peak_host_bytes", r.peakHostBytes},
                      {"host_base_bytes", r.hostBaseBytes},
                      {"peak_gpu_bytes", r.peakGpuBytes}};
  if (!r.activations.empty()) j["activations"] = r.activations;
  if (budget.gpuBytes != 0) j["max_gpu_bytes"] = budget.gpuBytes;
  if (budget.hostBytes != 0) j["max_host_bytes"] = budget.hostBytes;
  return j;
}

// The result's weights as transformers shards them (checkpoint/ShardPlan.h), written tensor by tensor.
void writeShardedSafetensors(const fs::path& dir, const std::vector<PlannedTensor>& tensors, uint64_t maxShardBytes,
                             const ProgressCallback& progress, const CancelToken* cancel) {
  std::vector<ShardedTensor> sizes;
  std::map<std::string, const PlannedTensor*> byName;
  for (const PlannedTensor& t : tensors) {
    sizes.push_back({t.name, t.bytes()});
    byName[t.name] = &t;
  }
  const std::vector<Shard> shards = planShards(sizes, maxShardBytes);
  for (size_t i = 0; i < shards.size(); ++i) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    if (progress) progress({"write", double(i) / double(shards.size()), shards[i].file});
    std::vector<PlannedTensor> shard;
    for (const ShardedTensor& t : shards[i].tensors) shard.push_back(*byName.at(t.name));
    writeSafetensorsStreamed((dir / shards[i].file).string(), shard, {{"format", "pt"}, {"producer", "pareto"}});
  }
  if (shards.size() > 1) writeFileAtomically((dir / kShardIndexFile).string(), shardIndex(shards).dump(2) + "\n");
}

nlohmann::json reportJson(const ModuleReport& r) {
  return {{"name", r.name},         {"method", r.method},   {"pattern", r.pattern},
          {"format", r.format},     {"sparsity", r.sparsity}, {"bits_per_weight", r.bitsPerWeight},
          {"seconds", r.seconds},   {"damp_used", r.dampUsed}, {"damp_retries", r.dampRetries}};
}

ModuleReport reportFromJson(const nlohmann::json& j) {
  ModuleReport r;
  r.name = j.at("name");
  r.method = j.at("method");
  r.pattern = j.at("pattern");
  r.format = j.at("format");
  r.sparsity = j.at("sparsity");
  r.bitsPerWeight = j.at("bits_per_weight");
  r.seconds = j.at("seconds");
  r.dampUsed = j.at("damp_used");
  r.dampRetries = j.at("damp_retries");
  return r;
}

// A module as a layer's file holds it, with its report.
struct SolvedModule {
  FinishedModule finished;
  ModuleReport report;
};

// The module solved on rank `from` to every rank (rank 0 writes it): a JSON header with the manifest entry, the
// report and the tensors' names, dtypes and shapes, then the tensors. `solved` matters on `from` only; nullopt
// everywhere when that rank left the module as it was.
std::optional<SolvedModule> shareSolved(ProcessGroup& group, int from, std::optional<SolvedModule> solved) {
  std::string header;
  if (group.rank() == from) {
    nlohmann::json h = nullptr;
    if (solved) {
      nlohmann::json tensors = nlohmann::json::array();
      for (const auto& [name, t] : solved->finished.stored)
        tensors.push_back({{"name", name}, {"dtype", static_cast<int>(t.scalar_type())}, {"shape", t.sizes().vec()}});
      h = {{"module", solved->finished.module}, {"entry", solved->finished.manifestEntry},
           {"bytes", solved->finished.storedBytes}, {"report", reportJson(solved->report)}, {"tensors", tensors}};
    }
    header = h.dump();
  }
  group.broadcastBytes(header, from);
  const nlohmann::json h = nlohmann::json::parse(header);
  if (h.is_null()) return std::nullopt;
  if (group.rank() != from) {
    solved.emplace();
    solved->finished.module = h.at("module");
    solved->finished.manifestEntry = h.at("entry");
    solved->finished.storedBytes = h.at("bytes");
    solved->report = reportFromJson(h.at("report"));
    for (const nlohmann::json& t : h.at("tensors"))
      solved->finished.stored.emplace_back(
          t.at("name").get<std::string>(),
          at::empty(t.at("shape").get<std::vector<int64_t>>(), at::TensorOptions().dtype(
                                                                   static_cast<at::ScalarType>(t.at("dtype").get<int>()))));
  }
  for (auto& [name, t] : solved->finished.stored) group.broadcast(t, from);
  return solved;
}

// The output head as the recipe's "lm_head" block stores it: its own packed tensor, also when the checkpoint ties
// it to the embedding (which stays dense: the gather reads its rows). Quantized from the checkpoint's weight on
// the run's device, stored in the checkpoint's dtype, as the block linears are.
struct PackedHead {
  std::vector<std::pair<std::string, at::Tensor>> stored;
  nlohmann::json manifestEntry;
  uint64_t bytes = 0;
  int64_t weights = 0;
  ModuleReport report;
};

PackedHead packHead(const Recipe& recipe, const Checkpoint& source, const ModelConfig& config,
                    const RuntimeOptions& runtime) {
  const TensorEntry& e = source.at(config.tieWordEmbeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  const ModulePlan plan = planModule(recipe, "lm_head", e.shape.at(0), e.shape.at(1));
  const at::Tensor stored = readTensor(e);
  source.releasePages(e);
  ModuleOutcome o = solveModule(plan, stored.to(runtime.device, runtime.dtype), nullptr);
  o.weight = at::Tensor();
  const PackedModule packed = packOutcome(o, stored);
  PackedHead head;
  head.stored = writePackedModule("lm_head", packed);
  head.bytes = static_cast<uint64_t>(packed.storedBytes());
  head.weights = e.numel();
  head.manifestEntry = manifestEntry(o, packed, e);
  if (config.tieWordEmbeddings) {
    const std::string untied = "untied from model.embed_tokens (kept dense)";
    head.manifestEntry["note"] = o.note.empty() ? untied : o.note + "; " + untied;
  }
  head.report = o.report;
  return head;
}

void copyIfPresent(const fs::path& from, const fs::path& to) {
  if (fs::exists(from)) fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

}  // namespace

CompressReport runCompress(const CompressOptions& opts, const ProgressCallback& progress, const CancelToken* cancel) {
  return runCompress(Recipe::fromFile(opts.recipePath), opts, progress, cancel);
}

CompressReport runCompress(const Recipe& recipe, const CompressOptions& opts, const ProgressCallback& progress,
                           const CancelToken* cancel) {
  const auto start = clock::now();
  ProcessGroup* const group = opts.group != nullptr && opts.group->size() > 1 ? opts.group : nullptr;
  const bool writer = group == nullptr || group->rank() == 0;
  if (group != nullptr && opts.resume)
    throw InputError("--resume continues a run of one process; run the job again without --resume (a distributed "
                     "run that stops keeps nothing)");
  CompressReport result;
  // Magnitude pruning has no activations to share: rank 0 does it alone.
  if (!writer && !recipe.needsCalibration()) return result;
  // The destination is checked and locked before any work: a refusal costs nothing, and no second run can
  // write it meanwhile. Only rank 0 writes.
  OutputClaim claim;
  claim.path = opts.outDir;
  claim.overwrite = opts.overwrite;
  claim.resume = opts.resume;
  claim.inputs = {opts.modelDir, recipe.path};
  if (recipe.calibration) claim.inputs.push_back(recipe.calibration->file);
  claim.job = "compress";
  std::optional<OutputFolder> output;
  if (writer) output.emplace(claim);
  const fs::path out = writer ? fs::path(output->target()) : fs::path();

  auto report = [&](const std::string& stage, double fraction, const std::string& msg) {
    if (progress) progress({stage, fraction, msg});
  };
  report("load", 0, opts.modelDir);
  const uint64_t hostBase = hostResidentBytes();
  resetGpuPeak(opts.runtime.device);
  // The model is streamed: the pass reads each block from the mapped checkpoint when its turn comes and frees it
  // when the block is written, so a model larger than the device or the host compresses one block at a time.
  LoadedModel m = loadModel(opts.modelDir, opts.runtime, WeightResidency::Streamed);
  if (CompressionManifest::readFrom(opts.modelDir))
    throw InputError(fileMessage(opts.modelDir, "is already a compressed folder; compress the dense source model"));
  const Checkpoint source = Checkpoint::open(opts.modelDir);
  const int64_t layers = m.model->numLayers();
  const bool generates = recipe.needsCalibration() && recipe.calibration->source == "decode" &&
                         !recipe.calibration->fromContinuations;
  if (generates) {
    // Generation runs the whole model for every token: it must fit the device (or the host on the CPU) whole.
    const uint64_t need = wholeModelGenerationBytes(m.config, opts.runtime.dtype, passBatch(opts.batch, opts.runtime.device),
                                                    recipe.calibration->maxNewTokens + 512);
    const uint64_t budget = opts.runtime.device.is_cuda() ? opts.budget.gpuBytes : opts.budget.hostBytes;
    if (budget != 0 && budget < need)
      throw InputError("decode calibration generates with the whole model, which needs about " + formatBytes(need) +
                       ", more than the " + formatBytes(budget) + " of " +
                       (opts.runtime.device.is_cuda() ? "--max-gpu-memory" : "--max-host-memory") +
                       ": generate the continuations where the model fits (pareto-cli generate --prompts FILE --out "
                       "FILE.jsonl, or any serving engine) and name that file in the recipe (\"calibration\": "
                       "{\"source\": \"decode\", \"continuations\": FILE})");
  }

  // Each finished layer goes into the staging folder at once: an interrupted run keeps it for --resume, and
  // the whole model's compressed modules are never held in memory together.
  const nlohmann::json identity = {{"source", checkpointIdentityHash(opts.modelDir)},
                                   {"recipe", recipe.document},
                                   {"device", deviceDescription(opts.runtime.device)},
                                   {"dtype", dtypeLabel(opts.runtime.dtype)},
                                   {"batch", opts.batch},
                                   {"pareto", paretoVersion()}};
  std::optional<CompressResume> resume;
  if (writer) resume.emplace(output->staging(), identity, layers);
  const int64_t restored = writer ? resume->start(output->resumed()) : 0;
  if (restored > 0) report("resume", double(restored) / layers, std::to_string(restored) + " of " +
                                                                   std::to_string(layers) + " layers already done");

  std::map<std::string, ModuleOutcome> outcomes;   // the modules of the layer in progress
  std::mutex outcomesMutex;                        // the pass may solve a layer's modules concurrently
  SolveTimings solveTimings;                       // the solvers' steps, summed over the modules
  auto onModule = [&](const std::string& name, const at::Tensor& weight, const HessianAccumulator* h) -> at::Tensor {
    const ModulePlan plan = planModule(recipe, name, weight.size(0), weight.size(1));
    if (!plan.touched()) return {};
    const SolveTimings::Scope timed(&solveTimings);
    ModuleOutcome o = solveModule(plan, weight, h);
    at::Tensor pruned = o.weight;
    o.weight = at::Tensor();   // the model holds it from here on
    const std::lock_guard<std::mutex> lock(outcomesMutex);
    outcomes[name] = std::move(o);
    return pruned;
  };
  // On the rank that solved each module (all of them without a group); rank 0 gathers and writes the layer.
  // A finished layer's staging file is written (and synced) on a thread of its own while the pass goes on with
  // the next block; the next finished layer first waits for it, so at most one layer is on its way at a time and
  // the layers reach the folder in order. Declared after `resume` and `output`: leaving this scope early (an
  // error, a cancel) waits for the write before they are torn down.
  std::future<void> layerWrite;
  double layerWriteSeconds = 0;   // the write thread's time, summed; read only after its future is waited for
  // The next block's inputs copied to the host for the finished layer's write (pass.blockInputs), and their block.
  std::vector<at::Tensor> pendingInputs;
  int64_t pendingInputsLayer = 0;
  auto waitForLayerWrite = [&] {
    if (!layerWrite.valid()) return;
    layerWrite.get();
    // A layer is finished once its file is whole: only then is the staging folder worth keeping for --resume.
    if (opts.keepFinishedLayers && group == nullptr) output->keepStagingOnFailure();
  };
  // Runs the pass, then waits for its last layer's file. When the pass fails, the layer already on its way is
  // still waited for (and kept for --resume if it was written whole); the pass's error is the one reported.
  auto withLayerWrites = [&](const std::function<void()>& pass) {
    try {
      pass();
    } catch (...) {
      try {
        waitForLayerWrite();
      } catch (...) {
      }
      throw;
    }
    waitForLayerWrite();
  };
  // The parts of a block's "finish" stage (SequentialPass.h stageSeconds): waiting for the previous layer's file,
  // then packing this layer's modules and copying them to the host; the write itself runs beside the pass.
  auto finishLayer = [&](int64_t layer) {
    const auto waitStart = clock::now();
    waitForLayerWrite();
    result.passStageSeconds["finish: waiting for the previous layer's write"] += since(waitStart);
    const auto packStart = clock::now();
    std::vector<FinishedModule> finished;
    std::vector<ModuleReport> reports;
    const auto linears = m.model->layerLinears(layer);
    const std::vector<int> owner =
        group != nullptr ? moduleRanks(*m.model, layer, group->size()) : std::vector<int>(linears.size(), 0);
    for (size_t j = 0; j < linears.size(); ++j) {
      Linear* linear = linears[j].second;
      std::optional<SolvedModule> solved;
      const auto it = outcomes.find(linear->name());
      if (it != outcomes.end()) {
        const TensorEntry& e = source.at(linear->name() + ".weight");
        // Stored in the source dtype: the pass computes in the runtime dtype, the file keeps the checkpoint's.
        // Packed where the solver left the module (on a GPU in milliseconds; the host's single-threaded
        // masked_select and bit packing took seconds a block): only the packed parts travel to the host.
        const at::Tensor w = linear->weight().to(scalarType(e.dtype)).contiguous();
        const PackedModule packed = packOutcome(it->second, w);
        solved.emplace();
        solved->finished.module = linear->name();
        solved->finished.stored = writePackedModule(linear->name(), packed);
        solved->finished.storedBytes = static_cast<uint64_t>(packed.storedBytes());
        solved->finished.manifestEntry = manifestEntry(it->second, packed, e);
        solved->report = it->second.report;
        outcomes.erase(it);
      }
      if (group != nullptr && owner[j] != 0) solved = shareSolved(*group, owner[j], std::move(solved));
      if (!writer || !solved) continue;
      reports.push_back(std::move(solved->report));
      finished.push_back(std::move(solved->finished));
    }
    synchronizeCurrentStream(m.model->options().device);
    result.passStageSeconds["finish: packing and copying to the host"] += since(packStart);
    if (!writer) return;
    std::vector<at::Tensor> inputs = std::move(pendingInputs);   // the next block's, when copied (synced above)
    pendingInputs.clear();
    layerWrite = std::async(std::launch::async, [&resume, &layerWriteSeconds, layer, finished = std::move(finished),
                                                 reports = std::move(reports), inputs = std::move(inputs),
                                                 inputsLayer = pendingInputsLayer] {
      const auto writeStart = clock::now();
      if (!inputs.empty()) resume->writeInputs(inputsLayer, inputs);
      resume->writeLayer(layer, finished, reports);
      layerWriteSeconds += since(writeStart);
    });
  };
  auto finishAndRelease = [&](int64_t layer) {
    finishLayer(layer);
    m.model->releaseLayer(layer);
  };

  const auto calibStart = clock::now();
  GpuMemoryLimit gpuLimit(opts.runtime.device, opts.budget.gpuBytes);
  if (recipe.needsCalibration()) {
    // With a group, `data` is this rank's share.
    CalibrationSet data = guardMemory("calibration", "lower --batch or the recipe's calibration tokens", [&] {
      auto calibrate = [&](const LoadedModel& with) {
        return group != nullptr
                   ? recipeCalibrationShare(with, *recipe.calibration, opts.batch, *group, progress, cancel)
                   : recipeCalibration(with, *recipe.calibration, opts.batch, progress, cancel);
      };
      if (!generates) return calibrate(m);
      LoadedModel whole = loadModel(opts.modelDir, opts.runtime, WeightResidency::Whole, {}, cancel);   // freed once the continuations are generated
      return calibrate(whole);
    });
    result.calibrationTokens = data.countedTokens();
    if (group != nullptr) {
      at::Tensor tokens = at::tensor({static_cast<double>(result.calibrationTokens)}, at::kDouble);
      group->allReduceSum(tokens);
      result.calibrationTokens = static_cast<int64_t>(tokens.item<double>());
    }
    result.calibrationSeconds = since(calibStart);
    const std::vector<std::vector<int64_t>> shapes =
        activationShapes(data, m.config.hiddenSize, opts.batch, opts.runtime.device);
    const CompressMemoryPlan plan = planCompressMemory(m.config, opts.runtime, opts.budget, shapes);
    result.memoryPlan = plan.summary();
    result.activations = activationPlacementName(plan.placement);
    report("memory", 0, plan.summary());
    const auto passStart = clock::now();
    SequentialPassOptions pass;
    pass.batch = opts.batch;
    pass.progress = progress;
    pass.cancel = cancel;
    pass.restoredLayers = restored;
    pass.restoredInput = [&](size_t batch) {
      return resume->restoredInput(batch, shapes.at(batch), m.model->options().device);
    };
    // Each block's inputs saved for a resume (one process: a distributed run does not resume): copied to the host
    // and written with the finished layer beside the pass where the plan has room for the copy, else written
    // batch by batch here.
    if (writer && group == nullptr)
      pass.blockInputs = [&](int64_t layer, const SequentialPassOptions::BlockInputs& inputs) {
        if (!plan.inputsCopied) return resume->writeInputs(layer, inputs);
        waitForLayerWrite();   // one copy on the host at a time, as planned: the previous one is written first
        pendingInputs.clear();
        for (size_t i = 0; i < inputs.shapes.size(); ++i) pendingInputs.push_back(hostCopy(inputs.input(i)));
        pendingInputsLayer = layer;
      };
    pass.layerDone = finishLayer;
    pass.activations = plan.placement;
    pass.scratchDir = !opts.scratchDir.empty() ? opts.scratchDir : writer ? output->staging() : std::string();
    pass.group = group;
    pass.solverThreads = plan.solverThreads;
    pass.stageSeconds = &result.passStageSeconds;
    guardMemory("compression (sequential pass)", "lower --batch, or compress on the CPU", [&] {
      withLayerWrites([&] {
        runSequentialPass(*m.model, data,
                          [&](const std::string& name, const at::Tensor& w, const HessianAccumulator& h) {
                            return onModule(name, w, &h);
                          },
                          pass);
      });
    });
    result.passSeconds = since(passStart);
    if (layerWriteSeconds > 0) result.passStageSeconds["layer files written (beside the pass)"] = layerWriteSeconds;
    // Summed over modules that may run at once: against the "solve" stage's wall time, how much they overlapped.
    for (const auto& [step, seconds] : solveTimings.totals())
      result.passStageSeconds["solve: " + step + " (summed over the modules)"] = seconds;
    if (!writer) {
      result.totalSeconds = since(start);
      return result;
    }
  } else {
    // Magnitude pruning needs no activations: no calibration, no pass, and a finished layer needs no restoring.
    const CompressMemoryPlan plan = planCompressMemory(m.config, opts.runtime, opts.budget, {});
    result.memoryPlan = plan.summary();
    const auto passStart = clock::now();
    guardMemory("compression", "compress on the CPU", [&] {
      withLayerWrites([&] {
        for (int64_t layer = restored; layer < layers; ++layer) {
          if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
          m.model->loadLayer(layer);
          for (auto& [group, linear] : m.model->layerLinears(layer)) {
            at::Tensor w = onModule(linear->name(), linear->weight(), nullptr);
            if (w.defined()) linear->setWeight(w);
          }
          finishAndRelease(layer);
          report("prune", double(layer + 1) / layers, "layer " + std::to_string(layer + 1));
        }
      });
    });
    result.passSeconds = since(passStart);
  }

  // Write everything under a temporary name next to the destination, then rename: nothing half-written is ever
  // visible under the output name.
  const auto writeStart = clock::now();
  const fs::path tmp = output->staging();
  try {
    // The finished layers stay in their staging files until their tensors are written, one at a time.
    std::vector<CompressResume::Layer> finishedLayers;
    std::map<std::string, std::pair<const CompressResume::Layer*, const std::vector<const TensorEntry*>*>> stored;
    std::map<std::string, nlohmann::json> entries;
    std::map<std::string, uint64_t> storedBytes;
    std::map<std::string, ModuleReport> reports;
    finishedLayers.reserve(static_cast<size_t>(layers));
    for (int64_t layer = 0; layer < layers; ++layer) {
      finishedLayers.push_back(resume->readLayer(layer));
      CompressResume::Layer& l = finishedLayers.back();
      for (const auto& [module, tensors] : l.stored) stored[module] = {&l, &tensors};
      for (auto& [module, entry] : l.manifestEntries) entries[module] = std::move(entry);
      for (const auto& [module, bytes] : l.storedBytes) storedBytes[module] = bytes;
      for (ModuleReport& r : l.reports) reports[r.name] = std::move(r);
    }

    std::vector<PlannedTensor> tensors;
    uint64_t linearBits = 0, linearWeights = 0, totalBytes = 0, totalWeights = 0;
    nlohmann::json modules = nlohmann::json::object();
    std::optional<PackedHead> head;
    if (recipe.headQuantize) {
      report("write", 0, "lm_head");
      head = packHead(recipe, source, m.config, opts.runtime);
    }
    for (const TensorEntry* e : source.tensors()) {
      // The packed head replaces the stored one (a tied checkpoint may carry a copy of the embedding too).
      if (head && e->name == "lm_head.weight") continue;
      if (e->name == "lm_head.weight") result.headBytes = e->nbytes;
      totalWeights += static_cast<uint64_t>(e->numel());
      const std::string module = e->name.size() > 7 && e->name.compare(e->name.size() - 7, 7, ".weight") == 0
                                     ? e->name.substr(0, e->name.size() - 7)
                                     : std::string();
      auto it = stored.find(module);
      if (module.empty() || it == stored.end()) {
        tensors.push_back({e->name, scalarType(e->dtype), e->shape, [e, &source] {
                             at::Tensor t = readTensor(*e);
                             source.releasePages(*e);
                             return t;
                           }});
        totalBytes += e->nbytes;
        if (module.find(".layers.") != std::string::npos && e->shape.size() == 2) {
          linearBits += e->nbytes * 8;
          linearWeights += static_cast<uint64_t>(e->numel());
          modules[module] = {{"format", "dense"}, {"bits_per_weight", 8.0 * e->nbytes / e->numel()}, {"sparsity", 0.0},
                             {"shape", e->shape}};
        }
        continue;
      }
      const SafetensorsFile* file = it->second.first->file.get();
      for (const TensorEntry* part : *it->second.second)
        tensors.push_back({part->name, scalarType(part->dtype), part->shape, [part, file] {
                             at::Tensor t = readTensor(*part);
                             file->releasePages(*part);
                             return t;
                           }});
      const uint64_t bytes = storedBytes.at(module);
      totalBytes += bytes;
      linearBits += bytes * 8;
      linearWeights += static_cast<uint64_t>(e->numel());
      modules[module] = entries.at(module);
      result.modules.push_back(reports.at(module));
    }
    if (head) {
      // Not a block linear: in the model's bytes and weights (a tied head becomes weights of its own), not in the
      // linears' bits per weight.
      for (const auto& [name, t] : head->stored)
        tensors.push_back({name, t.scalar_type(), t.sizes().vec(), [t = t] { return t; }});
      totalBytes += head->bytes;
      totalWeights += static_cast<uint64_t>(head->weights);
      result.headBytes = head->bytes;
      modules["lm_head"] = head->manifestEntry;
      result.modules.push_back(head->report);
    }
    result.bytes = totalBytes;
    result.linearBitsPerWeight = linearWeights ? double(linearBits) / linearWeights : 0;
    result.modelBitsPerWeight = totalWeights ? 8.0 * totalBytes / totalWeights : 0;
    writeShardedSafetensors(tmp.string(), tensors, opts.maxShardBytes, progress, cancel);

    for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
                          "special_tokens_map.json"})
      copyIfPresent(fs::path(opts.modelDir) / f, tmp / f);
    if (head && m.config.tieWordEmbeddings) {
      // The head is its own tensor now: every loader (ours, transformers on the dense export) must read it.
      const fs::path configPath = fs::path(opts.modelDir) / "config.json";
      nlohmann::json config = readJsonFile(configPath.string(), kMaxJsonConfigBytes, "a config.json");
      config["tie_word_embeddings"] = false;
      writeFileAtomically((tmp / "config.json").string(), config.dump(2) + "\n");
    }
    result.totalSeconds = since(start);
    result.hostBaseBytes = hostBase;
    result.peakHostBytes = hostPeakResidentBytes();
    result.peakGpuBytes = gpuPeakBytes(opts.runtime.device);
    result.writeSeconds = since(writeStart);
    nlohmann::json manifest = {
        {"format_version", CompressionManifest::kFormatVersion},
        {"producer", std::string("pareto ") + paretoVersion()},
        {kOutputRunKey, output->runId()},
        {"recipe", recipe.document},
        {"source", {{"path", fs::absolute(opts.modelDir).string()}, {"content_hash", checkpointIdentityHash(opts.modelDir)},
                    {"architecture", m.config.architecture}}},
        {"modules", modules},
        {"parameters", totalWeights},
        {"bytes", totalBytes},
        {"linear_bits_per_weight", result.linearBitsPerWeight},
        {"model_bits_per_weight", result.modelBitsPerWeight},
        {"calibration_tokens", result.calibrationTokens},
        {"device", deviceDescription(opts.runtime.device)},
        {"processes", group != nullptr ? group->size() : 1},
        {"dtype", dtypeLabel(opts.runtime.dtype)},
        {"versions", {{"pareto", paretoVersion()}, {"libtorch", TORCH_VERSION}}},
        {"timings", {{"calibration_s", result.calibrationSeconds}, {"pass_s", result.passSeconds},
                     {"pass_stages_s", result.passStageSeconds}, {"write_s", result.writeSeconds},
                     {"total_s", result.totalSeconds}}},
        {"memory", memoryRecord(result, opts.budget)}};
    if (head) manifest["lm_head_bytes"] = head->bytes;
    {
      // Checked like the weights: a manifest cut short by a full disk must fail the job, not be renamed into place.
      const fs::path manifestPath = tmp / "pareto.json";
      std::ofstream manifestFile(manifestPath);
      manifestFile << manifest.dump(2) << "\n";
      manifestFile.close();
      if (!manifestFile) throw Error(fileMessage(manifestPath.string(), "write failed (disk full?)"));
    }
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();

    resume->finish();
    output->commit();   // a failed rename puts the previous result back; checks the files are this run's
  } catch (...) {
    rethrowAsOutOfMemory("writing " + out.string(), "free memory, or compress on the CPU");   // others unchanged
  }
  result.outDir = out.string();
  report("done", 1.0, out.string());
  return result;
}

}  // namespace pareto
