#include "model/LoadedModel.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/Safetensors.h"
#include "formats/CompressionManifest.h"
#include "model/OutOfMemory.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {

LoadedModel loadModel(const std::string& modelDir, const RuntimeOptions& opts, WeightResidency residency,
                      const ProgressCallback& progress, const CancelToken* cancel) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(modelDir)) throw InputError(fileMessage(modelDir, "not a model folder (no such directory)"));
  const fs::path dir(modelDir);
  if (!fs::exists(dir / "config.json")) throw InputError(fileMessage(modelDir, "no config.json in this folder"));

  LoadedModel m;
  m.directory = modelDir;
  m.config = ModelConfig::fromFile((dir / "config.json").string());
  if (!fs::exists(dir / "tokenizer.json"))
    throw InputError(fileMessage(modelDir, "no tokenizer.json in this folder (Pareto reads the fast-tokenizer file)"));
  m.tokenizer = std::make_unique<Tokenizer>(Tokenizer::fromPath((dir / "tokenizer.json").string()));
  // A tokenizer that yields ids past the embedding would fail mid-run (or read out of bounds on a kernel);
  // the reverse (embedding rows padded beyond the tokenizer, as Qwen and Mistral do) is harmless.
  if (static_cast<int64_t>(m.tokenizer->vocabSize()) > m.config.vocabSize)
    throw InputError(fileMessage(m.tokenizer->sourcePath(),
                                 "has " + std::to_string(m.tokenizer->vocabSize()) +
                                     " tokens, more than the vocab_size " + std::to_string(m.config.vocabSize) +
                                     " of config.json: tokenizer and model do not belong together"));
  if (residency == WeightResidency::Streamed) {
    // The mapping stays open: the model reads each layer from it when the layer is used.
    auto ckpt = std::make_shared<const Checkpoint>(Checkpoint::open(modelDir));
    std::optional<CompressionManifest> manifest = CompressionManifest::readFrom(modelDir);
    m.model = std::make_unique<LlamaModel>(m.config, std::move(ckpt), opts, manifest ? &*manifest : nullptr);
  } else {
    // The mapping is only needed while weights are copied to the device.
    Checkpoint ckpt = Checkpoint::open(modelDir);
    std::optional<CompressionManifest> manifest = CompressionManifest::readFrom(modelDir);
    m.model = guardMemory("loading " + modelDir, "load it on another device or in a smaller dtype", [&] {
      return std::make_unique<LlamaModel>(m.config, ckpt, opts, manifest ? &*manifest : nullptr, progress, cancel);
    });
  }

  m.eosTokenIds = m.config.eosTokenIds;
  const fs::path genConfig = dir / "generation_config.json";
  if (fs::exists(genConfig)) {
    nlohmann::json g = readJsonFile(genConfig.string(), kMaxJsonConfigBytes, "a generation_config.json");
    if (g.is_object() && g.contains("eos_token_id")) {
      const auto& e = g.at("eos_token_id");
      std::vector<nlohmann::json> items = e.is_array() ? e.get<std::vector<nlohmann::json>>()
                                                       : std::vector<nlohmann::json>{e};
      for (const auto& x : items) {
        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= m.config.vocabSize)
          throw InputError(fileMessage(genConfig.string(), "eos_token_id must be token ids, got " + e.dump()));
        if (std::find(m.eosTokenIds.begin(), m.eosTokenIds.end(), x.get<int64_t>()) == m.eosTokenIds.end())
          m.eosTokenIds.push_back(x.get<int64_t>());
      }
    }
  }
  return m;
}

std::vector<TokenId> LoadedModel::promptIds(const std::string& prompt, bool addBos) const {
  std::vector<TokenId> ids;
  if (addBos && config.bosTokenId) ids.push_back(*config.bosTokenId);
  std::vector<TokenId> text = tokenizer->encode(prompt, /*addSpecialTokens=*/false);
  ids.insert(ids.end(), text.begin(), text.end());
  return ids;
}

}  // namespace pareto
