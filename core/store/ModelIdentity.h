// What identifies a model in the experiment store: its folder, a content hash of config.json plus the weight
// index (or the safetensors header of a single-file checkpoint), its architecture and its size on disk. The hash
// is the one compress writes into pareto.json ("source.content_hash"), so a compressed folder can be traced back
// to the store's record of its source.
#pragma once

#include <cstdint>
#include <string>

namespace pareto {

struct ModelIdentity {
  std::string path;          // absolute, symbolic links resolved
  std::string contentHash;   // 16 hex digits (FNV-1a 64)
  std::string architecture;  // config.json "architectures"[0] (or "model_type")
  uint64_t sizeBytes = 0;    // all *.safetensors files of the folder
};

// Throws InputError naming the folder when it is not a folder or has no readable config.json.
ModelIdentity identifyModel(const std::string& modelDir);

}  // namespace pareto
