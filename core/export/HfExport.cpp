#include "export/HfExport.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "checkpoint/ModelConfig.h"
#include "export/DenseWeights.h"
#include "export/ExportFolder.h"
#include "formats/CompressionManifest.h"
#include "model/Device.h"
#include "model/TensorIO.h"
#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/Json.h"
#include "util/OutputFolder.h"

namespace pareto {
namespace fs = std::filesystem;
namespace {

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
  (void)ModelConfig::fromFile(configPath);   // refuses a config Pareto cannot run before anything is written

  report("load", 0, src.string());
  DenseWeights weights = readDenseWeights(src.string(),
                                          opts.dtype.empty() ? std::nullopt : std::optional(parseDtype(opts.dtype)),
                                          cancel);
  const c10::ScalarType source = weights.sourceDtype;
  const c10::ScalarType dtype = opts.dtype.empty() ? source : parseDtype(opts.dtype);
  std::map<std::string, at::Tensor>& tensors = weights.tensors;

  HfExportReport result;
  result.outDir = out.string();
  result.dtype = dtypeLabel(dtype);
  result.tensors = static_cast<int64_t>(tensors.size());
  result.densifiedModules = static_cast<int64_t>(weights.densified.size());
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
      setConfigDtype(configJson, dtypeLabel(dtype));
      std::ofstream cfg(tmp / "config.json");
      cfg << configJson.dump(2) << "\n";
      if (!cfg.flush()) throw Error(fileMessage((tmp / "config.json").string(), "write failed"));
    } else {
      fs::copy_file(configPath, tmp / "config.json");
      fs::permissions(tmp / "config.json", fs::perms::owner_write, fs::perm_options::add);
    }
    copyUnchangedFiles(src.string(), tmp.string());
    writeExportRecord(tmp.string(), output.runId(), "hf", src.string(), dtypeLabel(dtype));
    report("write", 0.9, "files");
    checkCancel();

    output.commit();
  }
  result.files = folderFileNames(out.string());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report("write", 1.0, out.string());
  return result;
}

}  // namespace pareto
