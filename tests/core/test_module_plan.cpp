// The format vocabulary (formats/WeightFormat.h) and the module plan (compress/ModulePlan.h): one name per
// layout that prints and parses back, earlier folders' names mapped, a kernel named where one runs it; and
// for every shipped recipe on ref-small, the instant estimate's bytes and formats are what compress writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "EstimateChecks.h"
#include "SharedData.h"
#include "compress/CompressJob.h"
#include "compress/ModulePlan.h"
#include "compress/Recipe.h"
#include "compress/RecipeEstimate.h"
#include "formats/CompressionManifest.h"
#include "formats/WeightFormat.h"
#include "model/ModelSummary.h"
#include "util/Error.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(WeightFormat, EveryNameParsesBackToItself) {
  for (const char* name :
       {"dense", "bitmask-2:4", "bitmask-16:32", "bitmask-1:4", "int4-g128", "int8-channel", "int4-tensor",
        "int3-g64-asym", "int8-g32", "spqr-3bit", "spqr-4bit-g32", "spqr-2bit-s4", "spqr-3bit-g8-s2",
        "bitmask-2:4+int4-g128", "bitmask-4:8+int8-channel", "bitmask-2:4+spqr-3bit", "bitmask-2:4+int4-g64-asym",
        "gguf-q8_0", "gguf-q4_0", "gguf-q4_k", "gguf-q6_k"}) {
    const WeightFormat f = WeightFormat::parse(name);
    EXPECT_EQ(f.name(), name);
    EXPECT_EQ(WeightFormat::parse(f.name()), f) << name;
  }
  for (const char* bad : {"", "int4", "spqr3", "int9-g128", "int4-g0", "bitmask-3:4+", "bitmask-2:3", "bitmask-4:2",
                          "int4-g128+bitmask-2:4", "spqr-3bit+int4-g128", "dense+int4-g128", "int4-g128-sym",
                          "gguf-q5_1", "gguf-f16", "gguf-Q4_K", "bitmask-2:4+gguf-q4_0", "gguf-q4_0-asym"}) {
    try {
      WeightFormat::parse(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("unknown weight format \"" + std::string(bad) + "\"")) << bad;
    }
  }
}

TEST(WeightFormat, NamesTheKernelThatRunsIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"dense", "dense"},
      {"bitmask-2:4", "bitmask-2:4"},
      {"int4-g128", "int4-g128"},
      {"int4-g128-asym", "int4-g128"},   // the kernels read the zero points: one kernel for both grids
      {"int8-channel", "int8-channel"},
      {"int4-tensor", ""},
      {"int3-g128", ""},
      {"spqr-3bit", "spqr-3bit"},
      {"spqr-5bit", ""},
      {"bitmask-2:4+int4-g128", "bitmask-2:4+int4-g128"},
      {"bitmask-2:4+int8-channel", ""},
      {"bitmask-2:4+spqr-3bit", ""},
      {"gguf-q4_k", ""}};   // runs dense, dequantized at load
  for (const auto& [name, kernel] : cases) EXPECT_EQ(WeightFormat::parse(name).kernel(), kernel) << name;
}

TEST(WeightFormat, GgufBitsPerWeightAreGgmls) {
  EXPECT_DOUBLE_EQ(WeightFormat::parse("gguf-q8_0").blockBitsPerWeight(), 8.5);
  EXPECT_DOUBLE_EQ(WeightFormat::parse("gguf-q4_0").blockBitsPerWeight(), 4.5);
  EXPECT_DOUBLE_EQ(WeightFormat::parse("gguf-q4_k").blockBitsPerWeight(), 4.5);
  EXPECT_DOUBLE_EQ(WeightFormat::parse("gguf-q6_k").blockBitsPerWeight(), 6.5625);
  EXPECT_DOUBLE_EQ(WeightFormat::parse("int4-g128").blockBitsPerWeight(), 0);   // depends on the shape
  EXPECT_TRUE(WeightFormat::parse("gguf-q4_k").isQuantized());
  EXPECT_NE(WeightFormat::parse("gguf-q4_k"), WeightFormat::parse("gguf-q4_0"));
}

// Folders of format version 2 stored "int4", "spqr3", "bitmask-2:4+int4" with the grid beside the name.
TEST(WeightFormat, NamesOfEarlierFoldersAreMapped) {
  EXPECT_EQ(WeightFormat::fromStored("int4", 128, 4096, true, 0, 0).name(), "int4-g128");
  EXPECT_EQ(WeightFormat::fromStored("int8", 4096, 4096, true, 0, 0).name(), "int8-channel");
  EXPECT_EQ(WeightFormat::fromStored("int4", 64, 4096, false, 0, 0).name(), "int4-g64-asym");
  EXPECT_EQ(WeightFormat::fromStored("bitmask-2:4+int4", 64, 4096, true, 0, 0).name(), "bitmask-2:4+int4-g64");
  EXPECT_EQ(WeightFormat::fromStored("bitmask-2:4+int8", 2048, 4096, true, 0, 0).name(), "bitmask-2:4+int8-channel");
  EXPECT_EQ(WeightFormat::fromStored("spqr3", 0, 4096, true, 16, 3).name(), "spqr-3bit");
  EXPECT_EQ(WeightFormat::fromStored("bitmask-2:4+spqr4", 0, 4096, true, 32, 3).name(), "bitmask-2:4+spqr-4bit-g32");
  EXPECT_EQ(WeightFormat::fromStored("bitmask-2:4", 0, 4096, true, 0, 0).name(), "bitmask-2:4");
  EXPECT_EQ(WeightFormat::fromStored("int4-g128", 128, 4096, true, 0, 0).name(), "int4-g128");   // today's
  EXPECT_THROW(WeightFormat::fromStored("int4x", 128, 4096, true, 0, 0), InputError);
}

