// Recipe parsing: the DESIGN.md contract, strict validation with the key path in every message, overrides.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include "OneBlockModel.h"
#include "InputErrors.h"
#include "SharedData.h"
#include "compress/Recipe.h"
#include "compress/RecipeEstimate.h"
#include "model/ModelSummary.h"
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

TEST(Recipe, GgufFormatFixesTheGridAndRefusesWhatItCannotStore) {
  const json calib = {{"source", "text"}, {"text", "t.txt"}};
  Recipe r = Recipe::fromJson({{"calibration", calib}, {"quantize", {{"method", "gptq"}, {"format", "gguf-q4_k"}}}},
                              "", "r.json");
  ASSERT_TRUE(r.quantize->format);
  EXPECT_EQ(r.quantize->format->name(), "gguf-q4_k");
  EXPECT_EQ(r.quantize->grid.label(), "int4 asym g256");   // mirrors the format
  EXPECT_TRUE(r.needsCalibration());
  // Keys that say what the format says are accepted.
  r = Recipe::fromJson({{"quantize", {{"method", "rtn"}, {"format", "gguf-q8_0"}, {"bits", 8}, {"group_size", 32},
                                      {"symmetric", true}}}},
                       "", "r.json");
  EXPECT_FALSE(r.needsCalibration());
  EXPECT_EQ(r.quantize->grid.label(), "int8 sym g32");
  // An override inherits the format.
  r = Recipe::fromJson({{"quantize", {{"method", "rtn"}, {"format", "gguf-q4_0"}}},
                        {"overrides", {{{"match", "*.down_proj"}, {"quantize", {{"format", "gguf-q6_k"}}}}}}},
                       "", "r.json");
  EXPECT_EQ(r.quantizeFor("model.layers.0.mlp.up_proj")->format->name(), "gguf-q4_0");
  EXPECT_EQ(r.quantizeFor("model.layers.0.mlp.down_proj")->format->name(), "gguf-q6_k");

  json j = {{"calibration", calib}};
  auto refused = [&](const json& quantize) {
    j["quantize"] = quantize;
    return errorOf(j);
  };
  EXPECT_THAT(refused({{"method", "rtn"}, {"format", "gguf-q5_1"}}),
              HasSubstr("quantize.format: unknown weight format \"gguf-q5_1\""));
  EXPECT_THAT(refused({{"method", "rtn"}, {"format", "int4-g128"}}),
              HasSubstr("quantize.format: \"int4-g128\" is not a GGUF format"));
  EXPECT_THAT(refused({{"method", "spqr"}, {"format", "gguf-q4_0"}}),
              HasSubstr("quantize.format: gguf-q4_0 is quantized by rtn or gptq, not spqr"));
  EXPECT_THAT(refused({{"method", "rtn"}, {"format", "gguf-q4_0"}, {"bits", 3}}),
              HasSubstr("quantize.bits: contradicts \"format\": \"gguf-q4_0\" (4-bit codes)"));
  EXPECT_THAT(refused({{"method", "rtn"}, {"format", "gguf-q4_k"}, {"group_size", 32}}),
              HasSubstr("quantize.group_size: contradicts \"format\": \"gguf-q4_k\" (blocks of 256 weights)"));
  EXPECT_THAT(refused({{"method", "rtn"}, {"format", "gguf-q4_k"}, {"symmetric", true}}),
              HasSubstr("quantize.symmetric: contradicts"));
  EXPECT_THAT(refused({{"method", "rtn"}, {"format", "gguf-q8_0"}, {"granularity", "channel"}}),
              HasSubstr("quantize.granularity: contradicts"));
  EXPECT_THAT(refused({{"method", "gptq"}, {"format", "gguf-q4_0"}, {"act_order", true}}),
              HasSubstr("quantize.act_order: cannot be stored on gguf-q4_0"));
  EXPECT_THAT(refused({{"method", "gptq"}, {"format", "gguf-q4_0"}, {"static_groups", true}}),
              HasSubstr("quantize.static_groups: does not apply to gguf-q4_0"));
  // An override cannot turn act-order on under an inherited GGUF format either.
  j["quantize"] = {{"method", "gptq"}, {"format", "gguf-q4_k"}};
  j["overrides"] = {{{"match", "*.down_proj"}, {"quantize", {{"act_order", true}}}}};
  EXPECT_THAT(errorOf(j), HasSubstr("overrides[0].quantize.act_order: cannot be stored on gguf-q4_k"));
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
      "sparsegpt-2of4-int4", "sparsegpt-2of4-gptq4",  "gguf-q4_k-gptq", "gguf-q4_0-rtn",   "gguf-q8_0-rtn",
      "int4-g128-rtn-head-int8"};
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

