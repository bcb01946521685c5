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
#include "checkpoint/Safetensors.h"
#include "compress/CompressJob.h"
#include "compress/CompressResume.h"
#include "compress/MagnitudePrune.h"
#include "compress/QuantGrid.h"
#include "compress/SparseGpt.h"
#include "compress/Spqr.h"
#include "eval/Perplexity.h"
#include "model/LoadedModel.h"
#include "util/OutputFolder.h"
#include "model/ModelSummary.h"
#include "model/TensorIO.h"
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
  const CompressReport report = runCompress(options(recipe, "sgpt"));
  // Where the solve's time went, summed over the modules: its steps inside the whole modules' time.
  const auto& stages = report.passStageSeconds;
  const auto summed = [&](const std::string& step) {
    const auto it = stages.find("solve: " + step + " (summed over the modules)");
    return it == stages.end() ? -1.0 : it->second;
  };
  const double whole = summed("whole module");
  EXPECT_GT(whole, 0);
  for (const char* step : {"inputs", "damped inverse", "sweep"}) {
    EXPECT_GT(summed(step), 0) << step;
    EXPECT_LE(summed(step), whole) << step;
  }
  EXPECT_LE(summed("inputs") + summed("damped inverse") + summed("sweep"), whole * (1 + 1e-9));
  // The sweep's parts, a lazy block at a time, inside the sweep: on the CPU every block goes column by column.
  const double parts = summed("sweep: block setup, host") + summed("sweep: column by column, host") +
                       summed("sweep: propagate, host") + summed("sweep: the device's queued work");
  EXPECT_GT(summed("sweep: column by column, host"), 0);
  EXPECT_GT(summed("sweep: propagate, host"), 0);
  EXPECT_LE(parts, summed("sweep") * (1 + 1e-9));
  EXPECT_EQ(summed("sweep: block kernel, host"), -1.0) << "the CPU has no block kernel";
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
      {"rtn4", R"({"quantize": {"method": "rtn", "bits": 4, "group_size": 64}})", "int4-g64", 4.25},
      {"rtn3asym", R"({"quantize": {"method": "rtn", "bits": 3, "granularity": "channel", "symmetric": false}})", "int3-channel-asym", -1},
      {"gptq4", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 256, "window": 128},
                    "quantize": {"method": "gptq", "bits": 4, "group_size": 64}})", "int4-g64", 4.25},
      {"spqr3", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 256, "window": 128},
                    "quantize": {"method": "spqr", "bits": 3, "outlier_ratio": 0.003}})", "spqr-3bit", -1},
      {"s24int4", R"({"prune": {"method": "magnitude", "pattern": "2:4"},
                      "quantize": {"method": "rtn", "bits": 4, "group_size": 32}})", "bitmask-2:4+int4-g32",
       0.5 * (4 + 16.0 / 32) + 1},
      {"s24gptq4", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 256, "window": 128},
                       "prune": {"method": "sparsegpt", "pattern": "2:4"},
                       "quantize": {"method": "gptq", "bits": 4, "group_size": 32}})", "bitmask-2:4+int4-g32",
       0.5 * (4 + 16.0 / 32) + 1},
      {"s24spqr3", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 256, "window": 128},
                       "prune": {"method": "sparsegpt", "pattern": "2:4"},
                       "quantize": {"method": "spqr", "bits": 3, "outlier_ratio": 0.003}})", "bitmask-2:4+spqr-3bit", -1},
      {"w50gptq4", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 256, "window": 128},
                       "prune": {"method": "wanda", "sparsity": 0.5},
                       "quantize": {"method": "gptq", "bits": 4, "group_size": 64}})", "int4-g64", 4.25},
      {"gptq4act", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 256, "window": 128},
                       "quantize": {"method": "gptq", "bits": 4, "group_size": 64, "act_order": true,
                                    "static_groups": true}})", "int4-g64", -1}};
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
    // inspect counts the same bytes.
    const ModelSummary summary = summarizeModel(dir_ + "/" + c.name);
    EXPECT_NEAR(summary.linearBitsPerWeight, r.linearBitsPerWeight, 1e-9);
    for (const auto& m : summary.modules) {
      const auto it = std::find_if(r.modules.begin(), r.modules.end(),
                                   [&](const ModuleReport& x) { return x.name == m.name; });
      ASSERT_NE(it, r.modules.end());
      EXPECT_NEAR(m.bitsPerWeight, it->bitsPerWeight, 1e-9) << m.name;
    }
    // Pruned then quantized: the pruned weights are exactly 0 in the loaded model.
    if (c.name == "w50gptq4" || c.name.rfind("s24", 0) == 0)
      for (const auto& m : r.modules) EXPECT_NEAR(m.sparsity, 0.5, 0.01) << m.name;
  }
  {
    // SpQR 3-bit g16 with 0.3% outliers on ref-tiny: 3.5 + 32 · 0.003 + 32 / cols (int32 row offsets).
    const ModelSummary spqr = summarizeModel(dir_ + "/spqr3");
    EXPECT_GT(spqr.linearBitsPerWeight, 3.5 + 0.096);
    EXPECT_LT(spqr.linearBitsPerWeight, 3.5 + 0.096 + 32.0 / 192 + 1e-9);
  }
  // RTN needs no calibration: the in-memory result must equal the folder exactly.
  LoadedModel folder = loadModel(dir_ + "/rtn4", test::testRuntime());
  LoadedModel inMemory = loadModel(model_, test::testRuntime());
  for (int64_t l = 0; l < inMemory.model->numLayers(); ++l)
    for (auto& [g, lin] : inMemory.model->layerLinears(l))
      lin->setWeight(rtnQuantize(lin->weight(), QuantSpec::group(4, 64), lin->name()).dequantized);
  EXPECT_DOUBLE_EQ(perplexity(folder), perplexity(inMemory));
}