// A folder of format version 2 (names without their grid) loads, and reads as today's names.
TEST(WeightFormat, AVersionTwoManifestReadsAsTodaysNames) {
  const std::string dir = test::scratchDir("manifest-v2");
  std::ofstream(dir + "/pareto.json") << R"({"format_version": 2, "modules": {
      "a": {"format": "int4", "quant": {"bits": 4, "symmetric": true, "group_size": 128}, "shape": [64, 256]},
      "b": {"format": "bitmask-2:4+int4", "quant": {"bits": 4, "symmetric": true, "group_size": 64},
            "shape": [64, 256]},
      "c": {"format": "spqr3", "spqr": {"bits": 3, "scale_bits": 3, "group_size": 16, "scale_group": 16}},
      "d": {"format": "bitmask-2:4"}, "e": {"format": "dense"}}})";
  const auto m = CompressionManifest::readFrom(dir);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->find("a")->format, "int4-g128");
  EXPECT_EQ(m->find("b")->format, "bitmask-2:4+int4-g64");
  EXPECT_EQ(m->find("c")->format, "spqr-3bit");
  EXPECT_EQ(m->find("d")->format, "bitmask-2:4");
  EXPECT_EQ(m->find("e")->format, "dense");
  // Today's name must agree with the grid it records.
  std::ofstream(dir + "/pareto.json") << R"({"format_version": 3, "modules": {
      "a": {"format": "int4-g64", "quant": {"bits": 4, "symmetric": true, "group_size": 128}, "shape": [64, 256]}}})";
  try {
    CompressionManifest::readFrom(dir);
    FAIL() << "a name disagreeing with its grid was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("format \"int4-g64\" disagrees with its grid record"));
  }
}

