#include "checkpoint/ModelConfig.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "util/Error.h"
#include "util/Json.h"

namespace pareto {
namespace {

using nlohmann::json;

const std::set<std::string> kSupportedTypes = {"llama", "mistral", "qwen2", "qwen3"};

// Upper bounds far above any published model of these families (the largest: Llama 3.1 405B with hidden 16384,
// ffn 53248, 126 layers, 128 heads; vocabularies up to ~260k; Llama 4 contexts of 10M). A config beyond them is
// corrupt or hostile, and believing it would size buffers (RoPE tables, KV caches) from it.
constexpr int64_t kMaxVocab = int64_t{1} << 22;
constexpr int64_t kMaxHidden = int64_t{1} << 16;
constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxPositions = int64_t{1} << 24;

std::string architectureToType(const std::string& arch) {
  if (arch == "LlamaForCausalLM") return "llama";
  if (arch == "MistralForCausalLM") return "mistral";
  if (arch == "Qwen2ForCausalLM") return "qwen2";
  if (arch == "Qwen3ForCausalLM") return "qwen3";
  return "";
}

class Reader {
 public:
  Reader(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int64_t positiveInt(const char* key, int64_t max) const {
    if (!has(key)) fail(std::string("missing \"") + key + "\"");
    return positiveIntValue(j_.at(key), key, max);
  }
  int64_t positiveIntOr(const char* key, int64_t fallback, int64_t max) const {
    return has(key) ? positiveIntValue(j_.at(key), key, max) : fallback;
  }
  // JSON has no infinity, but a literal like 1e999 parses to one; it is as useless as a negative number here.
  double positiveNumberOr(const json& obj, const char* key, double fallback) const {
    if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
    const json& v = obj.at(key);
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      fail(std::string("\"") + key + "\" must be a positive finite number, got " + v.dump());
    return v.get<double>();
  }
  bool boolOr(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_boolean()) fail(std::string("\"") + key + "\" must be true or false");
    return j_.at(key).get<bool>();
  }
  std::string stringOr(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_string()) fail(std::string("\"") + key + "\" must be a string");
    return j_.at(key).get<std::string>();
  }
  [[noreturn]] void fail(const std::string& what) const { throw InputError(fileMessage(source_, what)); }

  int64_t positiveIntValue(const json& v, const char* key, int64_t max) const {
    // An unsigned value above INT64_MAX would wrap to a negative int64_t and read as "not positive"; say "too
    // large" instead.
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max)) tooLarge(v, key, max);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      fail(std::string("\"") + key + "\" must be a positive integer, got " + v.dump());
    if (v.get<int64_t>() > max) tooLarge(v, key, max);
    return v.get<int64_t>();
  }
  [[noreturn]] void tooLarge(const json& v, const char* key, int64_t max) const {
    fail(std::string("\"") + key + "\" " + v.dump() + " is larger than any supported model (at most " +
         std::to_string(max) + "): the config is corrupt");
  }

 private:
  const json& j_;
  std::string source_;
};

std::vector<int64_t> tokenIds(const Reader& r, const json& v, const char* key) {
  std::vector<int64_t> ids;
  auto one = [&](const json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0)
      r.fail(std::string("\"") + key + "\" must be a token id or a list of them, got " + v.dump());
    ids.push_back(x.get<int64_t>());
  };
  if (v.is_array()) {
    for (const auto& x : v) one(x);
  } else if (!v.is_null()) {
    one(v);
  }
  return ids;
}

// HF moved RoPE settings from top-level rope_theta/rope_scaling (transformers < 5, what published
// checkpoints use) to a single rope_parameters object (transformers 5). Both forms appear in the wild.
void parseRope(const json& j, const Reader& r, ModelConfig& c) {
  const json* params = nullptr;
  if (j.contains("rope_parameters") && !j.at("rope_parameters").is_null()) params = &j.at("rope_parameters");
  const json* scaling = nullptr;
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null()) scaling = &j.at("rope_scaling");
  if (params != nullptr && !params->is_object()) r.fail("\"rope_parameters\" must be an object");
  if (scaling != nullptr && !scaling->is_object()) r.fail("\"rope_scaling\" must be an object");

  c.ropeTheta = r.positiveNumberOr(j, "rope_theta", 10000.0);
  if (params != nullptr) c.ropeTheta = r.positiveNumberOr(*params, "rope_theta", c.ropeTheta);

  const json* typed = scaling != nullptr ? scaling : params;
  if (typed == nullptr) return;
  std::string type = "default";
  if (typed->contains("rope_type") && typed->at("rope_type").is_string())
    type = typed->at("rope_type").get<std::string>();
  else if (typed->contains("type") && typed->at("type").is_string())
    type = typed->at("type").get<std::string>();
  if (type == "default") return;
  if (type == "llama3") {
    Llama3RopeScaling s;
    s.factor = r.positiveNumberOr(*typed, "factor", s.factor);
    s.lowFreqFactor = r.positiveNumberOr(*typed, "low_freq_factor", s.lowFreqFactor);
    s.highFreqFactor = r.positiveNumberOr(*typed, "high_freq_factor", s.highFreqFactor);
    if (typed->contains("original_max_position_embeddings"))
      s.originalMaxPositionEmbeddings =
          r.positiveIntValue(typed->at("original_max_position_embeddings"), "original_max_position_embeddings",
                             kMaxPositions);
    if (s.highFreqFactor <= s.lowFreqFactor) r.fail("llama3 rope scaling needs high_freq_factor > low_freq_factor");
    c.llama3Rope = s;
    return;
  }
  r.fail("RoPE scaling type \"" + type + "\" is not supported (supported: default, llama3)");
}

}  // namespace

