#include "compress/CompressResume.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>

#include "checkpoint/Safetensors.h"
#include "compress/CompressJob.h"
#include "model/TensorIO.h"
#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/Json.h"
#include "util/OutputFolder.h"

namespace pareto {
namespace fs = std::filesystem;
namespace {

nlohmann::json reportJson(const ModuleReport& r) {
  return {{"name", r.name},           {"method", r.method},   {"pattern", r.pattern},
          {"format", r.format},       {"sparsity", r.sparsity}, {"bits_per_weight", r.bitsPerWeight},
          {"seconds", r.seconds},     {"damp_used", r.dampUsed}, {"damp_retries", r.dampRetries}};
}

ModuleReport reportFrom(const nlohmann::json& j) {
  ModuleReport r;
  r.name = j.at("name").get<std::string>();
  r.method = j.at("method").get<std::string>();
  r.pattern = j.at("pattern").get<std::string>();
  r.format = j.at("format").get<std::string>();
  r.sparsity = j.at("sparsity").get<double>();
  r.bitsPerWeight = j.at("bits_per_weight").get<double>();
  r.seconds = j.at("seconds").get<double>();
  r.dampUsed = j.at("damp_used").get<double>();
  r.dampRetries = j.at("damp_retries").get<int>();
  return r;
}

}  // namespace

CompressResume::CompressResume(std::string staging, nlohmann::json identity, int64_t layers)
    : dir_((fs::path(staging) / kResumeFolder).string()), identity_(std::move(identity)), layers_(layers) {}

std::string CompressResume::inputsPath(int64_t layer) const {
  char name[64];
  std::snprintf(name, sizeof name, "inputs-%05lld.safetensors", static_cast<long long>(layer));
  return (fs::path(dir_) / name).string();
}

std::string CompressResume::path(const char* kind, int64_t layer) const {
  char name[64];
  std::snprintf(name, sizeof name, "layer-%05lld.%s", static_cast<long long>(layer), kind);
  return (fs::path(dir_) / name).string();
}

int64_t CompressResume::start(bool resumed) {
  const std::string statePath = (fs::path(dir_).parent_path() / kResumeStateFile).string();
  if (!resumed) {
    fs::create_directories(dir_);
    done_ = 0;
    return 0;
  }
  const nlohmann::json state = readJsonFile(statePath);
  const nlohmann::json& was = state.at("identity");
  for (const auto& [key, value] : identity_.items())
    if (!was.contains(key) || was.at(key) != value)
      throw InputError(fileMessage(statePath, "the interrupted run had another " + key + " (" +
                                                  (was.contains(key) ? was.at(key).dump() : std::string("none")) +
                                                  ", now " + value.dump() + "): resume it with the same model, "
                                                  "recipe, device, dtype and batch, or remove " +
                                                  fs::path(dir_).parent_path().string() + " to start over"));
  done_ = state.at("layers_done").get<int64_t>();
  if (done_ < 0 || done_ > layers_)
    throw InputError(fileMessage(statePath, "says " + std::to_string(done_) + " layers are done, of " +
                                                std::to_string(layers_)));
  return done_;
}

void CompressResume::writeLayer(int64_t layer, const std::vector<FinishedModule>& modules,
                                const std::vector<ModuleReport>& reports) {
  if (layer != done_) throw Error("compress: layer " + std::to_string(layer) + " finished out of order");
  NamedTensors tensors;
  nlohmann::json doc = {{"modules", nlohmann::json::object()}, {"reports", nlohmann::json::array()}};
  for (const FinishedModule& m : modules) {
    for (const auto& named : m.stored) tensors.push_back(named);
    doc["modules"][m.module] = {{"entry", m.manifestEntry},
                                {"stored_bytes", m.storedBytes},
                                {"tensors", nlohmann::json::array()}};
    for (const auto& named : m.stored) doc["modules"][m.module]["tensors"].push_back(named.first);
  }
  for (const ModuleReport& r : reports) doc["reports"].push_back(reportJson(r));
  writeSafetensors(path("safetensors", layer), tensors);
  writeFileAtomically(path("json", layer), doc.dump(1) + "\n");
  ++done_;
  const nlohmann::json state = {{"identity", identity_}, {"layers_done", done_}};
  writeFileAtomically((fs::path(dir_).parent_path() / kResumeStateFile).string(), state.dump(2) + "\n");
  // The inputs of this layer's block are no longer a resume's starting point (those of the next one are).
  std::error_code ignored;
  fs::remove(inputsPath(layer), ignored);
}

void CompressResume::writeInputs(int64_t layer, const SequentialPassOptions::BlockInputs& inputs) {
  std::vector<PlannedTensor> planned;
  for (size_t i = 0; i < inputs.shapes.size(); ++i)
    planned.push_back({"batch." + std::to_string(i), inputs.dtype, inputs.shapes[i],
                       [&inputs, i] { return inputs.input(i).to(at::kCPU).contiguous(); }});
  writeSafetensorsStreamed(inputsPath(layer), planned);
}

void CompressResume::writeInputs(int64_t layer, const std::vector<at::Tensor>& hostInputs) {
  NamedTensors tensors;
  for (size_t i = 0; i < hostInputs.size(); ++i) tensors.emplace_back("batch." + std::to_string(i), hostInputs[i]);
  writeSafetensors(inputsPath(layer), tensors);
}

at::Tensor CompressResume::restoredInput(size_t batch, const std::vector<int64_t>& shape,
                                         const c10::Device& device) const {
  const std::string file = inputsPath(done_);
  if (!fs::exists(file))
    throw InputError(fileMessage(file, "is missing: the interrupted run left no calibration inputs of layer " +
                                           std::to_string(done_) + " to resume from; remove " +
                                           fs::path(dir_).parent_path().string() + " to start over"));
  const SafetensorsFile inputs(file);
  const std::string name = "batch." + std::to_string(batch);
  for (const TensorEntry& e : inputs.tensors()) {
    if (e.name != name) continue;
    if (e.shape != shape)
      throw InputError(fileMessage(file, name + " was saved for other calibration batches; remove " +
                                             fs::path(dir_).parent_path().string() + " to start over"));
    return readTensorFor(e, device).to(device);
  }
  throw InputError(fileMessage(file, "lacks " + name + "; remove " + fs::path(dir_).parent_path().string() +
                                         " to start over"));
}

CompressResume::Layer CompressResume::readLayer(int64_t layer) const {
  const nlohmann::json doc = readJsonFile(path("json", layer));
  Layer out;
  out.file = std::make_shared<const SafetensorsFile>(path("safetensors", layer));
  std::map<std::string, const TensorEntry*> byName;
  for (const TensorEntry& e : out.file->tensors()) byName[e.name] = &e;
  for (const auto& [module, m] : doc.at("modules").items()) {
    out.manifestEntries[module] = m.at("entry");
    out.storedBytes[module] = m.at("stored_bytes").get<uint64_t>();
    auto& stored = out.stored[module];
    for (const auto& name : m.at("tensors")) {
      const auto it = byName.find(name.get<std::string>());
      if (it == byName.end())
        throw InputError(fileMessage(path("safetensors", layer), "lacks tensor " + name.get<std::string>() +
                                                                     " of module " + module));
      stored.push_back(it->second);
    }
  }
  for (const auto& r : doc.at("reports")) out.reports.push_back(reportFrom(r));
  return out;
}

void CompressResume::finish() { removeTree(dir_); }

InterruptedCompress interruptedCompress(const std::string& outDir) {
  InterruptedCompress found;
  try {
    found.staging = resumableStaging(outDir);
    if (!found.staging.empty())
      found.layersDone = readJsonFile((fs::path(found.staging) / kResumeStateFile).string()).at("layers_done").get<int64_t>();
  } catch (const std::exception&) {
    // a state file that does not read is reported by --resume itself
  }
  return found;
}

}  // namespace pareto
