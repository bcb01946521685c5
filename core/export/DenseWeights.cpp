#include "export/DenseWeights.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

#include "checkpoint/ModelConfig.h"
#include "checkpoint/Safetensors.h"
#include "formats/PackedModuleIO.h"
#include "model/Device.h"
#include "model/LlamaModel.h"
#include "model/TensorIO.h"
#include "util/Error.h"
#include "util/Json.h"

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

}  // namespace

DenseWeights readDenseWeights(const std::string& modelDir, std::optional<c10::ScalarType> asked,
                              const CancelToken* cancel) {
  auto checkCancel = [&] {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
  };
  const fs::path src(modelDir);
  const std::string configPath = (src / "config.json").string();
  if (!fs::exists(configPath)) throw InputError(fileMessage(modelDir, "no config.json in this folder"));
  const nlohmann::json configJson = readJsonFile(configPath);
  const ModelConfig config = ModelConfig::fromFile(configPath);

  DenseWeights out;
  out.manifest = CompressionManifest::readFrom(src.string());
  Checkpoint ckpt = Checkpoint::open(src.string());
  out.sourceDtype = sourceDtype(configJson, configPath, ckpt);
  const c10::ScalarType dtype = asked.value_or(out.sourceDtype);

  for (const TensorEntry* e : ckpt.tensors()) {
    checkCancel();
    const std::string module = packedModuleOf(e->name);
    const ModuleFormat* f = module.empty() || !out.manifest ? nullptr : out.manifest->find(module);
    if (f != nullptr && f->format != "dense") {
      out.densified.insert(module);
      continue;
    }
    at::Tensor t = readTensor(*e);
    if (isFloating(e->dtype)) t = t.to(dtype);
    out.tensors[e->name] = t;
  }
  if (out.densified.empty()) return out;

  // The model's loader is the one place that knows every packed format; loading in the target dtype on the CPU
  // gives exactly the weights Pareto runs with at that dtype (nothing is computed, so float16 is fine here).
  RuntimeOptions runtime;
  runtime.device = c10::Device(c10::kCPU);
  runtime.dtype = dtype;
  LlamaModel model(config, ckpt, runtime, &*out.manifest);
  std::map<std::string, const Linear*> linears;
  for (int64_t l = 0; l < model.numLayers(); ++l)
    for (const auto& [group, linear] : std::as_const(model).layerLinears(l)) linears[linear->name()] = linear;
  linears[model.outputHead().name()] = &model.outputHead();
  checkCancel();
  for (const std::string& module : out.densified) {
    auto it = linears.find(module);
    if (it == linears.end())
      throw InputError(fileMessage((src / "pareto.json").string(),
                                   "packed module " + module + " is not a linear of the model config.json describes"));
    const std::string name = module + ".weight";
    if (out.tensors.count(name)) throw InputError(fileMessage(src.string(), "holds both a dense and a packed " + name));
    out.tensors[name] = it->second->weight().to(at::kCPU, dtype).contiguous();
  }
  return out;
}

}  // namespace pareto
