// The compress job end to end on ref-tiny: output folder contents, loading it back, equality with the same
// weights applied in memory, and nothing left behind on failure or cancel.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "SharedData.h"
#include "TestRuntime.h"
#include "calib/SequentialPass.h"
#include "calib/TextCalibration.h"
#include "compress/CompressJob.h"
#include "compress/MagnitudePrune.h"
#include "compress/QuantGrid.h"
#include "compress/SparseGpt.h"
#include "eval/Perplexity.h"
#include "model/LoadedModel.h"
#include "model/ModelSummary.h"
#include "model/Safetensors.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class CompressJob : public ::testing::Test {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    dir_ = test::scratchDir("compress-job");
    model_ = test::sharedPath("models/ref-tiny");
  }
  std::string writeRecipe(const std::string& name, const std::string& json) {
    std::ofstream(dir_ + "/" + name) << json;
    return dir_ + "/" + name;
  }
  std::string textRecipe(const std::string& method, const std::string& patternKey) {
    return writeRecipe(method + ".json", R"({"calibration": {"source": "text", "text": ")" +
                                             test::sharedPath("data/heldout-prose.txt") +
                                             R"(", "tokens": 512, "window": 128},
                                              "prune": {"method": ")" + method + "\", " + patternKey + "}}");
  }
  CompressOptions options(const std::string& recipe, const std::string& out) {
    CompressOptions o;
    o.modelDir = model_;
    o.recipePath = recipe;
    o.outDir = dir_ + "/" + out;
    o.runtime = test::testRuntime();
    return o;
  }
  double perplexity(const LoadedModel& m) {
    static const std::vector<TokenId> ids =
        m.tokenizer->encode(readTextFile(test::sharedPath("data/heldout-python.txt")));
    PerplexityOptions o;
    o.window = 128;
    o.maxWindows = 6;
    return computePerplexity(*m.model, ids, o).ppl;
  }
  // The model's weights as the output folder stores them (bf16, the checkpoint's dtype).
  static void roundToCheckpointDtype(LoadedModel& m) {
    for (int64_t l = 0; l < m.model->numLayers(); ++l)
      for (auto& [g, lin] : m.model->layerLinears(l))
        lin->setWeight(lin->weight().to(at::kBFloat16).to(lin->weight().scalar_type()));
  }
  std::string dir_, model_;
};

TEST_F(CompressJob, Magnitude24WritesPackedWeightsThatLoadBackExactly) {
  CompressReport r = runCompress(options(writeRecipe("m.json", R"({"prune": {"method": "magnitude", "pattern": "2:4"}})"), "out"));
  const std::string out = dir_ + "/out";
  for (const char* f : {"config.json", "tokenizer.json", "model.safetensors", "pareto.json"})
    EXPECT_TRUE(fs::exists(out + "/" + f)) << f;
  EXPECT_FALSE(fs::exists(dir_ + "/.out.partial"));
  EXPECT_EQ(r.modules.size(), 7u * 4u);
  for (const auto& m : r.modules) {
    EXPECT_EQ(m.format, "bitmask-2:4") << m.name;
    EXPECT_NEAR(m.sparsity, 0.5, 1e-9) << m.name;
    EXPECT_DOUBLE_EQ(m.bitsPerWeight, 9.0) << m.name;   // bf16 halves + one mask bit per weight
  }
  Checkpoint ckpt = Checkpoint::open(out);
  EXPECT_NE(ckpt.find("model.layers.0.mlp.up_proj.weight.bitmask"), nullptr);
  EXPECT_EQ(ckpt.find("model.layers.0.mlp.up_proj.weight"), nullptr);

  LoadedModel compressed = loadModel(out, test::testRuntime());
  LoadedModel inMemory = loadModel(model_, test::testRuntime());
  for (int64_t l = 0; l < inMemory.model->numLayers(); ++l)
    for (auto& [g, lin] : inMemory.model->layerLinears(l))
      lin->setWeight(magnitudePrune(lin->weight(), SparsityPattern::nm(2, 4)).weight);
  EXPECT_DOUBLE_EQ(perplexity(compressed), perplexity(inMemory));

  ModelSummary s = summarizeModel(out);
  EXPECT_TRUE(s.compressed);
  EXPECT_NEAR(s.linearBitsPerWeight, 9.0, 1e-9);
  EXPECT_EQ(s.parameters, summarizeModel(model_).parameters);
  EXPECT_THAT(toText(s), HasSubstr("bitmask-2:4"));
}