TEST(ModulePlan, DecidesTheLayoutAndRefusesWhatTheJobWould) {
  const Recipe r24int4 = Recipe::fromJson(
      {{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}},
       {"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 32}}}},
      "", "r.json");
  ModulePlan p = planModule(r24int4, "model.layers.0.mlp.up_proj", 512, 192);
  EXPECT_EQ(p.format.name(), "bitmask-2:4+int4-g32");
  EXPECT_EQ(p.method(), "magnitude+rtn");
  EXPECT_EQ(p.valueColumns(), 96);
  // 40 columns take 2:4 but fill no mask word (no bitmask), and no groups of 32: refused.
  EXPECT_THROW(planModule(r24int4, "m", 512, 40), InputError);
  // A group that does not divide the row: the largest power-of-two fraction of it that does (at least 32), said
  // in the note; the solvers get that grid.
  const Recipe g128 = Recipe::fromJson({{"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 128}}}}, "", "r.json");
  ModulePlan narrowed = planModule(g128, "model.layers.0.self_attn.q_proj", 192, 192);
  EXPECT_EQ(narrowed.format.name(), "int4-g64");
  EXPECT_EQ(narrowed.quant->grid.groupSize, 64);
  EXPECT_THAT(narrowed.note, HasSubstr("groups of 64 instead of 128"));
  EXPECT_TRUE(planModule(g128, "model.layers.0.mlp.down_proj", 192, 512).note.empty());
  const Recipe g128on24 = Recipe::fromJson({{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}},
                                            {"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 128}}}},
                                           "", "r.json");
  EXPECT_EQ(planModule(g128on24, "m", 512, 192).format.name(), "bitmask-2:4+int4-g32");   // 96 kept values a row
  const Recipe g100 = Recipe::fromJson({{"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 100}}}}, "", "r.json");
  EXPECT_THROW(planModule(g100, "m", 192, 192), InputError);
  const Recipe gptqAct = Recipe::fromJson(
      {{"calibration", {{"source", "text"}, {"text", "t.txt"}}},
       {"quantize", {{"method", "gptq"}, {"bits", 4}, {"group_size", 64}, {"act_order", true}}}},
      "", "r.json");
  try {
    planModule(gptqAct, "model.layers.0.mlp.up_proj", 512, 192);
    FAIL() << "act-order with dynamic groups was planned";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.layers.0.mlp.up_proj: GPTQ act-order with groups"));
  }
  const Recipe skipped = Recipe::fromJson({{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}}},
                                           {"skip", {"*.down_proj"}}},
                                          "", "r.json");
  EXPECT_FALSE(planModule(skipped, "model.layers.0.mlp.down_proj", 192, 512).touched());
  EXPECT_EQ(planModule(skipped, "model.layers.0.mlp.down_proj", 192, 512).format.name(), "dense");
}

TEST(ModulePlan, GgufFormatsFallBackOnNarrowRowsAsExportDoesAndRefusePruning) {
  auto recipe = [](const std::string& format) {
    return Recipe::fromJson({{"quantize", {{"method", "rtn"}, {"format", format}}}}, "", "r.json");
  };
  const ModulePlan wide = planModule(recipe("gguf-q4_k"), "model.layers.0.mlp.down_proj", 384, 1024);
  EXPECT_EQ(wide.format.name(), "gguf-q4_k");
  EXPECT_EQ(wide.note, "");
  EXPECT_EQ(wide.pattern(), "gguf-q4_k");
  EXPECT_EQ(wide.storedBytes(2), uint64_t(384 * 4 * 144));   // 4 super-blocks of 144 bytes a row
  const ModulePlan narrow = planModule(recipe("gguf-q4_k"), "model.layers.0.mlp.up_proj", 1024, 384);
  EXPECT_EQ(narrow.format.name(), "gguf-q4_0");
  EXPECT_THAT(narrow.note, HasSubstr("gguf-q4_k → gguf-q4_0: 384 input columns are not whole 256-weight"));
  EXPECT_EQ(narrow.storedBytes(2), uint64_t(1024 * 12 * 18));
  EXPECT_EQ(planModule(recipe("gguf-q6_k"), "m", 1024, 384).format.name(), "gguf-q8_0");
  EXPECT_EQ(planModule(recipe("gguf-q8_0"), "m", 1024, 384).note, "");
  try {
    planModule(recipe("gguf-q4_0"), "model.layers.0.mlp.up_proj", 64, 48);
    FAIL() << "48 columns were planned on a 32-weight block";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.layers.0.mlp.up_proj: 48 input columns are not a multiple of 32"));
  }
  const Recipe pruned = Recipe::fromJson({{"prune", {{"method", "magnitude"}, {"sparsity", 0.5}}},
                                          {"quantize", {{"method", "rtn"}, {"format", "gguf-q4_0"}}}},
                                         "", "r.json");
  try {
    planModule(pruned, "model.layers.0.mlp.up_proj", 64, 256);
    FAIL() << "pruning with a GGUF grid was planned";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.layers.0.mlp.up_proj: gguf-q4_0 cannot be combined with pruning"));
  }
}

// Every shipped recipe on ref-small: the estimate (from headers alone) names each module's format as compress
// stores it and counts the bytes compress writes. Calibration is cut short; it changes values, not layouts.
TEST(ModulePlan, EveryShippedRecipeIsEstimatedAsCompressWritesIt) {
  PARETO_REQUIRE_SHARED();
  const std::string scratch = test::scratchDir("module-plan-recipes");
  const std::string model = test::sharedPath("models/ref-small");
  const ModelSummary summary = summarizeModel(model);
  int recipes = 0;
  for (const auto& entry : fs::directory_iterator(PARETO_SOURCE_DIR "/resources/recipes")) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().filename().string());
    nlohmann::json doc = nlohmann::json::parse(std::ifstream(entry.path()));
    if (doc.contains("calibration")) {
      doc["calibration"]["tokens"] = 256;
      if (doc["calibration"]["source"] == "decode") doc["calibration"]["max_new_tokens"] = 16;
      if (doc["calibration"]["source"] == "text") doc["calibration"]["window"] = 64;
      const char* key = doc["calibration"]["source"] == "text" ? "text" : "prompts";
      doc["calibration"][key] = (entry.path().parent_path() / doc["calibration"][key].get<std::string>()).string();
      if (!fs::exists(doc["calibration"][key].get<std::string>()))
        doc["calibration"][key] = test::sharedPath(doc["calibration"]["source"] == "text" ? "data/heldout-prose.txt"
                                                                                           : "data/prompts-prose.txt");
    }
    const std::string path = scratch + "/" + entry.path().filename().string();
    std::ofstream(path) << doc.dump();
    const RecipeEstimate e = estimateRecipe(Recipe::fromFile(path), summary, {});
    ASSERT_TRUE(e.problems.empty()) << e.problems.front();
    CompressOptions o;
    o.modelDir = model;
    o.recipePath = path;
    o.outDir = scratch + "/out-" + entry.path().stem().string();
    const CompressReport r = runCompress(o);
    test::expectEstimateIsWhatWasWritten(e, r);
    for (const ModuleReport& m : r.modules) EXPECT_NO_THROW(WeightFormat::parse(m.format)) << m.format;
    // The folder's manifest stores the same names.
    const auto manifest = CompressionManifest::readFrom(o.outDir);
    ASSERT_TRUE(manifest);
    for (const ModuleReport& m : r.modules) EXPECT_EQ(manifest->find(m.name)->format, m.format) << m.name;
    ++recipes;
  }
  EXPECT_GE(recipes, 12);
}

}  // namespace
}  // namespace pareto
