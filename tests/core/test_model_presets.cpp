// The built-in model configurations: every preset parses, and the parameter count derived from a configuration
// (checkpointTensors, parameterCount) matches the published checkpoints' totals.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "checkpoint/ModelPresets.h"
#include "util/Error.h"

namespace pareto {
namespace {

int64_t elements(const ConfigTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

TEST(ModelPresets, EveryPresetParsesAndTinyLlamaIsListed) {
  const std::vector<std::string> names = knownModelPresets();
  EXPECT_NE(std::find(names.begin(), names.end(), "tiny-llama"), names.end());
  for (const std::string& name : names) {
    const ModelConfig c = modelPreset(name);
    EXPECT_GT(c.numLayers, 0) << name;
    EXPECT_GT(parameterCount(c), 0) << name;
  }
  EXPECT_THROW(modelPreset("no-such-model"), InputError);
}

// Totals as the Hugging Face checkpoints of these models store them (sum over their safetensors tensors).
TEST(ModelPresets, ParameterCountsMatchThePublishedCheckpoints) {
  const std::map<std::string, int64_t> published = {
      {"llama-3.1-8b", 8030261248},  {"llama-3.2-1b", 1235814400}, {"llama-3.2-3b", 3212749824},
      {"mistral-7b", 7248023552},    {"qwen2.5-7b", 7615616512},   {"qwen3-8b", 8190735360},
      {"qwen3-14b", 14768307200},    {"tiny-llama", 1443072},      {"llama-3.3-70b", 70553706496}};
  for (const auto& [name, count] : published) EXPECT_EQ(parameterCount(modelPreset(name)), count) << name;
}

TEST(ModelPresets, CheckpointTensorsFollowTheConfiguration) {
  // Tied embeddings: no lm_head; Qwen2: q/k/v biases; Qwen3: per-head q/k norms.
  auto names = [](const std::string& preset) {
    std::map<std::string, ConfigTensor> byName;
    for (const ConfigTensor& t : checkpointTensors(modelPreset(preset))) byName[t.name] = t;
    return byName;
  };
  const auto tied = names("llama-3.2-1b");
  EXPECT_EQ(tied.count("lm_head.weight"), 0u);
  EXPECT_EQ(tied.at("model.embed_tokens.weight").shape, (std::vector<int64_t>{128256, 2048}));
  EXPECT_EQ(tied.at("model.layers.15.self_attn.k_proj.weight").shape, (std::vector<int64_t>{512, 2048}));
  EXPECT_EQ(tied.count("model.layers.16.mlp.down_proj.weight"), 0u);
  const auto qwen2 = names("qwen2.5-7b");
  EXPECT_EQ(qwen2.at("model.layers.0.self_attn.q_proj.bias").shape, (std::vector<int64_t>{3584}));
  EXPECT_EQ(qwen2.count("model.layers.0.self_attn.o_proj.bias"), 0u);
  EXPECT_EQ(qwen2.at("lm_head.weight").shape, (std::vector<int64_t>{152064, 3584}));
  const auto qwen3 = names("qwen3-8b");
  EXPECT_EQ(qwen3.at("model.layers.35.self_attn.q_norm.weight").shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(qwen3.count("model.layers.0.self_attn.q_proj.bias"), 0u);
  const auto tiny = names("tiny-llama");
  EXPECT_EQ(tiny.at("model.layers.1.mlp.gate_proj.weight").shape, (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(tiny.at("model.layers.1.mlp.down_proj.weight").shape, (std::vector<int64_t>{256, 512}));
  int64_t sum = 0;
  for (const ConfigTensor& t : checkpointTensors(modelPreset("tiny-llama"))) sum += elements(t);
  EXPECT_EQ(sum, parameterCount(modelPreset("tiny-llama")));
}

}  // namespace
}  // namespace pareto