// Predicted tokens/s from stored kernel benchmarks (compress/RecipeEstimate.h): each module's layout maps to the
// `bench kernels` format that decodes it, and its bytes are read at that kernel's measured bandwidth.

using test::oneBlockModel;

RecipeEstimate estimateOf(const json& recipe, const DecodeBandwidth& bandwidth = {}) {
  return estimateRecipe(Recipe::fromJson(recipe, "/base", "recipe.json"), oneBlockModel(), bandwidth);
}

KernelMeasurement measured(const std::string& kernel, double gbPerSecond, double recordedAt = 1.7e9,
                           const std::string& device = "NVIDIA H200 (132 SMs)") {
  KernelMeasurement m;
  m.kernel = kernel;
  m.device = device;
  m.shape = "llama-3.1-8b step";
  m.bytesPerSecond = gbPerSecond * 1e9;
  m.recordedAt = recordedAt;
  return m;
}

TEST(RecipeEstimate, NamesTheBenchmarkKernelOfEveryModuleLayout) {
  struct Case {
    json recipe;
    std::string kernel;   // of every block linear
    std::string format;   // the one name of formats/WeightFormat.h: the kernel's where one runs it
  };
  const json calib = {{"source", "text"}, {"text", "t.txt"}};
  const std::vector<Case> cases = {
      {{{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}}}, "bitmask-2:4", "bitmask-2:4"},
      {{{"prune", {{"method", "magnitude"}, {"pattern", "16:32"}}}}, "bitmask-16:32", "bitmask-16:32"},
      {{{"prune", {{"method", "magnitude"}, {"sparsity", 0.5}}}}, "dense", "dense"},   // zeros in the dense layout
      {{{"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 128}}}}, "int4-g128", "int4-g128"},
      {{{"quantize", {{"method", "rtn"}, {"bits", 8}, {"granularity", "channel"}}}}, "int8-channel", "int8-channel"},
      {{{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}},
        {"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 64}}}},
       "bitmask-2:4+int4-g64", "bitmask-2:4+int4-g64"},
      {{{"calibration", calib}, {"quantize", {{"method", "spqr"}, {"bits", 3}, {"outlier_ratio", 0.01}}}},
       "spqr-3bit", "spqr-3bit"},
      {{{"quantize", {{"method", "rtn"}, {"bits", 3}, {"group_size", 128}}}}, "", "int3-g128"},
      {{{"quantize", {{"method", "rtn"}, {"bits", 4}, {"granularity", "tensor"}}}}, "", "int4-tensor"},
      {{{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}},
        {"quantize", {{"method", "rtn"}, {"bits", 8}, {"granularity", "channel"}}}},
       "", "bitmask-2:4+int8-channel"},
      {{{"quantize", {{"method", "rtn"}, {"format", "gguf-q4_k"}}}}, "", "gguf-q4_k"},   // runs dense
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.recipe.dump());
    const RecipeEstimate e = estimateOf(c.recipe);
    ASSERT_TRUE(e.problems.empty()) << e.problems.front();
    ASSERT_EQ(e.modules.size(), 3u);
    for (const ModuleEstimate& m : e.modules) {
      EXPECT_EQ(m.kernel, c.kernel) << m.module;
      EXPECT_EQ(m.format, c.format) << m.module;
    }
    ASSERT_FALSE(e.kernels.empty());
    EXPECT_EQ(e.kernels.front(), "dense");   // the output head, always
    if (c.kernel.empty()) {
      EXPECT_EQ(e.kernels, std::vector<std::string>{"dense"});
      EXPECT_EQ(e.unbenchmarkable, std::vector<std::string>{c.format});
    } else if (c.kernel != "dense") {
      EXPECT_EQ(e.kernels, (std::vector<std::string>{"dense", c.kernel}));
      EXPECT_TRUE(e.unbenchmarkable.empty());
    }
  }
  // Overrides give modules their own kernels: each appears once, in first-seen (name) order.
  const RecipeEstimate mixed = estimateOf({{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}},
                                           {"overrides", {{{"match", "*.mlp.up_proj"}, {"prune", nullptr}}}}});
  EXPECT_EQ(mixed.kernels, (std::vector<std::string>{"dense", "bitmask-2:4"}));
}

