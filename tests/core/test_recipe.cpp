// Recipe parsing: the DESIGN.md contract, strict validation with the key path in every message, overrides.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "SharedData.h"
#include "compress/Recipe.h"
#include "util/Error.h"

namespace pareto {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json designExample() {
  return json::parse(R"({
    "calibration": {"source": "decode", "prompts": "prompts-prose.txt", "tokens": 16384, "max_new_tokens": 128, "seed": 0},
    "prune": {"method": "sparsegpt", "pattern": "2:4", "damp": 0.01, "block": 128},
    "skip": ["lm_head"],
    "overrides": [{"match": "model.layers.0.*", "prune": null}]
  })");
}

std::string errorOf(const json& j) {
  try {
    Recipe::fromJson(j, "/base", "recipe.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Recipe, ParsesTheDesignExample) {
  Recipe r = Recipe::fromJson(designExample(), "/base", "recipe.json");
  ASSERT_TRUE(r.calibration);
  EXPECT_EQ(r.calibration->source, "decode");
  EXPECT_EQ(r.calibration->file, "/base/prompts-prose.txt");
  EXPECT_EQ(r.calibration->tokens, 16384);
  EXPECT_EQ(r.calibration->maxNewTokens, 128);
  ASSERT_TRUE(r.prune);
  EXPECT_EQ(r.prune->method, "sparsegpt");
  EXPECT_EQ(r.prune->pattern.label(), "2:4");
  EXPECT_TRUE(r.needsCalibration());
  EXPECT_FALSE(r.pruneFor("model.layers.0.mlp.up_proj").has_value());   // override: dense
  EXPECT_TRUE(r.pruneFor("model.layers.1.mlp.up_proj").has_value());
  EXPECT_FALSE(r.pruneFor("lm_head").has_value());                        // skipped
}

TEST(Recipe, OverridesMergeIntoTheBaseBlockAndLaterOnesWin) {
  json j = designExample();
  j["overrides"] = json::parse(R"([{"match": "*.mlp.*", "prune": {"pattern": "4:8"}},
                                  {"match": "model.layers.3.mlp.down_proj", "prune": {"sparsity": 0.25}}])");
  Recipe r = Recipe::fromJson(j, "", "recipe.json");
  EXPECT_EQ(r.pruneFor("model.layers.1.mlp.up_proj")->pattern.label(), "4:8");
  EXPECT_EQ(r.pruneFor("model.layers.1.mlp.up_proj")->method, "sparsegpt");
  EXPECT_EQ(r.pruneFor("model.layers.3.mlp.down_proj")->pattern.label(), "25%");
  EXPECT_EQ(r.pruneFor("model.layers.1.self_attn.q_proj")->pattern.label(), "2:4");
}

TEST(Recipe, MagnitudeNeedsNoCalibration) {
  Recipe r = Recipe::fromJson(json::parse(R"({"prune": {"method": "magnitude", "sparsity": 0.5}})"), "", "r.json");
  EXPECT_FALSE(r.needsCalibration());
  EXPECT_EQ(r.pruneFor("model.layers.0.self_attn.o_proj")->pattern.label(), "50%");
}

TEST(Recipe, RefusesWithTheKeyPath) {
  json j = designExample();
  j["prune"]["methd"] = "x";
  EXPECT_THAT(errorOf(j), HasSubstr("recipe.json: prune.methd: unknown key"));
  j = designExample();
  j["calibraton"] = json::object();
  EXPECT_THAT(errorOf(j), HasSubstr("calibraton: unknown key"));
  j = designExample();
  j["prune"]["method"] = "obs";
  EXPECT_THAT(errorOf(j), HasSubstr("prune.method: \"obs\" is not one of"));
  j = designExample();
  j["prune"]["pattern"] = "3:5";
  EXPECT_THAT(errorOf(j), HasSubstr("prune.pattern"));
  j = designExample();
  j["prune"].erase("pattern");
  j["prune"]["sparsity"] = 1.5;
  EXPECT_THAT(errorOf(j), HasSubstr("prune.sparsity: 1.5 is out of range"));
  j = designExample();
  j["prune"]["sparsity"] = 0.5;
  EXPECT_THAT(errorOf(j), HasSubstr("either \"pattern\""));
  j = designExample();
  j["prune"]["damp"] = 0;
  EXPECT_THAT(errorOf(j), HasSubstr("prune.damp"));
  j = designExample();
  j["calibration"]["tokens"] = 0;
  EXPECT_THAT(errorOf(j), HasSubstr("calibration.tokens: 0 is out of range"));
  j = designExample();
  j["calibration"]["window"] = 512;
  EXPECT_THAT(errorOf(j), HasSubstr("calibration.window: applies to text calibration only"));
  j = designExample();
  j["calibration"]["source"] = "text";
  EXPECT_THAT(errorOf(j), HasSubstr("needs \"text\": FILE"));
  j = designExample();
  j.erase("calibration");
  EXPECT_THAT(errorOf(j), HasSubstr("need a \"calibration\" block"));
  j = designExample();
  j["overrides"][0].erase("match");
  EXPECT_THAT(errorOf(j), HasSubstr("overrides[0]: needs \"match\""));
  j = designExample();
  j["skip"] = "lm_head";
  EXPECT_THAT(errorOf(j), HasSubstr("skip: must be a list"));
  EXPECT_THAT(errorOf(json::parse(R"({"skip": []})")), HasSubstr("nothing to do"));
  EXPECT_THAT(errorOf(json::array()), HasSubstr("must be an object"));
}

TEST(Recipe, QuantizeBlock) {
  json j = designExample();
  j["quantize"] = json::parse(R"({"method": "gptq", "bits": 3, "group_size": 64, "act_order": true,
                                 "static_groups": true})");
  j["overrides"] = json::parse(R"([{"match": "*.down_proj", "quantize": {"bits": 8}},
                                  {"match": "*.o_proj", "quantize": null}])");
  Recipe r = Recipe::fromJson(j, "", "recipe.json");
  auto q = r.quantizeFor("model.layers.1.self_attn.q_proj");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->method, "gptq");
  EXPECT_EQ(q->grid.label(), "int3 sym g64");
  EXPECT_TRUE(q->actOrder);
  EXPECT_EQ(r.quantizeFor("model.layers.1.mlp.down_proj")->grid.bits, 8);
  EXPECT_FALSE(r.quantizeFor("model.layers.1.self_attn.o_proj"));
  EXPECT_TRUE(r.pruneFor("model.layers.1.self_attn.o_proj"));   // a quantize override leaves pruning alone
  Recipe spqr = Recipe::fromJson(json::parse(R"({"calibration": {"source": "text", "text": "t.txt"},
                                                 "quantize": {"method": "spqr"}})"), "", "r.json");
  EXPECT_EQ(spqr.quantize->grid.bits, 3);
  EXPECT_EQ(spqr.quantize->grid.groupSize, 16);
  EXPECT_DOUBLE_EQ(spqr.quantize->outlierRatio, 0.01);
  EXPECT_FALSE(Recipe::fromJson(json::parse(R"({"quantize": {"method": "rtn", "bits": 8, "granularity": "channel"}})"),
                                "", "r.json").needsCalibration());

  j = designExample();
  j["quantize"] = json::parse(R"({"method": "rtn", "bits": 9})");
  EXPECT_THAT(errorOf(j), HasSubstr("quantize.bits: 9 is out of range"));
  j["quantize"] = json::parse(R"({"method": "rtn", "act_order": true})");
  EXPECT_THAT(errorOf(j), HasSubstr("quantize.act_order: applies to gptq only"));
  j["quantize"] = json::parse(R"({"method": "rtn", "outlier_ratio": 0.01})");
  EXPECT_THAT(errorOf(j), HasSubstr("quantize.outlier_ratio: applies to spqr only"));
  j["quantize"] = json::parse(R"({"method": "spqr", "outlier_ratio": 0.01, "outlier_threshold": 2})");
  EXPECT_THAT(errorOf(j), HasSubstr("not both"));
  j["quantize"] = json::parse(R"({"method": "awq"})");
  EXPECT_THAT(errorOf(j), HasSubstr("quantize.method: \"awq\" is not one of"));
  j["quantize"] = json::parse(R"({"method": "rtn", "granularity": "row"})");
  EXPECT_THAT(errorOf(j), HasSubstr("quantize.granularity"));
}

