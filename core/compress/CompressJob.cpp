#include "compress/CompressJob.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include "calib/DecodeCalibration.h"
#include "calib/SequentialPass.h"
#include "calib/TextCalibration.h"
#include "checkpoint/Safetensors.h"
#include "compress/CompressResume.h"
#include "compress/GgufQuantize.h"
#include "compress/Gptq.h"
#include "compress/MagnitudePrune.h"
#include "compress/ModulePlan.h"
#include "compress/QuantGrid.h"
#include "compress/SparseGpt.h"
#include "compress/Spqr.h"
#include "compress/WandaPrune.h"
#include "formats/BitmaskNMWeight.h"
#include "formats/CompressionManifest.h"
#include "formats/PackedModuleIO.h"
#include "formats/QuantGroupWeight.h"
#include "formats/SpqrWeight.h"
#include "model/LoadedModel.h"
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

// What the pass decided for one module, kept until the folder is written.
struct ModuleOutcome {
  ModuleReport report;
  WeightFormat format;  // the plan's stored format
  at::Tensor weight;  // the solvers' result (SparseGPT also updates the weights it keeps)
  at::Tensor mask;    // bool, for packing; undefined when not pruned
  std::optional<SparsityPattern> pattern;
  std::optional<QuantizeSpec> quant;
  QuantResult codes;  // quantized modules: of the whole weight, or of the bitmask's kept values
  at::Tensor permutation;  // GPTQ act-order: int64 [in], the order the columns were quantized in
  std::optional<SpqrResult> spqr;  // of the whole weight, or of the bitmask's kept values
  at::Tensor ggufBlocks;   // gguf-*: uint8 [rows, bytes of a row], ggml's blocks
  std::string note;        // the plan's (a GGUF fallback)
};

CalibrationSet calibrate(const LoadedModel& m, const CalibrationSpec& spec, const ProgressCallback& progress,
                         const CancelToken* cancel, int64_t batch) {
  if (spec.source == "text") {
    TextCalibrationOptions o;
    o.window = spec.window;
    o.tokens = spec.tokens;
    o.seed = spec.seed;
    return textCalibration(*m.tokenizer, spec.file, o);
  }
  DecodeCalibrationOptions o;
  o.tokens = spec.tokens;
  o.maxNewTokens = spec.maxNewTokens;
  o.seed = spec.seed;
  o.batch = batch;
  o.eosTokenIds = m.eosTokenIds;
  o.bosTokenId = m.config.bosTokenId;
  if (spec.fromContinuations)
    return continuationCalibration(readContinuationsFile(spec.file, m.config.vocabSize), o, spec.file);
  return decodeCalibration(*m.model, *m.tokenizer, readPrompts(spec.file), o, progress, cancel);
}

// The code that dequantizes to exactly 0 in every position (0 for symmetric grids, the zero point otherwise).
at::Tensor zeroCodes(const QuantResult& q, int64_t colsPerGroup) {
  if (!q.zeros.defined()) return at::zeros_like(q.codes);
  return q.zeros.repeat_interleave(colsPerGroup, 1).expand_as(q.codes).to(q.codes.scalar_type());
}

// `keep`: after pruning, the weights to quantize (the rest stay exactly 0); `grid` may differ from spec.grid
// (N:M: the group size in original columns).
GptqResult quantizeWeight(const std::string& name, const at::Tensor& weight, const HessianAccumulator* hessian,
                          const QuantizeSpec& spec, const QuantSpec& grid, const at::Tensor& keep = {}) {
  if (spec.method == "rtn") return {rtnQuantize(weight, grid, name), {}, {}};
  if (spec.method == "gptq") {
    GptqOptions o;
    o.damp = spec.damp;
    o.blockSize = spec.block;
    o.actOrder = spec.actOrder;
    o.staticGroups = spec.staticGroups;
    o.keep = keep;
    return gptqQuantize(weight, hessian->sum(), grid, o, name);
  }
  throw InputError(name + ": quantization method \"" + spec.method + "\" is not available in this version of Pareto");
}