TEST(RecipeEstimate, PredictsTokensPerSecondFromMeasuredKernelBandwidths) {
  DecodeBandwidth b;
  b.bytesPerSecond = 1e9;   // a copy bandwidth the kernels take precedence over
  b.source = "measured copy bandwidth";
  b.kernels = {measured("bitmask-2:4", 1500), measured("dense", 2000), measured("int4-g128", 900)};
  const RecipeEstimate e = estimateOf({{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}}}, b);
  ASSERT_TRUE(e.fromKernelBenchmarks);
  EXPECT_TRUE(e.unmeasuredKernels.empty());
  uint64_t linear = 0;
  double seconds = 0;
  for (const ModuleEstimate& m : e.modules) {
    linear += m.bytes;
    seconds += double(m.bytes) / 1.5e12;   // every block linear at the bitmask kernel's 1500 GB/s
  }
  seconds += double(e.bytesPerToken - linear) / 2e12;   // the output head (and the norm) at dense's 2000 GB/s
  EXPECT_NEAR(e.tokensPerSecond, 1.0 / seconds, 1e-9 / seconds);
  EXPECT_NEAR(e.denseTokensPerSecond, 2e12 / double(e.denseBytesPerToken), 1e-6);
  // The label names the device, the date the rows were recorded and the rates it used (not int4's).
  std::tm local{};
  const std::time_t t = 1700000000;
  localtime_r(&t, &local);
  char date[16];
  std::strftime(date, sizeof date, "%Y-%m-%d", &local);
  EXPECT_EQ(e.bandwidthSource, "bench kernels on NVIDIA H200 (132 SMs), " + std::string(date) +
                                   " (dense 2000 GB/s, bitmask-2:4 1500 GB/s)");
  EXPECT_TRUE(e.notes.empty());

  // Rows from two days: both dates.
  b.kernels[0].recordedAt = 1.7e9 + 3 * 86400;
  const RecipeEstimate twoDays = estimateOf({{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}}}, b);
  EXPECT_NE(twoDays.bandwidthSource.find(std::string(date) + " to "), std::string::npos) << twoDays.bandwidthSource;
}

TEST(RecipeEstimate, FallsBackToBytesOverBandwidthWhenTheKernelsDoNotCoverTheRecipe) {
  DecodeBandwidth b;
  b.bytesPerSecond = 1e11;
  b.source = "measured copy bandwidth";
  b.kernels = {measured("dense", 2000)};
  const RecipeEstimate e = estimateOf({{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}}}, b);
  EXPECT_FALSE(e.fromKernelBenchmarks);
  EXPECT_EQ(e.unmeasuredKernels, std::vector<std::string>{"bitmask-2:4"});
  EXPECT_EQ(e.bandwidthSource, "measured copy bandwidth");
  EXPECT_DOUBLE_EQ(e.tokensPerSecond, 1e11 / double(e.bytesPerToken));
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_THAT(e.notes[0], HasSubstr("lack bitmask-2:4"));
  // A layout no kernel runs cannot be measured at all.
  const RecipeEstimate int3 = estimateOf({{"quantize", {{"method", "rtn"}, {"bits", 3}, {"group_size", 128}}}}, b);
  EXPECT_FALSE(int3.fromKernelBenchmarks);
  ASSERT_EQ(int3.notes.size(), 1u);
  EXPECT_THAT(int3.notes[0], HasSubstr("int3-g128 (no kernel)"));
  // Without kernel rows nothing changes and nothing is noted.
  const RecipeEstimate plain = estimateOf({{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}}},
                                          {1e11, "measured copy bandwidth", {}});
  EXPECT_FALSE(plain.fromKernelBenchmarks);
  EXPECT_TRUE(plain.notes.empty());
  EXPECT_DOUBLE_EQ(plain.tokensPerSecond, e.tokensPerSecond);
  // The dense model alone needs only the dense kernel.
  const RecipeEstimate dense = estimateRecipe(Recipe{}, oneBlockModel(), b);
  EXPECT_TRUE(dense.fromKernelBenchmarks);
  EXPECT_NEAR(dense.tokensPerSecond, dense.denseTokensPerSecond, 1e-9);
}