TEST(Recipe, FromFileResolvesPathsAgainstItsFolder) {
  const std::string dir = test::scratchDir("recipe");
  std::ofstream(dir + "/r.json") << designExample().dump();
  Recipe r = Recipe::fromFile(dir + "/r.json");
  EXPECT_EQ(r.calibration->file, dir + "/prompts-prose.txt");
  EXPECT_EQ(r.path, dir + "/r.json");
  std::ofstream(dir + "/bad.json") << "{ not json";
  EXPECT_THROW(Recipe::fromFile(dir + "/bad.json"), InputError);
}

TEST(Recipe, ShippedRecipesParse) {
  const std::vector<std::string> shipped = {
      "sparsegpt-2of4-text", "sparsegpt-2of4-decode", "wanda-50",       "magnitude-2of4",  "int8-channel",
      "int4-g128-rtn",       "int4-tensor-rtn",       "gptq-4bit-g128", "gptq-3bit-g128",  "spqr-3bit",
      "sparsegpt-2of4-int4", "sparsegpt-2of4-gptq4"};
  const std::string dir = std::string(PARETO_SOURCE_DIR) + "/resources/recipes/";
  for (const std::string& name : shipped) {
    SCOPED_TRACE(name);
    Recipe r = Recipe::fromFile(dir + name + ".json");
    EXPECT_TRUE(r.prune.has_value() || r.quantize.has_value());
  }
  // Every recipe the folder ships is in the list above, so a new one cannot go unparsed.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    EXPECT_NE(std::find(shipped.begin(), shipped.end(), entry.path().stem().string()), shipped.end())
        << entry.path() << " is not in the shipped-recipe list";
  }
}

}  // namespace
}  // namespace pareto
