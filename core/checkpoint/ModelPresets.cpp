#include "checkpoint/ModelPresets.h"

#include <map>
#include <nlohmann/json.hpp>

#include "util/Error.h"

namespace pareto {
namespace {

// The config.json fields that shape the model, as published; parsed by ModelConfig::fromJson like a real
// folder's, so a preset is validated the same way.
const std::map<std::string, nlohmann::json>& presets() {
  static const std::map<std::string, nlohmann::json> table = [] {
    const nlohmann::json llama3Rope = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
    nlohmann::json llama32Rope = llama3Rope;
    llama32Rope["factor"] = 32.0;
    auto llama = [](int64_t hidden, int64_t inter, int64_t layers, int64_t heads, int64_t kv, int64_t headDim) {
      return nlohmann::json{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                            {"vocab_size", 128256}, {"hidden_size", hidden}, {"intermediate_size", inter},
                            {"num_hidden_layers", layers}, {"num_attention_heads", heads},
                            {"num_key_value_heads", kv}, {"head_dim", headDim},
                            {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0},
                            {"bos_token_id", 128000}, {"eos_token_id", 128001}, {"torch_dtype", "bfloat16"}};
    };
    auto qwen = [](const char* type, int64_t vocab, int64_t hidden, int64_t inter, int64_t layers, int64_t heads,
                   int64_t kv) {
      return nlohmann::json{{"architectures", {std::string(type) == "qwen3" ? "Qwen3ForCausalLM" : "Qwen2ForCausalLM"}},
                            {"model_type", type}, {"vocab_size", vocab}, {"hidden_size", hidden},
                            {"intermediate_size", inter}, {"num_hidden_layers", layers},
                            {"num_attention_heads", heads}, {"num_key_value_heads", kv}, {"head_dim", 128},
                            {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0},
                            {"tie_word_embeddings", false}, {"eos_token_id", 151643}, {"torch_dtype", "bfloat16"}};
    };
    std::map<std::string, nlohmann::json> t;
    t["llama-3.1-8b"] = llama(4096, 14336, 32, 32, 8, 128);
    t["llama-3.1-8b"]["rope_scaling"] = llama3Rope;
    t["llama-3.3-70b"] = llama(8192, 28672, 80, 64, 8, 128);
    t["llama-3.3-70b"]["rope_scaling"] = llama3Rope;
    t["llama-3.2-1b"] = llama(2048, 8192, 16, 32, 8, 64);
    t["llama-3.2-1b"]["rope_scaling"] = llama32Rope;
    t["llama-3.2-1b"]["tie_word_embeddings"] = true;
    t["llama-3.2-3b"] = llama(3072, 8192, 28, 24, 8, 128);
    t["llama-3.2-3b"]["rope_scaling"] = llama32Rope;
    t["llama-3.2-3b"]["tie_word_embeddings"] = true;
    t["mistral-7b"] = {{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"vocab_size", 32768},
                       {"hidden_size", 4096}, {"intermediate_size", 14336}, {"num_hidden_layers", 32},
                       {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"head_dim", 128},
                       {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-5}, {"rope_theta", 1000000.0},
                       {"bos_token_id", 1}, {"eos_token_id", 2}, {"torch_dtype", "bfloat16"}};
    t["qwen2.5-7b"] = qwen("qwen2", 152064, 3584, 18944, 28, 28, 4);
    t["qwen2.5-7b"]["attention_bias"] = true;   // Qwen2: q/k/v carry biases
    t["qwen3-8b"] = qwen("qwen3", 151936, 4096, 12288, 36, 32, 8);
    t["qwen3-14b"] = qwen("qwen3", 151936, 5120, 17408, 40, 40, 8);
    t["tiny-llama"] = llama(256, 512, 2, 4, 2, 64);
    t["tiny-llama"]["vocab_size"] = 512;
    t["tiny-llama"]["max_position_embeddings"] = 4096;
    t["tiny-llama"]["bos_token_id"] = 1;
    t["tiny-llama"]["eos_token_id"] = 2;
    return t;
  }();
  return table;
}

}  // namespace

std::vector<std::string> knownModelPresets() {
  std::vector<std::string> names;
  for (const auto& [name, json] : presets()) names.push_back(name);
  return names;
}

nlohmann::json modelPresetConfig(const std::string& name) {
  const auto it = presets().find(name);
  if (it == presets().end()) {
    std::string known;
    for (const auto& n : knownModelPresets()) known += (known.empty() ? "" : ", ") + n;
    throw InputError("unknown model \"" + name + "\" (known: " + known + ")");
  }
  return it->second;
}

ModelConfig modelPreset(const std::string& name) {
  return ModelConfig::fromJson(modelPresetConfig(name), "built-in configuration of " + name);
}

std::vector<ConfigTensor> checkpointTensors(const ModelConfig& c) {
  const int64_t H = c.hiddenSize, F = c.intermediateSize, D = c.headDim;
  const int64_t qOut = c.numHeads * D, kvOut = c.numKvHeads * D;
  std::vector<ConfigTensor> t;
  t.push_back({"model.embed_tokens.weight", {c.vocabSize, H}});
  for (int64_t i = 0; i < c.numLayers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    auto linear = [&](const std::string& name, int64_t rows, int64_t cols, bool bias) {
      t.push_back({p + name + ".weight", {rows, cols}});
      if (bias) t.push_back({p + name + ".bias", {rows}});
    };
    t.push_back({p + "input_layernorm.weight", {H}});
    linear("self_attn.q_proj", qOut, H, c.attentionBias);
    linear("self_attn.k_proj", kvOut, H, c.attentionBias);
    linear("self_attn.v_proj", kvOut, H, c.attentionBias);
    linear("self_attn.o_proj", H, qOut, c.oProjBias);
    if (c.qkNorm) {
      t.push_back({p + "self_attn.q_norm.weight", {D}});
      t.push_back({p + "self_attn.k_norm.weight", {D}});
    }
    t.push_back({p + "post_attention_layernorm.weight", {H}});
    linear("mlp.gate_proj", F, H, c.mlpBias);
    linear("mlp.up_proj", F, H, c.mlpBias);
    linear("mlp.down_proj", H, F, c.mlpBias);
  }
  t.push_back({"model.norm.weight", {H}});
  if (!c.tieWordEmbeddings) t.push_back({"lm_head.weight", {c.vocabSize, H}});
  return t;
}

int64_t parameterCount(const ModelConfig& config) {
  int64_t n = 0;
  for (const ConfigTensor& t : checkpointTensors(config)) {
    int64_t e = 1;
    for (int64_t d : t.shape) e *= d;
    n += e;
  }
  return n;
}

}  // namespace pareto
