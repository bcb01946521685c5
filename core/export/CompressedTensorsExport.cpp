#include "export/CompressedTensorsExport.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "checkpoint/ModelConfig.h"
#include "checkpoint/ModelPresets.h"
#include "checkpoint/Safetensors.h"
#include "export/ExportFolder.h"
#include "formats/CompressionManifest.h"
#include "formats/PackedModuleIO.h"
#include "model/CheckpointTensors.h"
#include "model/Device.h"
#include "model/TensorIO.h"
#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/Json.h"
#include "util/OutputFolder.h"

namespace pareto {
namespace fs = std::filesystem;
namespace {

constexpr const char* kOutputHead = "lm_head";
const char* const kUseInstead =
    "; compressed-tensors has no scheme vLLM runs for it. `pareto-cli export hf` writes a dense checkpoint, and a "
    "recipe with int4 or int8 groups (or per channel) gives modules this export keeps";

// Unsigned b-bit values [n, k] (k a multiple of 32 / b) packed along k into int32 words, value i of a word in
// bits b·i .. b·i + b − 1.
at::Tensor packWords(const at::Tensor& unsignedValues, int bits) {
  const int64_t perWord = 32 / bits;
  const int64_t n = unsignedValues.size(0), k = unsignedValues.size(1);
  std::vector<int64_t> place(perWord);
  for (int64_t i = 0; i < perWord; ++i) place[i] = int64_t(1) << (bits * i);
  at::Tensor words = (unsignedValues.to(at::kLong).reshape({n, k / perWord, perWord}) * at::tensor(place)).sum(2);
  // Words at or above 2^31 are negative int32s with the same bits.
  words = at::where(words >= (int64_t(1) << 31), words - (int64_t(1) << 32), words);
  return words.to(at::kInt).contiguous();
}

// `t` in `dtype`, counting into `changed` the values the cast does not keep. A finite value that overflows is
// refused: the checkpoint would hold an infinity where the model has a number.
at::Tensor castChecked(const at::Tensor& t, at::ScalarType dtype, const std::string& name, int64_t& changed) {
  at::Tensor out = t.to(dtype).contiguous();
  if (out.scalar_type() == t.scalar_type()) return out;
  const at::Tensor wide = t.to(at::kDouble), back = out.to(at::kDouble);
  if ((at::isfinite(wide) & ~at::isfinite(back)).any().item<bool>())
    throw InputError("tensor " + name + " holds values beyond " + dtypeLabel(dtype) + "'s range; export with "
                     "--dtype source or float32");
  changed += at::ne(wide, back).sum().item<int64_t>();
  return out;
}

bool isFusedPartner(const std::string& a, const std::string& b) {
  auto parentOf = [](const std::string& m) { return m.substr(0, m.rfind('.')); };
  auto kind = [](const std::string& m) -> int {
    const std::string leaf = m.substr(m.rfind('.') + 1);
    if (leaf == "q_proj" || leaf == "k_proj" || leaf == "v_proj") return 1;
    if (leaf == "gate_proj" || leaf == "up_proj") return 2;
    return 0;
  };
  return parentOf(a) == parentOf(b) && kind(a) != 0 && kind(a) == kind(b);
}

}  // namespace

nlohmann::json CompressedTensorsScheme::weightsArgs() const {
  return {{"num_bits", bits},
          {"type", "int"},
          {"symmetric", symmetric},
          {"strategy", groupSize > 0 ? "group" : "channel"},
          {"group_size", groupSize > 0 ? nlohmann::json(groupSize) : nlohmann::json(nullptr)},
          {"dynamic", false},
          {"actorder", actOrder ? nlohmann::json("weight") : nlohmann::json(nullptr)}};
}

std::string CompressedTensorsScheme::label() const {
  std::string s = "int" + std::to_string(bits) + (symmetric ? " sym" : " asym") +
                  (groupSize > 0 ? " group " + std::to_string(groupSize) : std::string(" channel"));
  return actOrder ? s + " actorder weight" : s;
}

bool CompressedTensorsScheme::operator<(const CompressedTensorsScheme& o) const {
  return std::tie(bits, symmetric, groupSize, actOrder) < std::tie(o.bits, o.symmetric, o.groupSize, o.actOrder);
}

CompressedTensorsScheme compressedTensorsScheme(const WeightFormat& format, bool actOrder, const std::string& module) {
  const std::string what = "module " + module + " is stored as " + format.name();
  if (format.isBitmask() && format.isQuantized())
    throw InputError(what + " (a sparsity mask over quantized values)" + kUseInstead);
  if (format.values == WeightFormat::Values::Spqr) throw InputError(what + " (SpQR)" + kUseInstead);
  if (format.isGguf())
    throw InputError(what + " (llama.cpp's blocks: `pareto-cli export gguf` writes them as they are)" + kUseInstead);
  if (format.values != WeightFormat::Values::Int) throw InputError(what + ", which is not quantized");
  if (format.bits != 4 && format.bits != 8)
    throw InputError(what + " (" + std::to_string(format.bits) + "-bit codes; vLLM's pack-quantized kernels take 4 "
                     "and 8 bits)" + kUseInstead);
  CompressedTensorsScheme s;
  s.bits = format.bits;
  s.symmetric = format.symmetric;
  s.groupSize = format.groupSize > 0 ? format.groupSize : 0;   // per tensor is written per channel
  s.actOrder = actOrder;
  return s;
}

PackQuantizedTensors packQuantized(const QuantGroupWeight& q, at::ScalarType scaleDtype, const std::string& module) {
  const std::string who = "module " + module + ": ";
  if (q.bits != 4 && q.bits != 8)
    throw InputError(who + std::to_string(q.bits) + "-bit codes; pack-quantized is written for 4 and 8 bits");
  const int64_t perWord = 32 / q.bits;
  if (q.cols % perWord != 0)
    throw InputError(who + std::to_string(q.cols) + " input columns are not whole int32 words of " +
                     std::to_string(perWord) + " codes, as vLLM's kernels read them");
  const int64_t offset = int64_t(1) << (q.bits - 1);
  // Pareto's codes: signed int8 (symmetric) or the unsigned code (asymmetric); compressed-tensors stores both
  // unsigned, the signed ones offset by 2^(b−1).
  const at::Tensor codes = q.unpackCodes().to(at::kCPU).to(at::kLong);
  PackQuantizedTensors out;
  out.weightPacked = packWords(q.symmetric ? codes + offset : codes, q.bits);

  // A per-tensor grid is a per-channel one with every row's scale (and zero) the same.
  const int64_t groups = q.scales.size(1);
  out.weightScale = q.scales.to(at::kCPU).expand({q.rows, groups}).to(scaleDtype).contiguous();
  if (!q.symmetric) {
    const at::Tensor zeros = q.zeros.to(at::kCPU).expand({q.rows, groups}).to(at::kLong);
    if (zeros.max().item<int64_t>() >= (int64_t(1) << q.bits))
      throw InputError(who + "a zero point lies off the " + std::to_string(q.bits) + "-bit grid");
    // Packed along the rows: transpose, pad the rows to whole words with zeros, pack, transpose back.
    const int64_t paddedRows = (q.rows + perWord - 1) / perWord * perWord;
    const at::Tensor padded = at::constant_pad_nd(zeros.t(), {0, paddedRows - q.rows}, 0);
    out.weightZeroPoint = packWords(padded, q.bits).t().contiguous();
  }
  out.weightShape = at::tensor(std::vector<int32_t>{static_cast<int32_t>(q.rows), static_cast<int32_t>(q.cols)},
                               at::kInt);
  return out;
}

CompressedTensorsExportReport exportCompressedTensors(const CompressedTensorsExportOptions& opts,
                                                      const ProgressCallback& progress, const CancelToken* cancel) {
  const auto start = std::chrono::steady_clock::now();
  auto report = [&](const std::string& stage, double fraction, const std::string& msg) {
    if (progress) progress({stage, fraction, msg});
  };
  auto checkCancel = [&] {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
  };

  if (!fs::is_directory(opts.modelDir))
    throw InputError(fileMessage(opts.modelDir, "not a model folder (no such directory)"));
  if (opts.outDir.empty()) throw InputError("no output folder given");
  const fs::path src = fs::weakly_canonical(fs::absolute(opts.modelDir));
  const std::optional<CompressionManifest> manifest = CompressionManifest::readFrom(src.string());
  if (!manifest)
    throw InputError(fileMessage(opts.modelDir, "has no pareto.json: not a folder written by compress (a dense "
                                                "checkpoint has nothing to pack; vLLM serves it as it is)"));
  const std::string manifestPath = (src / kCompressManifestFile).string();
  const std::string configPath = (src / "config.json").string();
  if (!fs::exists(configPath)) throw InputError(fileMessage(opts.modelDir, "no config.json in this folder"));
  nlohmann::json configJson = readJsonFile(configPath);
  const ModelConfig config = ModelConfig::fromFile(configPath);
  Checkpoint ckpt = Checkpoint::open(src.string());

  // The written dtype: float16 unless asked (see the header: it keeps Pareto's fp16 scales exact in vLLM).
  c10::ScalarType sourceDtype = at::kFloat;
  bool sourceKnown = false;
  for (const char* key : {"torch_dtype", "dtype"})
    if (!sourceKnown && configJson.contains(key) && configJson[key].is_string()) {
      try {
        sourceDtype = parseDtype(configJson[key].get<std::string>());
        sourceKnown = true;
      } catch (const InputError& e) {
        throw InputError(fileMessage(configPath, std::string(key) + ": " + e.what()));
      }
    }
  if (!sourceKnown)
    if (const TensorEntry* e = ckpt.find("model.embed_tokens.weight"); e != nullptr && isFloating(e->dtype))
      sourceDtype = scalarType(e->dtype);
  c10::ScalarType dtype = sourceDtype;
  if (opts.dtype != "source") {
    try {
      dtype = parseDtype(opts.dtype);
    } catch (const InputError& e) {
      throw InputError(std::string("--dtype: ") + e.what() + " (or \"source\")");
    }
    if (!at::isFloatingType(dtype))
      throw InputError("--dtype " + opts.dtype + ": the checkpoint's dtype must be float16, bfloat16 or float32");
  }

  // Every linear of the model, and what becomes of it: packed (its scheme) or written dense and ignored. All
  // refusals come here, before anything is read or written.
  struct Plan {
    std::string module;
    std::vector<int64_t> shape;
    const ModuleFormat* format = nullptr;   // nullptr: dense in the checkpoint
    std::optional<CompressedTensorsScheme> scheme;
  };
  std::vector<Plan> plans;
  std::set<std::string> linears;
  CompressedTensorsExportReport result;
  for (const ConfigTensor& t : checkpointTensors(config)) {
    if (t.shape.size() != 2 || t.name == "model.embed_tokens.weight") continue;
    Plan p;
    p.module = t.name.substr(0, t.name.size() - std::string(".weight").size());
    p.shape = t.shape;
    p.format = manifest->find(p.module);
    if (p.format != nullptr && p.format->format == "dense") p.format = nullptr;
    if (p.format != nullptr && p.format->weight.isQuantized()) {
      if (p.module == kOutputHead) {
        result.notes.push_back("lm_head (" + p.format->format + ") is written dense, dequantized: vLLM does not "
                               "quantize the output head in this scheme");
      } else {
        try {
          p.scheme = compressedTensorsScheme(p.format->weight, p.format->actOrder, p.module);
        } catch (const InputError& e) {
          throw InputError(fileMessage(manifestPath, e.what()));
        }
      }
    }
    linears.insert(p.module);
    plans.push_back(std::move(p));
  }
  for (const auto& [module, f] : manifest->modules)
    if (f.format != "dense" && !linears.count(module))
      throw InputError(fileMessage(manifestPath, "packed module " + module + " is not a linear of the model "
                                                 "config.json describes"));

  OutputClaim claim;
  claim.path = opts.outDir;
  claim.overwrite = opts.overwrite;
  claim.inputs = {src.string()};
  claim.job = "export compressed-tensors";
  OutputFolder output(claim);
  const fs::path out = output.target();
  result.outDir = out.string();
  result.dtype = dtypeLabel(dtype);

  // Config groups: one per scheme, in a stable order.
  std::map<CompressedTensorsScheme, std::vector<std::string>> groups;
  std::vector<std::string> ignore;
  for (const Plan& p : plans) {
    if (p.scheme)
      groups[*p.scheme].push_back(p.module);
    else
      ignore.push_back(p.module);
  }
  if (std::find(ignore.begin(), ignore.end(), kOutputHead) == ignore.end()) ignore.push_back(kOutputHead);

  // vLLM runs q/k/v and gate/up as one fused linear and refuses a checkpoint whose parts differ.
  std::map<std::string, std::string> schemeOf;
  for (const Plan& p : plans) schemeOf[p.module] = p.scheme ? p.scheme->label() : "dense";
  for (const Plan& a : plans)
    for (const Plan& b : plans)
      if (a.module < b.module && isFusedPartner(a.module, b.module) && schemeOf[a.module] != schemeOf[b.module])
        result.notes.push_back(a.module + " (" + schemeOf[a.module] + ") and " + b.module + " (" +
                               schemeOf[b.module] + ") differ: vLLM fuses them into one linear and will refuse this "
                               "checkpoint");
  for (const auto& [scheme, modules] : groups) {
    if (scheme.groupSize > 0 && scheme.groupSize != 32 && scheme.groupSize != 64 && scheme.groupSize != 128)
      result.notes.push_back(scheme.label() + ": vLLM's Marlin kernels take groups of 32, 64 or 128 (or per "
                             "channel); other kernels may not run this group size");
  }

  report("load", 0, src.string());
  int64_t denseChanged = 0;
  NamedTensors tensors;
  tensors.reserve(ckpt.tensors().size());
  // Dense tensors as stored, cast to the written dtype; packed modules are read through their format below.
  for (const TensorEntry* e : ckpt.tensors()) {
    checkCancel();
    if (!packedModuleOf(e->name).empty()) continue;
    const std::string module = e->name.size() > 7 ? e->name.substr(0, e->name.size() - 7) : "";
    if (const ModuleFormat* f = manifest->find(module);
        f != nullptr && f->format != "dense" && e->name == module + ".weight")
      throw InputError(fileMessage(e->file, "holds a dense " + e->name + ", but pareto.json stores " + module +
                                                " as " + f->format));
    at::Tensor t = readTensor(*e);
    if (isFloating(e->dtype)) t = castChecked(t, dtype, e->name, denseChanged);
    tensors.emplace_back(e->name, std::move(t));
  }

  const CheckpointTensors parts(ckpt);
  int64_t scalesChanged = 0, scalesTotal = 0, done = 0;
  for (const Plan& p : plans) {
    ++done;
    if (p.format == nullptr) continue;
    checkCancel();
    PackedModuleRecord record;
    record.actOrder = p.format->actOrder;
    record.spqrScaleGroup = p.format->scaleGroup;
    const PackedModule packed = readPackedModule(parts, p.module, p.format->weight, p.shape.at(0), p.shape.at(1),
                                                 record);
    if (!p.scheme) {
      // Pruned-only (zeros in place) or the output head: dense, exactly as Pareto's loader unpacks it.
      tensors.emplace_back(p.module + ".weight", castChecked(packed.unpack(), dtype, p.module + ".weight",
                                                             denseChanged));
      ++result.denseModules;
      continue;
    }
    PackQuantizedTensors ct;
    try {
      ct = packQuantized(*packed.quant, dtype, p.module);
    } catch (const InputError& e) {
      throw InputError(fileMessage(parts.location(), e.what()));
    }
    const at::Tensor exact = packed.quant->scales.to(at::kFloat).expand_as(ct.weightScale);
    scalesChanged += at::ne(ct.weightScale.to(at::kFloat), exact).sum().item<int64_t>();
    scalesTotal += ct.weightScale.numel();
    tensors.emplace_back(p.module + ".weight_packed", ct.weightPacked);
    tensors.emplace_back(p.module + ".weight_scale", ct.weightScale);
    if (ct.weightZeroPoint.defined()) tensors.emplace_back(p.module + ".weight_zero_point", ct.weightZeroPoint);
    tensors.emplace_back(p.module + ".weight_shape", ct.weightShape);
    ++result.quantizedModules;
    report("pack", double(done) / double(plans.size()), p.module);
  }
  for (const Plan& p : plans)
    if (p.format == nullptr && !p.scheme) ++result.denseModules;
  if (denseChanged > 0)
    result.notes.push_back(std::to_string(denseChanged) + " values of the dense tensors (embedding, norms, dense "
                           "linears) are not exact in " + dtypeLabel(dtype) + " and were rounded; --dtype source "
                           "keeps them");
  if (scalesChanged > 0)
    result.notes.push_back(std::to_string(scalesChanged) + " of " + std::to_string(scalesTotal) + " scales changed "
                           "when rounded to " + dtypeLabel(dtype) + " (vLLM computes with the checkpoint's dtype; "
                           "float16 keeps Pareto's scales exact)");
  if (std::any_of(plans.begin(), plans.end(), [](const Plan& p) {
        return p.scheme && p.format->weight.groupSize == WeightFormat::kPerTensor;
      }))
    result.notes.push_back("per-tensor grids are written per channel (vLLM's scheme has no per-tensor int weights): "
                           "the same scale in every row");

  nlohmann::json configGroups = nlohmann::json::object();
  int index = 0;
  for (const auto& [scheme, modules] : groups) {
    const std::string name = "group_" + std::to_string(index++);
    configGroups[name] = {{"targets", groups.size() == 1 ? nlohmann::json{"Linear"} : nlohmann::json(modules)},
                          {"weights", scheme.weightsArgs()},
                          {"input_activations", nullptr},
                          {"output_activations", nullptr}};
    result.schemes.push_back(name + ": " + scheme.label() + ", " + std::to_string(modules.size()) + " module" +
                             (modules.size() == 1 ? "" : "s"));
  }
  result.ignore = ignore;
  if (groups.empty())
    result.notes.push_back("no module is quantized: the checkpoint is dense (export hf writes the same weights)");

  result.tensors = static_cast<int64_t>(tensors.size());
  for (const auto& [name, t] : tensors) result.bytes += static_cast<uint64_t>(t.numel()) * t.element_size();

  const fs::path tmp = output.staging();
  report("write", 0.5, "model.safetensors");
  checkCancel();
  writeSafetensors((tmp / "model.safetensors").string(), tensors, {{"format", "pt"}});
  tensors.clear();
  checkCancel();

  // transformers and vLLM load the dense tensors and the scales in the config's dtype.
  setConfigDtype(configJson, dtypeLabel(dtype));
  configJson["quantization_config"] = {{"quant_method", "compressed-tensors"},
                                       {"format", "pack-quantized"},
                                       {"quantization_status", "compressed"},
                                       {"config_groups", configGroups},
                                       {"ignore", ignore},
                                       {"kv_cache_scheme", nullptr}};
  writeFileAtomically((tmp / "config.json").string(), configJson.dump(2) + "\n");
  copyUnchangedFiles(src.string(), tmp.string());
  writeExportRecord(tmp.string(), output.runId(), "compressed-tensors", src.string(), dtypeLabel(dtype));
  report("write", 0.9, "files");
  checkCancel();
  output.commit();

  result.files = folderFileNames(out.string());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report("write", 1.0, out.string());
  return result;
}

}  // namespace pareto
