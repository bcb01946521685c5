#include "export/HfExport.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "formats/PackedModuleIO.h"
#include "model/CompressionManifest.h"
#include "model/LlamaModel.h"
#include "model/ModelConfig.h"
#include "model/Safetensors.h"
#include "model/TensorIO.h"
#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/Json.h"
#include "util/OutputFolder.h"
#include "util/Version.h"

namespace pareto {
namespace fs = std::filesystem;
namespace {

// The dtype the source checkpoint was saved in: config.json's "torch_dtype" (transformers < 4.56 spelling) or
// "dtype" (newer), else the dtype of the stored embedding, which compress keeps as the checkpoint had it.
c10::ScalarType sourceDtype(const nlohmann::json& config, const std::string& configPath, const Checkpoint& ckpt) {
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!config.contains(key) || !config[key].is_string()) continue;
    try {
      return parseDtype(config[key].get<std::string>());
    } catch (const InputError& e) {
      throw InputError(fileMessage(configPath, std::string(key) + ": " + e.what()));
    }
  }
  if (const TensorEntry* e = ckpt.find("model.embed_tokens.weight"); e != nullptr && isFloating(e->dtype))
    return scalarType(e->dtype);
  return at::kFloat;
}

// The files of a compressed folder that a Hugging Face checkpoint keeps: everything but the weights (rewritten),
// Pareto's manifest and hidden or partial files.
bool copiedAsIs(const fs::path& file) {
  const std::string name = file.filename().string();
  if (name.empty() || name[0] == '.') return false;
  if (name == kCompressManifestFile || name == kExportManifestFile || name == "config.json" ||
      name == "model.safetensors.index.json")
    return false;
  return file.extension() != ".safetensors" && file.extension() != ".partial";
}

}  // namespace

