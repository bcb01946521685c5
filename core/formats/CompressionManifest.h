// pareto.json: what `pareto-cli compress` wrote into an output folder besides the weights. The loader reads it
// to know which modules are stored in a packed format; inspect shows it.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "formats/WeightFormat.h"

namespace pareto {

struct ModuleFormat {
  WeightFormat weight;            // the layout (formats/WeightFormat.h)
  std::string format = "dense";   // weight.name(), also for folders that stored an earlier name
  // Below: the layout's grid as the loader reads it (earlier folders record these beside the name).
  int n = 0, m = 0;               // bitmask patterns
  int bits = 0;                   // quantized: code bits, grid symmetry, input columns (kept values) per scale
  bool symmetric = true;
  int64_t groupSize = 0;
  bool actOrder = false;          // int: GPTQ act-order, the permutation is stored (formats/PackedModuleIO.h)
  int scaleBits = 0;              // spqr: bits of the quantized group scales, rows per second-level group
  int64_t scaleGroup = 0;
  std::vector<int64_t> shape;     // the dense weight's [rows, cols] (absent in folders of older versions)
  bool isSpqr() const { return scaleBits > 0; }
  bool isBitmask() const { return m > 0; }
  bool isQuantized() const { return bits > 0; }
  double bitsPerWeight = 0;
  double sparsity = 0;            // fraction of weights that are zero
  std::string method;             // "sparsegpt", ... ("" for untouched modules)
};

struct CompressionManifest {
  // 2: SpQR zero points are b-bit integer codes (formats/SpqrWeight.h), act-order permutations, module shapes.
  // 3: format names of formats/WeightFormat.h ("int4-g128" for "int4"). Version-1 folders still load, except
  // their SpQR modules (refused with a message to compress again); version-2 names are mapped.
  static constexpr int kFormatVersion = 3;
  std::map<std::string, ModuleFormat> modules;   // by module name ("model.layers.0.mlp.up_proj")
  nlohmann::json document;                       // the whole file

  // nullopt when the folder has no pareto.json; throws InputError naming the file when it is malformed.
  static std::optional<CompressionManifest> readFrom(const std::string& modelDir);
  const ModuleFormat* find(const std::string& module) const;
};

// FNV-1a 64 of a byte string, as 16 hex digits: a stable content hash for model identity (config + index).
std::string contentHash(const std::string& bytes);

// The identity of a model folder: contentHash of config.json + the shard index, or config.json + the single
// safetensors file's header (names, dtypes, shapes, offsets), which identifies a checkpoint without reading
// gigabytes. Recorded by compress (pareto.json "source") and the experiment store (models table).
std::string checkpointIdentityHash(const std::string& dir);

}  // namespace pareto