SpqrResult spqrWeight(const std::string& name, const at::Tensor& weight, const HessianAccumulator* hessian,
                      const QuantizeSpec& spec, int64_t groupSize, const at::Tensor& keep = {}) {
  SpqrOptions o;
  o.bits = spec.grid.bits;
  o.groupSize = groupSize;
  o.scaleBits = spec.scaleBits;
  o.outlierRatio = spec.outlierRatio;
  o.outlierThreshold = spec.outlierThreshold;
  o.damp = spec.damp;
  o.blockSize = spec.block;
  o.keep = keep;
  return spqrQuantize(weight, hessian->sum(), o, name);
}

ModuleOutcome pruneModule(const std::string& name, const at::Tensor& weight, const HessianAccumulator* hessian,
                          const PruneSpec& spec) {
  const auto t0 = clock::now();
  ModuleOutcome out;
  out.pattern = spec.pattern;
  out.report.name = name;
  out.report.method = spec.method;
  out.report.pattern = spec.pattern.label();
  PruneResult r;
  if (spec.method == "magnitude") {
    r = magnitudePrune(weight, spec.pattern, name);
  } else if (spec.method == "wanda") {
    r = wandaPrune(weight, wandaInputNorms(hessian->sum()), spec.pattern, name);
  } else {
    SparseGptOptions o;
    o.damp = spec.damp;
    o.blockSize = spec.block;
    SparseGptResult s = sparseGptPrune(weight, hessian->sum(), spec.pattern, o, name);
    r = s.pruned;
    out.report.dampUsed = s.report.damp;
    out.report.dampRetries = s.report.dampRetries;
  }
  out.weight = r.weight;
  out.mask = r.mask;
  out.report.seconds = since(t0);
  out.report.sparsity = 1.0 - r.mask.to(at::kFloat).mean().item<double>();
  out.report.bitsPerWeight = 0;   // known once the folder is written (it depends on the stored dtype)
  return out;
}

// Runs the plan's solvers on one module; the stored format is the plan's.
ModuleOutcome compressModule(const ModulePlan& plan, const at::Tensor& weight, const HessianAccumulator* hessian) {
  const auto t0 = clock::now();
  const std::string& name = plan.module;
  const std::optional<PruneSpec>& prune = plan.prune;
  const std::optional<QuantizeSpec>& quant = plan.quant;
  ModuleOutcome out = prune ? pruneModule(name, weight, hessian, *prune) : ModuleOutcome{};
  out.report.name = name;
  out.report.method = plan.method();
  out.report.pattern = plan.pattern();
  out.format = plan.format;
  out.report.format = plan.format.name();
  if (!prune) out.weight = weight;
  out.note = plan.note;
  if (quant && plan.format.isGguf()) {
    out.quant = quant;
    GgufQuantResult r;
    if (quant->method == "rtn") {
      r = ggufRtnQuantize(out.weight, plan.format.ggufType, name);
    } else {
      GgufGptqOptions o;
      o.damp = quant->damp;
      o.blockSize = quant->block;
      r = ggufGptqQuantize(out.weight, hessian->sum(), plan.format.ggufType, o, name).quant;
    }
    out.ggufBlocks = r.blocks;
    out.weight = r.dequantized;
  } else if (quant) {
    out.quant = quant;
    if (plan.format.isBitmask()) {
      // Prune then quantize the survivors: the packed codes hold the kept values in column order, which is what
      // the bitmask + int kernel reads, and the grids are groups of those kept values.
      if (quant->method == "rtn") {
        BitmaskNMWeight packed = BitmaskNMWeight::pack(out.weight, out.mask, out.pattern->n(), out.pattern->m());
        out.codes = rtnQuantize(packed.values, quant->grid, name);
        packed.values = out.codes.dequantized;
        out.weight = packed.unpack();
      } else if (quant->method == "gptq") {
        // GPTQ over the kept weights only (pruned ones stay 0, the mask is kept exactly).
        GptqResult r = quantizeWeight(name, out.weight, hessian, *quant, plan.solverGrid(), out.mask);
        out.weight = r.quant.dequantized;
        out.codes = quantKeptColumns(r.quant, out.mask);
        out.permutation = r.permutation;
      } else {
        SpqrResult r = spqrWeight(name, out.weight, hessian, *quant, plan.solverGrid().groupSize, out.mask);
        out.weight = r.dequantized;
        out.spqr = spqrKeptColumns(r, out.mask);
      }
    } else if (quant->method == "spqr") {
      // Unstructured pruning first: the pruned weights get their group's zero code (exactly 0).
      out.spqr = spqrWeight(name, out.weight, hessian, *quant, quant->grid.groupSize, out.mask);
      out.weight = out.spqr->dequantized;
    } else {
      GptqResult r = quantizeWeight(name, out.weight, hessian, *quant, quant->grid,
                                    quant->method == "gptq" ? out.mask : at::Tensor());
      out.codes = r.quant;
      out.permutation = r.permutation;
      if (out.mask.defined() && quant->method == "rtn") {
        // RTN has no error propagation: unstructured zeros (0 on every grid) are simply given the zero code.
        const at::Tensor zero = zeroCodes(out.codes, quant->grid.columnsPerGroup(weight.size(1)));
        out.codes.codes = at::where(out.mask, out.codes.codes, zero);
        out.codes.dequantized = out.codes.dequantized * out.mask.to(out.codes.dequantized.scalar_type());
      }
      out.weight = out.codes.dequantized;
    }
  }
  out.report.seconds = since(t0);
  // Pruned: the fraction removed; quantized only: the weights that landed on a zero code.
  const at::Tensor nonzero = out.mask.defined() ? out.mask : (out.weight != 0);
  out.report.sparsity = 1.0 - nonzero.to(at::kFloat).mean().item<double>();
  return out;
}

