// config.json parsing for the supported families, and refusal of everything else with a message that names it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "SharedData.h"
#include "checkpoint/ModelConfig.h"
#include "model/ModelSummary.h"
#include "util/Error.h"

namespace pareto {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json llama2() {
  return json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000,
    "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 32, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "rope_scaling": null, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "torch_dtype": "float16"})");
}

std::string errorOf(const json& j) {
  try {
    ModelConfig::fromJson(j, "cfg.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ModelConfig, Llama2) {
  ModelConfig c = ModelConfig::fromJson(llama2(), "cfg.json");
  EXPECT_EQ(c.modelType, "llama");
  EXPECT_EQ(c.headDim, 128);
  EXPECT_EQ(c.kvGroups(), 1);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-5);
  EXPECT_FALSE(c.llama3Rope.has_value());
  EXPECT_EQ(c.eosTokenIds, std::vector<int64_t>{2});
  EXPECT_FALSE(c.attentionBias);
}

TEST(ModelConfig, Llama1WithoutKvHeadsMeansMultiHead) {
  json j = llama2();
  j.erase("num_key_value_heads");
  EXPECT_EQ(ModelConfig::fromJson(j, "cfg.json").numKvHeads, 32);
}

TEST(ModelConfig, Llama31RopeScalingAndEosList) {
  json j = llama2();
  j["vocab_size"] = 128256;
  j["num_key_value_heads"] = 8;
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}, {"rope_type", "llama3"}};
  j["eos_token_id"] = {128001, 128008, 128009};
  ModelConfig c = ModelConfig::fromJson(j, "cfg.json");
  ASSERT_TRUE(c.llama3Rope.has_value());
  EXPECT_DOUBLE_EQ(c.llama3Rope->factor, 8.0);
  EXPECT_EQ(c.llama3Rope->originalMaxPositionEmbeddings, 8192);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 500000.0);
  EXPECT_EQ(c.kvGroups(), 4);
  EXPECT_EQ(c.eosTokenIds.size(), 3u);
}

TEST(ModelConfig, RopeParametersOfTransformers5) {
  json j = llama2();
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "llama3"}, {"factor", 32.0},
                          {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}};
  ModelConfig c = ModelConfig::fromJson(j, "cfg.json");
  EXPECT_DOUBLE_EQ(c.ropeTheta, 500000.0);
  ASSERT_TRUE(c.llama3Rope.has_value());
  EXPECT_DOUBLE_EQ(c.llama3Rope->factor, 32.0);
}

TEST(ModelConfig, MistralSlidingWindow) {
  json j = llama2();
  j["architectures"] = {"MistralForCausalLM"};
  j["model_type"] = "mistral";
  j["sliding_window"] = 4096;
  EXPECT_EQ(ModelConfig::fromJson(j, "cfg.json").slidingWindow, 4096);
  j["sliding_window"] = nullptr;
  EXPECT_FALSE(ModelConfig::fromJson(j, "cfg.json").slidingWindow.has_value());
}

TEST(ModelConfig, Qwen2HasQkvBiasButNoOutputBias) {
  json j = llama2();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["model_type"] = "qwen2";
  j["sliding_window"] = 4096;
  j["use_sliding_window"] = false;
  ModelConfig c = ModelConfig::fromJson(j, "cfg.json");
  EXPECT_TRUE(c.attentionBias);
  EXPECT_FALSE(c.oProjBias);
  EXPECT_FALSE(c.slidingWindow.has_value());
  EXPECT_FALSE(c.qkNorm);
}

TEST(ModelConfig, Qwen3HeadDimAndQkNorm) {
  json j = llama2();
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["model_type"] = "qwen3";
  j["hidden_size"] = 1024;
  j["num_attention_heads"] = 16;
  j["num_key_value_heads"] = 8;
  j["head_dim"] = 128;   // 16 × 128 ≠ 1024: Qwen3-0.6B really is like this
  j["tie_word_embeddings"] = true;
  ModelConfig c = ModelConfig::fromJson(j, "cfg.json");
  EXPECT_EQ(c.headDim, 128);
  EXPECT_TRUE(c.qkNorm);
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_FALSE(c.attentionBias);
}

TEST(ModelConfig, RefusesOtherArchitecturesByName) {
  json j = llama2();
  j["architectures"] = {"GPT2LMHeadModel"};
  j["model_type"] = "gpt2";
  EXPECT_THAT(errorOf(j), HasSubstr("cfg.json"));
  EXPECT_THAT(errorOf(j), HasSubstr("GPT2LMHeadModel"));
  j.erase("architectures");
  EXPECT_THAT(errorOf(j), HasSubstr("\"gpt2\""));
}

TEST(ModelConfig, RefusesBadValues) {
  json j = llama2();
  j["num_key_value_heads"] = 5;
  EXPECT_THAT(errorOf(j), HasSubstr("not divisible by num_key_value_heads 5"));
  j = llama2();
  j["hidden_size"] = 4001;
  EXPECT_THAT(errorOf(j), HasSubstr("hidden_size 4001 is not divisible"));
  j = llama2();
  j["vocab_size"] = -3;
  EXPECT_THAT(errorOf(j), HasSubstr("\"vocab_size\" must be a positive integer"));
  j = llama2();
  j.erase("num_hidden_layers");
  EXPECT_THAT(errorOf(j), HasSubstr("missing \"num_hidden_layers\""));
  j = llama2();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_THAT(errorOf(j), HasSubstr("\"yarn\" is not supported"));
  j = llama2();
  j["hidden_act"] = "gelu";
  EXPECT_THAT(errorOf(j), HasSubstr("gelu"));
  j = llama2();
  j["eos_token_id"] = 99999;
  EXPECT_THAT(errorOf(j), HasSubstr("outside the vocabulary"));
  EXPECT_THAT(errorOf(json::array()), HasSubstr("must be a JSON object"));
}

TEST(ModelSummary, RefSmall) {
  PARETO_REQUIRE_SHARED();
  ModelSummary s = summarizeModel(test::sharedPath("models/ref-small"));
  EXPECT_EQ(s.architecture, "LlamaForCausalLM");
  EXPECT_EQ(s.numLayers, 8);
  EXPECT_EQ(s.numKvHeads, 2);
  EXPECT_TRUE(s.tiedEmbeddings);
  EXPECT_EQ(s.dtype, "BF16");
  EXPECT_EQ(s.parameters, 15735168);   // training.json's count
  EXPECT_EQ(s.bytes, uint64_t(s.parameters) * 2);
  EXPECT_EQ(s.tensors.size(), 8u * 9u + 2u);   // 9 per layer, embedding, final norm (no lm_head: tied)
}

TEST(ModelSummary, MissingFolderNamesIt) {
  try {
    summarizeModel("/nonexistent/model-dir");
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/model-dir"));
  }
}

}  // namespace
}  // namespace pareto