ModelConfig ModelConfig::fromJson(const json& j, const std::string& source) {
  Reader r(j, source);
  if (!j.is_object()) r.fail("config.json must be a JSON object");
  ModelConfig c;

  std::string modelType = r.stringOr("model_type", "");
  if (r.has("architectures")) {
    const json& a = j.at("architectures");
    if (!a.is_array() || a.empty() || !a.at(0).is_string()) r.fail("\"architectures\" must be a list of names");
    c.architecture = a.at(0).get<std::string>();
    std::string fromArch = architectureToType(c.architecture);
    if (fromArch.empty())
      r.fail("architecture \"" + c.architecture +
             "\" is not supported (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
             "Qwen3ForCausalLM)");
    if (modelType.empty()) modelType = fromArch;
  }
  if (modelType.empty()) r.fail("neither \"architectures\" nor \"model_type\" says what model this is");
  if (kSupportedTypes.count(modelType) == 0)
    r.fail("model_type \"" + modelType + "\" is not supported (supported: llama, mistral, qwen2, qwen3)");
  c.modelType = modelType;
  if (c.architecture.empty()) c.architecture = modelType;

  c.vocabSize = r.positiveInt("vocab_size", kMaxVocab);
  c.hiddenSize = r.positiveInt("hidden_size", kMaxHidden);
  c.intermediateSize = r.positiveInt("intermediate_size", kMaxIntermediate);
  c.numLayers = r.positiveInt("num_hidden_layers", kMaxLayers);
  c.numHeads = r.positiveInt("num_attention_heads", kMaxHeads);
  c.numKvHeads = r.positiveIntOr("num_key_value_heads", c.numHeads, kMaxHeads);   // Llama 1 has no GQA key
  if (r.has("head_dim")) {
    c.headDim = r.positiveInt("head_dim", kMaxHeadDim);
  } else {
    if (c.hiddenSize % c.numHeads != 0)
      r.fail("hidden_size " + std::to_string(c.hiddenSize) + " is not divisible by num_attention_heads " +
             std::to_string(c.numHeads));
    c.headDim = c.hiddenSize / c.numHeads;
    if (c.headDim > kMaxHeadDim)
      r.fail("head_dim " + std::to_string(c.headDim) + " (hidden_size / num_attention_heads) is larger than any "
             "supported model (at most " + std::to_string(kMaxHeadDim) + ")");
  }
  if (c.headDim % 2 != 0) r.fail("head_dim " + std::to_string(c.headDim) + " must be even for RoPE");
  if (c.numHeads % c.numKvHeads != 0)
    r.fail("num_attention_heads " + std::to_string(c.numHeads) + " is not divisible by num_key_value_heads " +
           std::to_string(c.numKvHeads));
  c.maxPositionEmbeddings = r.positiveIntOr("max_position_embeddings", 2048, kMaxPositions);
  c.rmsNormEps = r.positiveNumberOr(j, "rms_norm_eps", 1e-6);
  if (c.rmsNormEps >= 1) r.fail("\"rms_norm_eps\" " + std::to_string(c.rmsNormEps) + " must be below 1");
  c.tieWordEmbeddings = r.boolOr("tie_word_embeddings", false);
  c.mlpBias = r.boolOr("mlp_bias", false);
  std::string act = r.stringOr("hidden_act", "silu");
  if (act != "silu") r.fail("hidden_act \"" + act + "\" is not supported (only silu)");

  if (modelType == "qwen2") {
    c.attentionBias = true;    // Qwen2 always has q/k/v biases and none on o_proj
    c.oProjBias = false;
  } else {
    c.attentionBias = r.boolOr("attention_bias", false);
    c.oProjBias = c.attentionBias;
  }
  c.qkNorm = modelType == "qwen3";
  if (modelType == "mistral" && r.has("sliding_window")) {
    c.slidingWindow = r.positiveInt("sliding_window", kMaxPositions);
  } else if ((modelType == "qwen2" || modelType == "qwen3") && r.boolOr("use_sliding_window", false) &&
             r.has("sliding_window")) {
    c.slidingWindow = r.positiveInt("sliding_window", kMaxPositions);
  }
  parseRope(j, r, c);

  if (r.has("bos_token_id")) {
    auto ids = tokenIds(r, j.at("bos_token_id"), "bos_token_id");
    if (!ids.empty()) c.bosTokenId = ids.front();
  }
  if (r.has("eos_token_id")) c.eosTokenIds = tokenIds(r, j.at("eos_token_id"), "eos_token_id");
  for (int64_t id : c.eosTokenIds)
    if (id >= c.vocabSize) r.fail("eos_token_id " + std::to_string(id) + " is outside the vocabulary");
  if (c.bosTokenId && *c.bosTokenId >= c.vocabSize)
    r.fail("bos_token_id " + std::to_string(*c.bosTokenId) + " is outside the vocabulary");
  c.torchDtype = r.stringOr("torch_dtype", r.stringOr("dtype", ""));
  return c;
}

ModelConfig ModelConfig::fromFile(const std::string& path) {
  return fromJson(readJsonFile(path, kMaxJsonConfigBytes, "a config.json"), path);
}

}  // namespace pareto