// The module in its stored format; `weight`: the solvers' result on the CPU in the checkpoint's dtype.
PackedModule packOutcome(const ModuleOutcome& o, const at::Tensor& weight) {
  PackedModule p;
  p.format = o.format;
  p.rows = weight.size(0);
  p.cols = weight.size(1);
  if (o.format.isDense()) p.dense = weight;
  if (o.format.isBitmask()) {
    p.bitmask = BitmaskNMWeight::pack(weight, o.mask.to(at::kCPU), o.pattern->n(), o.pattern->m());
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
  // The destination is checked and locked before any work: a refusal costs nothing, and no second run can
  // write it meanwhile.
  OutputClaim claim;
  claim.path = opts.outDir;
  claim.overwrite = opts.overwrite;
  claim.resume = opts.resume;
  claim.inputs = {opts.modelDir, recipe.path};
  if (recipe.calibration) claim.inputs.push_back(recipe.calibration->file);
  claim.job = "compress";
  OutputFolder output(claim);
  const fs::path out = output.target();

  auto report = [&](const std::string& stage, double fraction, const std::string& msg) {
    if (progress) progress({stage, fraction, msg});
  };
  report("load", 0, opts.modelDir);
  LoadedModel m = loadModel(opts.modelDir, opts.runtime);
  if (CompressionManifest::readFrom(opts.modelDir))
    throw InputError(fileMessage(opts.modelDir, "is already a compressed folder; compress the dense source model"));
  const Checkpoint source = Checkpoint::open(opts.modelDir);
  const int64_t layers = m.model->numLayers();

  // Each finished layer goes into the staging folder at once: an interrupted run keeps it for --resume, and
  // the whole model's compressed modules are never held in memory together.
  const nlohmann::json identity = {{"source", checkpointIdentityHash(opts.modelDir)},
                                   {"recipe", recipe.document},
                                   {"device", deviceDescription(opts.runtime.device)},
                                   {"dtype", dtypeLabel(opts.runtime.dtype)},
                                   {"batch", opts.batch},
                                   {"pareto", paretoVersion()}};
  CompressResume resume(output.staging(), identity, layers);
  const int64_t restored = resume.start(output.resumed());
  if (restored > 0) report("resume", double(restored) / layers, std::to_string(restored) + " of " +
                                                                   std::to_string(layers) + " layers already done");

  CompressReport result;
  std::map<std::string, ModuleOutcome> outcomes;   // the modules of the layer in progress
  auto onModule = [&](const std::string& name, const at::Tensor& weight, const HessianAccumulator* h) -> at::Tensor {
    const ModulePlan plan = planModule(recipe, name, weight.size(0), weight.size(1));
    if (!plan.touched()) return {};
    ModuleOutcome o = compressModule(plan, weight, h);
    at::Tensor pruned = o.weight;
    o.weight = at::Tensor();   // the model holds it from here on
    outcomes[name] = std::move(o);
    return pruned;
  };
  auto finishLayer = [&](int64_t layer) {
    std::vector<FinishedModule> finished;
    std::vector<ModuleReport> reports;
    for (const auto& [group, linear] : m.model->layerLinears(layer)) {
      const auto it = outcomes.find(linear->name());
      if (it == outcomes.end()) continue;
      const TensorEntry& e = source.at(linear->name() + ".weight");
      // Stored in the source dtype: the pass computes in the runtime dtype, the file keeps the checkpoint's.
      const at::Tensor w = linear->weight().to(at::kCPU, scalarType(e.dtype)).contiguous();
      const PackedModule packed = packOutcome(it->second, w);
      FinishedModule f;
      f.module = linear->name();
      f.stored = writePackedModule(f.module, packed);
      f.storedBytes = static_cast<uint64_t>(packed.storedBytes());
      f.manifestEntry = manifestEntry(it->second, packed, e);
      f.heldWeight = linear->weight().to(at::kCPU).contiguous();
      reports.push_back(it->second.report);
      finished.push_back(std::move(f));
      outcomes.erase(it);
    }
    resume.writeLayer(layer, finished, reports);
    if (opts.keepFinishedLayers) output.keepStagingOnFailure();
  };
  auto restoreLayer = [&](int64_t layer) {
    const std::map<std::string, at::Tensor> held = resume.heldWeights(layer);
    for (const auto& [group, linear] : m.model->layerLinears(layer)) {
      const auto it = held.find(linear->name());
      if (it != held.end()) linear->setWeight(it->second.to(m.model->options().device));
    }
  };

  const auto calibStart = clock::now();
  if (recipe.needsCalibration()) {
    CalibrationSet data = guardMemory("calibration", "lower --batch or the recipe's calibration tokens", [&] {
      return calibrate(m, *recipe.calibration, progress, cancel, opts.batch);
    });
    result.calibrationTokens = data.countedTokens();
    result.calibrationSeconds = since(calibStart);
    const auto passStart = clock::now();
    SequentialPassOptions pass;
    pass.batch = opts.batch;
    pass.progress = progress;
    pass.cancel = cancel;
    pass.restoredLayers = restored;
    pass.restoreLayer = restoreLayer;
    pass.layerDone = finishLayer;
    guardMemory("compression (sequential pass)", "lower --batch, or compress on the CPU", [&] {
      runSequentialPass(*m.model, data,
                        [&](const std::string& name, const at::Tensor& w, const HessianAccumulator& h) {
                          return onModule(name, w, &h);
                        },
                        pass);
    });
    result.passSeconds = since(passStart);
  } else {
    // Magnitude pruning needs no activations: no calibration, no pass, and a finished layer needs no restoring.
    const auto passStart = clock::now();
    guardMemory("compression", "compress on the CPU", [&] {
      for (int64_t layer = restored; layer < layers; ++layer) {
        if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
        for (auto& [group, linear] : m.model->layerLinears(layer)) {
          at::Tensor w = onModule(linear->name(), linear->weight(), nullptr);
          if (w.defined()) linear->setWeight(w);
        }
        finishLayer(layer);
        report("prune", double(layer + 1) / layers, "layer " + std::to_string(layer + 1));
      }
    });
    result.passSeconds = since(passStart);
  }

  // Write everything under a temporary name next to the destination, then rename: nothing half-written is ever
  // visible under the output name.
  const auto writeStart = clock::now();
  const fs::path tmp = output.staging();
  try {
    std::map<std::string, std::vector<std::pair<std::string, at::Tensor>>> stored;   // by module
    std::map<std::string, nlohmann::json> entries;
    std::map<std::string, uint64_t> storedBytes;
    std::map<std::string, ModuleReport> reports;
    for (int64_t layer = 0; layer < layers; ++layer) {
      CompressResume::Layer l = resume.readLayer(layer);
      for (auto& [module, tensors] : l.stored) stored[module] = std::move(tensors);
      for (auto& [module, entry] : l.manifestEntries) entries[module] = std::move(entry);
      for (const auto& [module, bytes] : l.storedBytes) storedBytes[module] = bytes;
      for (ModuleReport& r : l.reports) reports[r.name] = std::move(r);
    }

    NamedTensors tensors;
    uint64_t linearBits = 0, linearWeights = 0, totalBytes = 0, totalWeights = 0;
    nlohmann::json modules = nlohmann::json::object();
    for (const TensorEntry* e : source.tensors()) {
      if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
      totalWeights += static_cast<uint64_t>(e->numel());
      const std::string module = e->name.size() > 7 && e->name.compare(e->name.size() - 7, 7, ".weight") == 0
                                     ? e->name.substr(0, e->name.size() - 7)
                                     : std::string();
      auto it = stored.find(module);
      if (module.empty() || it == stored.end()) {
        tensors.emplace_back(e->name, readTensor(*e));
        totalBytes += e->nbytes;
        if (module.find(".layers.") != std::string::npos && e->shape.size() == 2) {
          linearBits += e->nbytes * 8;
          linearWeights += static_cast<uint64_t>(e->numel());
          modules[module] = {{"format", "dense"}, {"bits_per_weight", 8.0 * e->nbytes / e->numel()}, {"sparsity", 0.0},
                             {"shape", e->shape}};
        }
        continue;
      }
      for (auto& named : it->second) tensors.push_back(std::move(named));
      const uint64_t bytes = storedBytes.at(module);
      totalBytes += bytes;
      linearBits += bytes * 8;
      linearWeights += static_cast<uint64_t>(e->numel());
      modules[module] = entries.at(module);
      result.modules.push_back(reports.at(module));
    }
    result.bytes = totalBytes;
    result.linearBitsPerWeight = linearWeights ? double(linearBits) / linearWeights : 0;
    result.modelBitsPerWeight = totalWeights ? 8.0 * totalBytes / totalWeights : 0;
    report("write", 0.5, "model.safetensors");
    writeSafetensors((tmp / "model.safetensors").string(), tensors,
                     {{"format", "pt"}, {"producer", "pareto"}});

    for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
                          "special_tokens_map.json"})
      copyIfPresent(fs::path(opts.modelDir) / f, tmp / f);
    result.totalSeconds = since(start);
    result.writeSeconds = since(writeStart);
    nlohmann::json manifest = {
        {"format_version", CompressionManifest::kFormatVersion},
        {"producer", std::string("pareto ") + paretoVersion()},
        {kOutputRunKey, output.runId()},
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
        {"dtype", dtypeLabel(opts.runtime.dtype)},
        {"versions", {{"pareto", paretoVersion()}, {"libtorch", TORCH_VERSION}}},
        {"timings", {{"calibration_s", result.calibrationSeconds}, {"pass_s", result.passSeconds},
                     {"write_s", result.writeSeconds}, {"total_s", result.totalSeconds}}}};
    {
      // Checked like the weights: a manifest cut short by a full disk must fail the job, not be renamed into place.
      const fs::path manifestPath = tmp / "pareto.json";
      std::ofstream manifestFile(manifestPath);
      manifestFile << manifest.dump(2) << "\n";
      manifestFile.close();
      if (!manifestFile) throw Error(fileMessage(manifestPath.string(), "write failed (disk full?)"));
    }
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();

    resume.finish();
    output.commit();   // a failed rename puts the previous result back; checks the files are this run's
  } catch (...) {
    rethrowAsOutOfMemory("writing " + out.string(), "free memory, or compress on the CPU");   // others unchanged
  }
  result.outDir = out.string();
  report("done", 1.0, out.string());
  return result;
}

}  // namespace pareto