TEST_F(CompressJob, SparseGptOutputEqualsTheSamePassInMemory) {
  const std::string recipe = textRecipe("sparsegpt", R"("pattern": "2:4")");
  runCompress(options(recipe, "sgpt"));
  LoadedModel compressed = loadModel(dir_ + "/sgpt", test::testRuntime());

  LoadedModel inMemory = loadModel(model_, test::testRuntime());
  Recipe r = Recipe::fromFile(recipe);
  TextCalibrationOptions t;
  t.tokens = 512;
  t.window = 128;
  CalibrationSet data = textCalibration(*inMemory.tokenizer, r.calibration->file, t);
  runSequentialPass(*inMemory.model, data, [](const std::string& name, const at::Tensor& w, const HessianAccumulator& h) {
    return sparseGptPrune(w, h.sum(), SparsityPattern::nm(2, 4), {}, name).pruned.weight;
  });
  roundToCheckpointDtype(inMemory);
  const double a = perplexity(compressed), b = perplexity(inMemory);
  EXPECT_NEAR(a, b, 1e-6 * b);
  const double dense = perplexity(loadModel(model_, test::testRuntime()));
  EXPECT_GT(a, dense);   // pruning half the weights costs something
}

TEST_F(CompressJob, UnstructuredIsStoredDenseWithZeros) {
  CompressReport r = runCompress(options(textRecipe("wanda", R"("sparsity": 0.5)"), "wanda"));
  for (const auto& m : r.modules) {
    EXPECT_EQ(m.format, "dense");
    EXPECT_NEAR(m.sparsity, 0.5, 0.01) << m.name;
  }
  EXPECT_NO_THROW(loadModel(dir_ + "/wanda", test::testRuntime()));
}

TEST_F(CompressJob, ExistingOutputIsKeptUnlessOverwrite) {
  const std::string recipe = writeRecipe("m.json", R"({"prune": {"method": "magnitude", "sparsity": 0.3}})");
  runCompress(options(recipe, "o"));
  try {
    runCompress(options(recipe, "o"));
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("already exists"));
  }
  CompressOptions o = options(recipe, "o");
  o.overwrite = true;
  EXPECT_NO_THROW(runCompress(o));
  EXPECT_TRUE(fs::exists(dir_ + "/o/pareto.json"));
  EXPECT_FALSE(fs::exists(dir_ + "/.o.old"));
}

TEST_F(CompressJob, FailureAndCancelLeaveNothingBehind) {
  // A recipe whose calibration text does not exist fails after the model is loaded.
  const std::string bad = writeRecipe("bad.json", R"({"calibration": {"source": "text", "text": "missing.txt"},
                                                       "prune": {"method": "wanda", "sparsity": 0.5}})");
  EXPECT_THROW(runCompress(options(bad, "failed")), InputError);
  EXPECT_FALSE(fs::exists(dir_ + "/failed"));
  EXPECT_FALSE(fs::exists(dir_ + "/.failed.partial"));

  CancelToken cancel;
  int calls = 0;
  auto progress = [&](const ProgressUpdate&) {
    if (++calls == 2) cancel.cancel();
  };
  EXPECT_THROW(runCompress(options(textRecipe("sparsegpt", R"("pattern": "2:4")"), "cancelled"), progress, &cancel),
               Cancelled);
  EXPECT_FALSE(fs::exists(dir_ + "/cancelled"));
  EXPECT_FALSE(fs::exists(dir_ + "/.cancelled.partial"));
}

