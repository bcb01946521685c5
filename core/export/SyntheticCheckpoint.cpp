#include "export/SyntheticCheckpoint.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/ModelConfig.h"
#include "checkpoint/ModelPresets.h"
#include "checkpoint/ShardPlan.h"
#include "export/ExportFolder.h"
#include "model/Device.h"
#include "model/TensorIO.h"
#include "tokenizer/Tokenizer.h"
#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/OutputFolder.h"

namespace pareto {
namespace fs = std::filesystem;
namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Filled a slice of rows at a time so that a tensor costs its own bytes plus a bounded float32 buffer, not a
// float32 copy of itself (the 70B embedding is 4 GB in float32). Each tensor draws from its own generator, so a
// tensor's values do not depend on the shard it lands in.
at::Tensor randomTensor(const std::string& name, const std::vector<int64_t>& shape, c10::ScalarType dtype,
                        uint64_t seed, uint64_t index) {
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(dtype));
  if (endsWith(name, ".bias")) return out.zero_();
  if (endsWith(name, "norm.weight")) return out.fill_(1.0);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed * 0x9E3779B97F4A7C15ull + index);
  const int64_t rows = shape[0];
  const int64_t rowElements = out.numel() / std::max<int64_t>(rows, 1);
  const int64_t sliceRows = std::max<int64_t>(1, (int64_t{16} << 20) / std::max<int64_t>(rowElements, 1));
  at::Tensor buffer = at::empty({std::min(sliceRows, rows) * rowElements}, at::kFloat);
  at::Tensor flat = out.view({rows, rowElements});
  for (int64_t r = 0; r < rows; r += sliceRows) {
    const int64_t n = std::min(sliceRows, rows - r);
    at::Tensor slice = buffer.narrow(0, 0, n * rowElements);
    slice.normal_(0.0, 0.02, gen);
    flat.narrow(0, r, n).copy_(slice.view({n, rowElements}));
  }
  return out;
}

}  // namespace

SyntheticCheckpointReport writeSyntheticCheckpoint(const SyntheticCheckpointOptions& opts,
                                                   const ProgressCallback& progress, const CancelToken* cancel) {
  const auto start = std::chrono::steady_clock::now();
  auto checkCancel = [&] {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
  };
  nlohmann::json config = modelPresetConfig(opts.preset);
  const int64_t presetLayers = config.at("num_hidden_layers").get<int64_t>();
  if (opts.layers < 0 || opts.layers > presetLayers)
    throw InputError("--layers " + std::to_string(opts.layers) + " is outside 1.." + std::to_string(presetLayers) +
                     " (the layers of " + opts.preset + ")");
  if (opts.layers > 0) config["num_hidden_layers"] = opts.layers;
  const c10::ScalarType dtype = parseDtype(opts.dtype);
  config["torch_dtype"] = dtypeLabel(dtype);
  const ModelConfig parsed = ModelConfig::fromJson(config, "configuration of " + opts.preset);

  std::string tokenizerFile;
  if (!opts.tokenizer.empty()) {
    tokenizerFile = fs::is_directory(opts.tokenizer) ? (fs::path(opts.tokenizer) / "tokenizer.json").string()
                                                     : opts.tokenizer;
    const Tokenizer tokenizer = Tokenizer::fromPath(tokenizerFile);
    if (static_cast<int64_t>(tokenizer.vocabSize()) > parsed.vocabSize)
      throw InputError(fileMessage(tokenizerFile, "has token ids up to " + std::to_string(tokenizer.vocabSize() - 1) +
                                                      ", but " + opts.preset + " has a vocabulary of " +
                                                      std::to_string(parsed.vocabSize)));
  }

  OutputClaim claim;
  claim.path = opts.outDir;
  claim.overwrite = opts.overwrite;
  if (!tokenizerFile.empty()) claim.inputs = {fs::weakly_canonical(fs::absolute(tokenizerFile)).string()};
  claim.job = "synthesize";
  OutputFolder output(claim);
  const fs::path staging = output.staging();

  const std::vector<ConfigTensor> tensors = checkpointTensors(parsed);
  std::vector<ShardedTensor> entries;
  SyntheticCheckpointReport report;
  const uint64_t elementBytes = c10::elementSize(dtype);
  for (const ConfigTensor& t : tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    entries.push_back({t.name, n * elementBytes});
    report.parameters += static_cast<int64_t>(n);
    report.bytes += n * elementBytes;
  }
  const std::vector<Shard> shards = planShards(entries, opts.maxShardBytes);

  uint64_t index = 0, written = 0;
  for (const Shard& shard : shards) {
    NamedTensors named;
    for (const ShardedTensor& entry : shard.tensors) {
      checkCancel();
      const ConfigTensor& t = tensors[index];
      named.emplace_back(t.name, randomTensor(t.name, t.shape, dtype, opts.seed, index));
      ++index;
      written += entry.bytes;
      if (progress)
        progress({"write", static_cast<double>(written) / static_cast<double>(report.bytes), t.name});
    }
    writeSafetensors((staging / shard.file).string(), named, {{"format", "pt"}});
  }
  if (shards.size() > 1) writeFileAtomically((staging / kShardIndexFile).string(), shardIndex(shards).dump(2) + "\n");
  writeFileAtomically((staging / "config.json").string(), config.dump(2) + "\n");
  nlohmann::json generation = {{"_from_model_config", true}};
  for (const char* key : {"bos_token_id", "eos_token_id"})
    if (config.contains(key)) generation[key] = config[key];
  writeFileAtomically((staging / "generation_config.json").string(), generation.dump(2) + "\n");
  if (!tokenizerFile.empty()) {
    fs::copy_file(tokenizerFile, staging / "tokenizer.json");
    fs::permissions(staging / "tokenizer.json", fs::perms::owner_write, fs::perm_options::add);
  }
  writeExportRecord(staging.string(), output.runId(), "synthesize", "preset " + opts.preset, dtypeLabel(dtype));
  checkCancel();
  output.commit();

  report.outDir = output.target();
  report.layers = parsed.numLayers;
  report.files = folderFileNames(report.outDir);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace pareto
