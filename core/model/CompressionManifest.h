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
  std::string format = "dense";   // "dense", "bitmask-N:M", "intB" or "bitmask-N:M+intB"
  int n = 0, m = 0;               // bitmask patterns
  int bits = 0;                   // quantized: code bits, grid symmetry, input columns per scale
  bool symmetric = true;
  int64_t groupSize = 0;
  int scaleBits = 0;              // spqr: bits of the quantized group statistics, rows per second-level group
  int64_t scaleGroup = 0;
  bool isSpqr() const { return scaleBits > 0; }
  bool isBitmask() const { return m > 0; }
  bool isQuantized() const { return bits > 0; }
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
// A quantized weight (formats/QuantGroupWeight.h); for bitmask+int formats these hold the kept values.
inline std::string quantCodesName(const std::string& module) { return module + ".weight.qcodes"; }
inline std::string quantScalesName(const std::string& module) { return module + ".weight.qscales"; }
inline std::string quantZerosName(const std::string& module) { return module + ".weight.qzeros"; }
// The parts of an SpQR weight (formats/SpqrWeight.h): "codes", "scale_codes", ..., "outlier_values".
inline std::string spqrTensorName(const std::string& module, const std::string& part) {
  return module + ".weight.spqr." + part;
}

// FNV-1a 64 of a byte string, as 16 hex digits: a stable content hash for model identity (config + index).
std::string contentHash(const std::string& bytes);

}  // namespace pareto
