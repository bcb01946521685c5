// pareto.json: what `pareto-cli compress` wrote into an output folder besides the weights. The loader reads it
// to know which modules are stored in a packed format; inspect shows it.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace pareto {

struct ModuleFormat {
  std::string format = "dense";   // "dense" or "bitmask-N:M"
  int n = 0, m = 0;               // bitmask patterns
  double bitsPerWeight = 0;
  double sparsity = 0;            // fraction of weights that are zero
  std::string method;             // "sparsegpt", ... ("" for untouched modules)
};

struct CompressionManifest {
  static constexpr int kFormatVersion = 1;
  std::map<std::string, ModuleFormat> modules;   // by module name ("model.layers.0.mlp.up_proj")
  nlohmann::json document;                       // the whole file

  // nullopt when the folder has no pareto.json; throws InputError naming the file when it is malformed.
  static std::optional<CompressionManifest> readFrom(const std::string& modelDir);
  const ModuleFormat* find(const std::string& module) const;
};

// The tensor names of a packed bitmask weight.
inline std::string bitmaskMasksName(const std::string& module) { return module + ".weight.bitmask"; }
inline std::string bitmaskValuesName(const std::string& module) { return module + ".weight.values"; }

// FNV-1a 64 of a byte string, as 16 hex digits: a stable content hash for model identity (config + index).
std::string contentHash(const std::string& bytes);

}  // namespace pareto