TEST_F(CompressJob, RefusesToCompressACompressedFolder) {
  const std::string recipe = writeRecipe("m.json", R"({"prune": {"method": "magnitude", "pattern": "2:4"}})");
  runCompress(options(recipe, "once"));
  CompressOptions again = options(recipe, "twice");
  again.modelDir = dir_ + "/once";
  EXPECT_THROW(runCompress(again), InputError);
}

// Quantized folders store codes (not weights): loading them back gives exactly the weights the pass installed.
TEST_F(CompressJob, QuantizedFormatsLoadBackExactlyAndCountTheirBytes) {
  const std::string text = test::sharedPath("data/heldout-prose.txt");
  struct Case {
    std::string name, recipe, format;
    double bitsPerWeight;   // over the block linears of ref-tiny
  };
  const std::vector<Case> cases = {
      {"rtn4", R"({"quantize": {"method": "rtn", "bits": 4, "group_size": 64}})", "int4", 4.25},
      {"rtn3asym", R"({"quantize": {"method": "rtn", "bits": 3, "granularity": "channel", "symmetric": false}})", "int3", -1},
      {"gptq4", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 256, "window": 128},
                    "quantize": {"method": "gptq", "bits": 4, "group_size": 64}})", "int4", 4.25},
      {"spqr3", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 256, "window": 128},
                    "quantize": {"method": "spqr", "bits": 3, "outlier_ratio": 0.01}})", "spqr3", -1},
      {"s24int4", R"({"prune": {"method": "magnitude", "pattern": "2:4"},
                      "quantize": {"method": "rtn", "bits": 4, "group_size": 32}})", "bitmask-2:4+int4",
       0.5 * (4 + 16.0 / 32) + 1}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    CompressReport r = runCompress(options(writeRecipe(c.name + ".json", c.recipe), c.name));
    uint64_t storedBits = 0, weights = 0;
    for (const auto& m : r.modules) {
      EXPECT_EQ(m.format, c.format) << m.name;
      if (c.bitsPerWeight > 0) EXPECT_NEAR(m.bitsPerWeight, c.bitsPerWeight, 1e-9) << m.name;
    }
    // Every module's bits per weight is what its tensors in the file hold.
    Checkpoint ckpt = Checkpoint::open(dir_ + "/" + c.name);
    LoadedModel loaded = loadModel(dir_ + "/" + c.name, test::testRuntime());
    for (int64_t l = 0; l < loaded.model->numLayers(); ++l) {
      for (const auto& [g, lin] : loaded.model->layerLinears(l)) {
        uint64_t bytes = 0;
        for (const TensorEntry* e : ckpt.tensors())
          if (e->name.rfind(lin->name() + ".weight.", 0) == 0) bytes += e->nbytes;
        const auto it = std::find_if(r.modules.begin(), r.modules.end(),
                                     [&](const ModuleReport& m) { return m.name == lin->name(); });
        ASSERT_NE(it, r.modules.end());
        EXPECT_NEAR(it->bitsPerWeight, 8.0 * bytes / lin->weight().numel(), 1e-9) << lin->name();
        storedBits += bytes * 8;
        weights += static_cast<uint64_t>(lin->weight().numel());
      }
    }
    EXPECT_NEAR(r.linearBitsPerWeight, double(storedBits) / weights, 1e-9);
    EXPECT_TRUE(std::isfinite(perplexity(loaded)));
  }
  // RTN needs no calibration: the in-memory result must equal the folder exactly.
  LoadedModel folder = loadModel(dir_ + "/rtn4", test::testRuntime());
  LoadedModel inMemory = loadModel(model_, test::testRuntime());
  for (int64_t l = 0; l < inMemory.model->numLayers(); ++l)
    for (auto& [g, lin] : inMemory.model->layerLinears(l))
      lin->setWeight(rtnQuantize(lin->weight(), QuantSpec::group(4, 64), lin->name()).dequantized);
  EXPECT_DOUBLE_EQ(perplexity(folder), perplexity(inMemory));
}

}  // namespace
}  // namespace pareto