TEST(RecipeEstimate, SelectsTheNewestBatchOneRowPerKernelOfTheDevice) {
  std::vector<KernelMeasurement> rows = {
      measured("dense", 2100, 3e9),                                  // newest dense: chosen
      measured("bitmask-2:4", 1400, 3e9, "NVIDIA H100 (132 SMs)"),   // another GPU
      measured("bitmask-2:4", 1500, 2e9),                            // chosen
      measured("dense", 1900, 1e9),                                  // older
      measured("int4-g128", 100, 1e9, "cpu (float64 references of the kernels; dense in float32)"),
      measured("int8-channel", std::nan(""), 1e9),                   // no bandwidth
  };
  KernelMeasurement batch4 = measured("spqr-3bit", 800);
  batch4.batch = 4;
  rows.push_back(batch4);
  const std::vector<KernelMeasurement> chosen = selectKernelMeasurements(rows, "NVIDIA H200");
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0].kernel, "dense");
  EXPECT_DOUBLE_EQ(chosen[0].bytesPerSecond, 2.1e12);
  EXPECT_EQ(chosen[1].kernel, "bitmask-2:4");
  EXPECT_DOUBLE_EQ(chosen[1].bytesPerSecond, 1.5e12);

  EXPECT_TRUE(benchmarkDeviceMatches("NVIDIA H200 (132 SMs)", "NVIDIA H200"));
  EXPECT_TRUE(benchmarkDeviceMatches("NVIDIA H200", "NVIDIA H200"));
  EXPECT_FALSE(benchmarkDeviceMatches("NVIDIA H200 (132 SMs)", "NVIDIA H20"));
  EXPECT_FALSE(benchmarkDeviceMatches("NVIDIA H200 (132 SMs)", ""));
  // The CPU's reference timings are never a prediction of decode speed.
  EXPECT_FALSE(benchmarkDeviceMatches("cpu (float64 references of the kernels; dense in float32)", "cpu"));
  EXPECT_TRUE(selectKernelMeasurements(rows, "cpu").empty());
}

TEST(RecipeEstimate, ScalesABenchmarkStepToTheModelsLayers) {
  EXPECT_DOUBLE_EQ(linearStepTokensPerSecond(2.0, 1, 4), 125.0);   // 2 ms a layer, 4 layers: 8 ms a token
  EXPECT_DOUBLE_EQ(linearStepTokensPerSecond(8.0, 4, 4), 125.0);
  EXPECT_EQ(linearStepTokensPerSecond(0, 1, 4), 0);
  EXPECT_EQ(linearStepTokensPerSecond(2.0, 0, 4), 0);
}

// A recipe path pointing at a device, a FIFO, a folder or a huge file is refused naming it, without blocking.
TEST(Recipe, FileMustBeARegularFileOfBoundedSize) {
  const std::string dir = test::scratchDir("recipe-inputs");
  const std::string fifo = dir + "/fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto result = std::async(std::launch::async, [&] { return test::inputErrorOf([&] { Recipe::fromFile(fifo); }); });
  if (result.wait_for(std::chrono::seconds(20)) == std::future_status::timeout) {
    ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
    ADD_FAILURE() << "opening a FIFO recipe blocked";
  }
  EXPECT_EQ(result.get(), fifo + ": not a regular file (a FIFO), expected a recipe");
  EXPECT_EQ(test::inputErrorOf([] { Recipe::fromFile("/dev/zero"); }),
            "/dev/zero: not a regular file (a character device), expected a recipe");
  EXPECT_EQ(test::inputErrorOf([&] { Recipe::fromFile(dir); }), dir + ": is a folder, expected a recipe");
  const std::string big = dir + "/big.json";
  std::ofstream(big).flush();
  std::filesystem::resize_file(big, 100ull << 20);
  EXPECT_EQ(test::inputErrorOf([&] { Recipe::fromFile(big); }),
            big + ": is 100 MiB, more than the 16 MiB a recipe may be");
}

}  // namespace
}  // namespace pareto