// A SpQR folder stores codes, not weights: loading it gives bit for bit the weights the solver returned in the
// same sequential pass run in memory.
TEST_F(CompressJob, SpqrFolderLoadsExactlyTheSolversWeights) {
  const std::string text = test::sharedPath("data/heldout-prose.txt");
  const std::string recipe = writeRecipe("spqr.json", R"({"calibration": {"source": "text", "text": ")" + text +
                                                          R"(", "tokens": 256, "window": 128},
                                                          "quantize": {"method": "spqr", "outlier_ratio": 0.003}})");
  runCompress(options(recipe, "spqr"));
  LoadedModel folder = loadModel(dir_ + "/spqr", test::testRuntime());

  LoadedModel inMemory = loadModel(model_, test::testRuntime());
  TextCalibrationOptions t;
  t.tokens = 256;
  t.window = 128;
  CalibrationSet data = textCalibration(*inMemory.tokenizer, text, t);
  SpqrOptions o;
  o.outlierRatio = 0.003;
  runSequentialPass(*inMemory.model, data, [&](const std::string& name, const at::Tensor& w, const HessianAccumulator& h) {
    return name == "lm_head" ? at::Tensor() : spqrQuantize(w, h.sum(), o, name).dequantized;
  });
  int64_t compared = 0;
  for (int64_t l = 0; l < inMemory.model->numLayers(); ++l) {
    auto expected = inMemory.model->layerLinears(l);
    auto actual = folder.model->layerLinears(l);
    ASSERT_EQ(expected.size(), actual.size());
    for (size_t k = 0; k < expected.size(); ++k, ++compared)
      EXPECT_TRUE(at::equal(actual[k].second->weight(), expected[k].second->weight())) << actual[k].second->name();
  }
  EXPECT_EQ(compared, 7 * 4);
}

// Act-order: the permutation is stored, is checked on load, and inspect says so.
TEST_F(CompressJob, ActOrderStoresAndChecksThePermutation) {
  const std::string text = test::sharedPath("data/heldout-prose.txt");
  const std::string recipe = writeRecipe("act.json", R"({"calibration": {"source": "text", "text": ")" + text +
                                                         R"(", "tokens": 256, "window": 128},
                                                         "quantize": {"method": "gptq", "bits": 4, "group_size": 64,
                                                                      "act_order": true, "static_groups": true}})");
  runCompress(options(recipe, "act"));
  const std::string module = "model.layers.1.mlp.down_proj";
  {
    Checkpoint ckpt = Checkpoint::open(dir_ + "/act");
    const TensorEntry* perm = ckpt.find(module + ".weight.qperm");
    ASSERT_NE(perm, nullptr);
    EXPECT_EQ(perm->dtype, DType::I32);
    EXPECT_EQ(perm->shape, std::vector<int64_t>{512});
    EXPECT_TRUE(at::equal(std::get<0>(readTensor(*perm).sort()), at::arange(512, at::kInt)));
  }
  EXPECT_NO_THROW(loadModel(dir_ + "/act", test::testRuntime()));
  const ModelSummary summary = summarizeModel(dir_ + "/act");
  ASSERT_FALSE(summary.modules.empty());
  for (const auto& m : summary.modules) EXPECT_TRUE(m.actOrder) << m.name;
  EXPECT_THAT(toText(summary), HasSubstr("act-order"));

  // A copy whose permutation repeats a column is refused, naming the file and the tensor.
  fs::copy(dir_ + "/act", dir_ + "/act-bad", fs::copy_options::recursive);
  NamedTensors tensors;
  {
    Checkpoint ckpt = Checkpoint::open(dir_ + "/act");
    for (const TensorEntry* e : ckpt.tensors()) {
      at::Tensor t = readTensor(*e);
      if (e->name == module + ".weight.qperm") t[5] = t[6].item<int>();
      tensors.emplace_back(e->name, t);
    }
  }
  const std::string file = dir_ + "/act-bad/model.safetensors";
  writeSafetensors(file, tensors);
  try {
    loadModel(dir_ + "/act-bad", test::testRuntime());
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.safetensors"));
    EXPECT_THAT(e.what(), HasSubstr(module + ".weight.qperm"));
    EXPECT_THAT(e.what(), HasSubstr("not a permutation"));
  }
}

}  // namespace
}  // namespace pareto

