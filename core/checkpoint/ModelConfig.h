// config.json of a Hugging Face causal LM, for the Llama family and its close relatives (Llama 1/2/3.x,
// Mistral, Qwen2, Qwen3). Anything else is refused by name: running a model we do not implement would give
// wrong numbers silently.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pareto {

// rope_scaling / rope_parameters of type "llama3" (Llama 3.1+): frequency-dependent wavelength scaling.
struct Llama3RopeScaling {
  double factor = 8.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxPositionEmbeddings = 8192;
};

struct ModelConfig {
  std::string architecture;   // e.g. "LlamaForCausalLM"
  std::string modelType;      // "llama", "mistral", "qwen2", "qwen3"
  int64_t vocabSize = 0;
  int64_t hiddenSize = 0;
  int64_t intermediateSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;
  int64_t headDim = 0;        // hidden/heads unless config.json says otherwise
  int64_t maxPositionEmbeddings = 0;
  double rmsNormEps = 1e-6;
  double ropeTheta = 10000.0;
  std::optional<Llama3RopeScaling> llama3Rope;
  bool tieWordEmbeddings = false;
  bool attentionBias = false;  // q/k/v (and o for Llama's attention_bias) carry biases; Qwen2: q/k/v only
  bool oProjBias = false;
  bool mlpBias = false;
  bool qkNorm = false;         // Qwen3: RMSNorm over each head of q and k before RoPE
  std::optional<int64_t> slidingWindow;   // Mistral; only applies past this many positions
  std::optional<int64_t> bosTokenId;
  std::vector<int64_t> eosTokenIds;
  std::string torchDtype;      // as stored ("bfloat16", ...); informational

  // Parses and validates; `source` names the file in messages. Throws InputError.
  static ModelConfig fromJson(const nlohmann::json& j, const std::string& source);
  static ModelConfig fromFile(const std::string& path);

  int64_t kvGroups() const { return numHeads / numKvHeads; }
};

}  // namespace pareto
