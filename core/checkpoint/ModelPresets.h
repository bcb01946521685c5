// Published configurations of well-known models (config.json values from their Hugging Face repositories), so
// that speed can be measured on a model's real shapes without downloading it: synthetic models (random weights
// of the real architecture) and the shapes of `bench kernels`.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "checkpoint/ModelConfig.h"

namespace pareto {

// "llama-3.1-8b", "llama-3.2-1b", "llama-3.2-3b", "llama-3.3-70b", "mistral-7b", "qwen2.5-7b", "qwen3-8b",
// "qwen3-14b", and "tiny-llama" (2 layers, hidden 256: for tests). Throws InputError listing the known names.
ModelConfig modelPreset(const std::string& name);
// The same preset as the config.json object a Hugging Face folder of that model holds.
nlohmann::json modelPresetConfig(const std::string& name);
std::vector<std::string> knownModelPresets();

// The weight tensors a Hugging Face checkpoint of `config` holds, named and shaped as in its safetensors files
// (embedding, per layer: norms, q/k/v/o with the biases and Qwen3 q/k norms the configuration has, gate/up/down;
// final norm; lm_head unless tied), in that order. Pure: no files are read.
struct ConfigTensor {
  std::string name;
  std::vector<int64_t> shape;
};
std::vector<ConfigTensor> checkpointTensors(const ModelConfig& config);
// Number of weights of `config`: the sum over checkpointTensors (a tied output head counted once).
int64_t parameterCount(const ModelConfig& config);

}  // namespace pareto
