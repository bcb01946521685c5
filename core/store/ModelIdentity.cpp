#include "store/ModelIdentity.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/CompressionManifest.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {

ModelIdentity identifyModel(const std::string& modelDir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(modelDir, ec))
    throw InputError(fileMessage(modelDir, "not a model folder (no such directory)"));
  const fs::path dir = fs::weakly_canonical(fs::absolute(modelDir));
  ModelIdentity id;
  id.path = dir.string();

  const fs::path config = dir / "config.json";
  if (!fs::exists(config)) throw InputError(fileMessage(modelDir, "no config.json in this folder"));
  std::string bytes = readTextFile(config.string());
  try {
    const nlohmann::json j = nlohmann::json::parse(bytes);
    if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
        j["architectures"][0].is_string())
      id.architecture = j["architectures"][0].get<std::string>();
    else if (j.contains("model_type") && j["model_type"].is_string())
      id.architecture = j["model_type"].get<std::string>();
  } catch (const nlohmann::json::exception&) {
    // An unparsable config still has an identity; the job that reads it reports the syntax error.
  }

  id.contentHash = checkpointIdentityHash(dir.string());  // the same identity compress records

  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".safetensors" && entry.is_regular_file(ec))
      id.sizeBytes += static_cast<uint64_t>(entry.file_size(ec));
  return id;
}

}  // namespace pareto
