// A compression recipe (DESIGN.md "Compression methods"): which calibration, which pruning, per-module
// overrides and skips. Parsing is strict: an unknown key or an out-of-range value is refused with a message
// naming the key path, because a typo in a recipe would otherwise silently give a different model.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "compress/QuantGrid.h"
#include "compress/SparsityPattern.h"
#include "formats/WeightFormat.h"

namespace pareto {

struct CalibrationSpec {
  std::string source;          // "text" or "decode"
  std::string file;            // text, prompts or continuations file, resolved against the recipe's folder
  bool fromContinuations = false;   // decode: `file` holds generated continuations (calib/ContinuationsFile.h)
  int64_t tokens = 16384;      // tokens that reach the Hessian
  int64_t window = 512;        // text: window length
  int64_t maxNewTokens = 128;  // decode: per prompt
  uint64_t seed = 0;
};

struct PruneSpec {
  std::string method;          // "magnitude", "wanda", "sparsegpt"
  SparsityPattern pattern = SparsityPattern::nm(2, 4);
  double damp = 0.01;          // sparsegpt: fraction of the mean Hessian diagonal
  int64_t block = 128;         // sparsegpt: lazy-update block width
  bool needsCalibration() const { return method != "magnitude"; }
};

struct QuantizeSpec {
  std::string method;          // "rtn", "gptq", "spqr"
  QuantSpec grid = QuantSpec::group(4, 128);
  // "format": a gguf-* format (rtn, gptq): the codes are chosen on llama.cpp's grid and stored as its blocks;
  // `grid` then only mirrors it (bits, block, symmetry) for labels. Unset: the int grid `grid` describes.
  std::optional<WeightFormat> format;
  bool actOrder = false;       // gptq
  bool staticGroups = false;   // gptq
  double damp = 0.01;          // gptq, spqr
  int64_t block = 128;         // gptq, spqr
  int scaleBits = 3;           // spqr: bits of the quantized group scales (zero points are integer codes of `bits`)
  double outlierRatio = -1;    // spqr: fraction of the quantized (kept) weights kept in fp16 (−1: unset)
  double outlierThreshold = -1;// spqr: saliency threshold (−1: unset)
  bool needsCalibration() const { return method != "rtn"; }
};

struct ModuleOverride {
  std::string match;               // glob over module names, e.g. "model.layers.0.*"
  std::optional<PruneSpec> prune;  // nullopt: leave matching modules dense
  bool overridesPrune = false;
  std::optional<QuantizeSpec> quantize;
  bool overridesQuantize = false;
};

struct Recipe {
  std::optional<CalibrationSpec> calibration;
  std::optional<PruneSpec> prune;
  std::optional<QuantizeSpec> quantize;           // applied after pruning, to the surviving weights
  std::vector<std::string> skip = {"lm_head"};   // globs of modules never touched
  std::vector<ModuleOverride> overrides;          // later entries win
  // "lm_head": {"quantize": ...}: the output head quantized by round-to-nearest and stored packed (untied from
  // the embedding when the checkpoint ties them). nullopt: the head stays as the checkpoint has it. `skip` and
  // `overrides` never reach the head.
  std::optional<QuantizeSpec> headQuantize;
  nlohmann::json document;                        // the recipe as written, for the manifest
  std::string path;                               // where it was read from ("" when built in memory)

  // Throws InputError "<file>: <key path>: ..." for anything invalid.
  static Recipe fromFile(const std::string& path);
  static Recipe fromJson(const nlohmann::json& j, const std::string& baseDir, const std::string& sourceName);

  // The pruning that applies to `module` after skips and overrides; nullopt: leave it dense (always for "lm_head").
  std::optional<PruneSpec> pruneFor(const std::string& module) const;
  // For "lm_head": headQuantize.
  std::optional<QuantizeSpec> quantizeFor(const std::string& module) const;
  bool needsCalibration() const;
};

}  // namespace pareto