namespace pareto {
namespace {

// A cancelled compress keeps its finished layers; --resume continues from them and writes what an
// uninterrupted run writes. The workbench's runs (keepFinishedLayers off) keep nothing.
TEST_F(CompressJob, ResumeContinuesACancelledRunToTheSameResult) {
  const std::string recipe = textRecipe("sparsegpt", R"("pattern": "2:4")");
  runCompress(options(recipe, "whole"));

  CancelToken cancel;
  auto cancelAfterTwoLayers = [&](const ProgressUpdate& u) {
    if (u.stage == "sequential pass" && u.message.rfind("layer 2/4", 0) == 0) cancel.cancel();
  };
  EXPECT_THROW(runCompress(options(recipe, "part"), cancelAfterTwoLayers, &cancel), Cancelled);
  EXPECT_FALSE(fs::exists(dir_ + "/part"));
  const InterruptedCompress kept = interruptedCompress(dir_ + "/part");
  EXPECT_EQ(kept.layersDone, 2);
  EXPECT_THAT(kept.staging, HasSubstr("/.part.partial-"));
  // What a resume starts from: the layers' stored forms and one set of block inputs, those of the first block not
  // done (no weights as held: a 70B's would be hundreds of GB).
  std::vector<std::string> files;
  for (const auto& f : fs::directory_iterator(fs::path(kept.staging) / kResumeFolder))
    files.push_back(f.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"inputs-00002.safetensors", "layer-00000.json",
                                             "layer-00000.safetensors", "layer-00001.json",
                                             "layer-00001.safetensors", "state.json"}));
  const SafetensorsFile layer0((fs::path(kept.staging) / kResumeFolder / "layer-00000.safetensors").string());
  for (const TensorEntry& e : layer0.tensors()) {
    EXPECT_THAT(e.name, ::testing::StartsWith("model.layers.0."));
    EXPECT_THAT(e.name, ::testing::HasSubstr(".weight."));   // the stored parts (bitmask, values), no other weight
  }

  CompressOptions again = options(recipe, "part");
  EXPECT_THROW(runCompress(again), InputError);   // would throw the finished layers away
  again.resume = true;
  again.batch = 3;   // not the interrupted run's
  try {
    runCompress(again);
    FAIL() << "a resume with another batch was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("another batch"));
  }
  again.batch = 0;
  std::vector<std::string> messages;
  runCompress(again, [&](const ProgressUpdate& u) { messages.push_back(u.stage + ": " + u.message); });
  EXPECT_THAT(messages, ::testing::Contains("resume: 2 of 4 layers already done"));
  EXPECT_EQ(interruptedCompress(dir_ + "/part").layersDone, 0);
  const Checkpoint a = Checkpoint::open(dir_ + "/whole"), b = Checkpoint::open(dir_ + "/part");
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const TensorEntry& x = *a.tensors()[i];
    const TensorEntry& y = *b.tensors()[i];
    ASSERT_EQ(x.name, y.name);
    EXPECT_TRUE(readTensor(x).equal(readTensor(y))) << x.name;
  }

  CompressOptions workbench = options(recipe, "gui");
  workbench.keepFinishedLayers = false;
  CancelToken cancel2;
  EXPECT_THROW(runCompress(workbench,
                           [&](const ProgressUpdate& u) {
                             if (u.message.rfind("layer 2/4", 0) == 0) cancel2.cancel();
                           },
                           &cancel2),
               Cancelled);
  EXPECT_EQ(interruptedCompress(dir_ + "/gui").staging, "");
}

}  // namespace
}  // namespace pareto