HfExportReport exportHuggingFace(const HfExportOptions& opts, const ProgressCallback& progress,
                                 const CancelToken* cancel) {
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
  std::optional<CompressionManifest> manifest = CompressionManifest::readFrom(src.string());
  if (!manifest)
    throw InputError(fileMessage(opts.modelDir, "has no pareto.json: not a folder written by compress (a dense "
                                                "Hugging Face folder needs no export)"));
  OutputClaim claim;
  claim.path = opts.outDir;
  claim.overwrite = opts.overwrite;
  claim.inputs = {src.string()};
  claim.job = "export hf";
  OutputFolder output(claim);
  const fs::path out = output.target();

  const std::string configPath = (src / "config.json").string();
  if (!fs::exists(configPath)) throw InputError(fileMessage(opts.modelDir, "no config.json in this folder"));
  nlohmann::json configJson = readJsonFile(configPath);
  const ModelConfig config = ModelConfig::fromFile(configPath);

  report("load", 0, src.string());
  Checkpoint ckpt = Checkpoint::open(src.string());
  const c10::ScalarType source = sourceDtype(configJson, configPath, ckpt);
  const c10::ScalarType dtype = opts.dtype.empty() ? source : parseDtype(opts.dtype);

  // The model's loader is the one place that knows every packed format; loading in the target dtype on the CPU
  // gives exactly the weights Pareto runs with at that dtype (nothing is computed, so float16 is fine here).
  RuntimeOptions runtime;
  runtime.device = c10::Device(c10::kCPU);
  runtime.dtype = dtype;
  LlamaModel model(config, ckpt, runtime, &*manifest);
  std::map<std::string, const Linear*> linears;
  for (int64_t l = 0; l < model.numLayers(); ++l)
    for (const auto& [group, linear] : std::as_const(model).layerLinears(l)) linears[linear->name()] = linear;
  linears[model.outputHead().name()] = &model.outputHead();
  checkCancel();

  std::map<std::string, at::Tensor> tensors;   // sorted by name, like the checkpoints transformers writes
  std::map<std::string, bool> densified;
  for (const TensorEntry* e : ckpt.tensors()) {
    checkCancel();
    const std::string module = packedModuleOf(e->name);
    const ModuleFormat* f = module.empty() ? nullptr : manifest->find(module);
    if (f != nullptr && f->format != "dense") {
      densified[module] = true;
      continue;
    }
    at::Tensor t = readTensor(*e);
    if (isFloating(e->dtype)) t = t.to(dtype);
    tensors[e->name] = t;
  }
  for (const auto& [module, unused] : densified) {
    auto it = linears.find(module);
    if (it == linears.end())
      throw InputError(fileMessage((src / "pareto.json").string(),
                                   "packed module " + module + " is not a linear of the model config.json describes"));
    const std::string name = module + ".weight";
    if (tensors.count(name))
      throw InputError(fileMessage(src.string(), "holds both a dense and a packed " + name));
    tensors[name] = it->second->weight().to(at::kCPU, dtype).contiguous();
  }

  HfExportReport result;
  result.outDir = out.string();
  result.dtype = dtypeLabel(dtype);
  result.tensors = static_cast<int64_t>(tensors.size());
  result.densifiedModules = static_cast<int64_t>(densified.size());
  NamedTensors ordered;
  ordered.reserve(tensors.size());
  for (auto& [name, t] : tensors) {
    result.bytes += static_cast<uint64_t>(t.numel()) * t.element_size();
    ordered.emplace_back(name, std::move(t));
  }
  tensors.clear();

  // Everything is written under a temporary name beside the destination and renamed at the end.
  const fs::path tmp = output.staging();
  {
    report("write", 0.3, "model.safetensors");
    checkCancel();
    writeSafetensors((tmp / "model.safetensors").string(), ordered, {{"format", "pt"}});
    ordered.clear();
    checkCancel();

    // transformers loads the weights in the config's dtype: keep it in step with what was written. Otherwise
    // config.json is copied byte for byte.
    if (dtype != source || (!configJson.contains("torch_dtype") && !configJson.contains("dtype"))) {
      bool set = false;
      for (const char* key : {"torch_dtype", "dtype"})
        if (configJson.contains(key)) {
          configJson[key] = dtypeLabel(dtype);
          set = true;
        }
      if (!set) configJson["torch_dtype"] = dtypeLabel(dtype);
      std::ofstream cfg(tmp / "config.json");
      cfg << configJson.dump(2) << "\n";
      if (!cfg.flush()) throw Error(fileMessage((tmp / "config.json").string(), "write failed"));
    } else {
      fs::copy_file(configPath, tmp / "config.json");
      fs::permissions(tmp / "config.json", fs::perms::owner_write, fs::perm_options::add);
    }
    for (const auto& entry : fs::directory_iterator(src)) {
      if (!entry.is_regular_file() || !copiedAsIs(entry.path())) continue;
      const fs::path to = tmp / entry.path().filename();
      fs::copy_file(entry.path(), to);
      // Copies keep the source's mode; files of a read-only model store would stay read-only in a folder the
      // user owns and may want to edit (a chat template, a generation setting).
      fs::permissions(to, fs::perms::owner_write, fs::perm_options::add);
    }
    // The record that Pareto wrote this folder (what --overwrite may replace) and where it came from.
    const nlohmann::json record = {{"producer", std::string("pareto ") + paretoVersion()},
                                   {kOutputRunKey, output.runId()},
                                   {"export", "hf"},
                                   {"source", src.string()},
                                   {"dtype", dtypeLabel(dtype)}};
    writeFileAtomically((tmp / kExportManifestFile).string(), record.dump(2) + "\n");
    report("write", 0.9, "files");
    checkCancel();

    output.commit();
  }
  for (const auto& entry : fs::directory_iterator(out)) result.files.push_back(entry.path().filename().string());
  std::sort(result.files.begin(), result.files.end());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report("write", 1.0, out.string());
  return result;
}

}  // namespace pareto
