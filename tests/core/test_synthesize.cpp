// `pareto-cli synthesize`: shard planning as transformers does it, and a random-weight checkpoint of a preset
// that Pareto's own loader reads back and runs.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "FolderContents.h"
#include "SharedData.h"
#include "checkpoint/ModelConfig.h"
#include "checkpoint/Safetensors.h"
#include "checkpoint/ShardPlan.h"
#include "export/SyntheticCheckpoint.h"
#include "model/LlamaModel.h"
#include "model/TensorIO.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;

TEST(ShardPlan, StartsAShardWhenTheNextTensorWouldPassTheLimit) {
  const auto plan = planShards({{"a", 40}, {"b", 50}, {"c", 20}, {"d", 150}, {"e", 10}}, 100);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].file, "model-00001-of-00004.safetensors");
  EXPECT_EQ(plan[0].bytes, 90u);   // a + b; c would make 110
  EXPECT_EQ(plan[1].tensors.size(), 1u);   // c; then d alone, being larger than the limit; then e
  EXPECT_EQ(plan[2].tensors.front().name, "d");
  EXPECT_EQ(plan[2].tensors.size(), 1u);
  EXPECT_EQ(plan[3].tensors.front().name, "e");
  const nlohmann::json index = shardIndex(plan);
  EXPECT_EQ(index["metadata"]["total_size"], 270);
  EXPECT_EQ(index["weight_map"]["e"], "model-00004-of-00004.safetensors");
  EXPECT_EQ(planShards({{"a", 40}, {"b", 50}}, 100).front().file, "model.safetensors");
  EXPECT_THROW(planShards({}, 100), InputError);
  EXPECT_THROW(planShards({{"a", 1}}, 0), InputError);
}

TEST(ShardPlan, ParsesSizesAsTransformersWritesThem) {
  EXPECT_EQ(parseByteSize("5GB"), 5000000000ull);
  EXPECT_EQ(parseByteSize("500MB"), 500000000ull);
  EXPECT_EQ(parseByteSize("2GiB"), 2ull << 30);
  EXPECT_EQ(parseByteSize("123"), 123u);
  for (const char* bad : {"", "GB", "5 GB", "5gb", "-1", "1.5GB", "99999999999999999GB"})
    EXPECT_THROW(parseByteSize(bad), InputError) << bad;
}

class Synthesize : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::scratchDir("synthesize"); }
  SyntheticCheckpointOptions options(const std::string& name) const {
    SyntheticCheckpointOptions o;
    o.preset = "tiny-llama";
    o.outDir = dir_ + "/" + name;
    o.maxShardBytes = 300000;   // tiny-llama is 2.9 MB in bfloat16: several shards
    o.seed = 7;
    return o;
  }
  std::string dir_;
};

TEST_F(Synthesize, WritesAShardedCheckpointThatLoadsAndRuns) {
  const SyntheticCheckpointReport r = writeSyntheticCheckpoint(options("tiny"));
  EXPECT_EQ(r.layers, 2);
  EXPECT_EQ(r.parameters, 1443072);
  EXPECT_EQ(r.bytes, 2u * 1443072u);
  EXPECT_THAT(r.files, ::testing::Contains("model.safetensors.index.json"));
  EXPECT_THAT(r.files, ::testing::Contains("model-00001-of-00012.safetensors"));
  EXPECT_THAT(r.files, ::testing::Contains("generation_config.json"));

  const nlohmann::json index = readJsonFile(r.outDir + "/model.safetensors.index.json");
  EXPECT_EQ(index["metadata"]["total_size"], r.bytes);
  const Checkpoint ckpt = Checkpoint::open(r.outDir);
  EXPECT_EQ(ckpt.files().size(), 12u);
  EXPECT_EQ(ckpt.tensors().size(), index["weight_map"].size());
  const ModelConfig config = ModelConfig::fromFile(r.outDir + "/config.json");
  EXPECT_EQ(config.numLayers, 2);
  EXPECT_EQ(config.torchDtype, "bfloat16");

  const at::Tensor up = readTensor(ckpt.at("model.layers.1.mlp.up_proj.weight")).to(at::kFloat);
  EXPECT_EQ(up.sizes(), (at::IntArrayRef{512, 256}));
  EXPECT_NEAR(up.std().item<double>(), 0.02, 0.001);
  EXPECT_NEAR(up.mean().item<double>(), 0.0, 0.001);
  EXPECT_TRUE(readTensor(ckpt.at("model.norm.weight")).to(at::kFloat).eq(1).all().item<bool>());

  RuntimeOptions opts;
  opts.dtype = at::kFloat;
  LlamaModel model(config, ckpt, opts);
  const at::Tensor ids = at::tensor(std::vector<int64_t>{1, 5, 9, 300}, at::kLong).view({1, 4});
  const at::Tensor logits = model.forward(ids);
  EXPECT_EQ(logits.sizes(), (at::IntArrayRef{1, 4, 512}));
  EXPECT_TRUE(logits.isfinite().all().item<bool>());
}

TEST_F(Synthesize, TheSameSeedGivesTheSameBytesAndLayersCutTheModel) {
  SyntheticCheckpointOptions a = options("a"), b = options("b"), c = options("c");
  a.maxShardBytes = b.maxShardBytes = 1u << 30;   // one file each: compare them whole
  c.maxShardBytes = 1u << 30;
  c.seed = 8;
  writeSyntheticCheckpoint(a);
  writeSyntheticCheckpoint(b);
  writeSyntheticCheckpoint(c);
  EXPECT_EQ(test::fileText(a.outDir + "/model.safetensors"), test::fileText(b.outDir + "/model.safetensors"));
  EXPECT_NE(test::fileText(a.outDir + "/model.safetensors"), test::fileText(c.outDir + "/model.safetensors"));

  SyntheticCheckpointOptions one = options("one");
  one.layers = 1;
  one.dtype = "float32";
  const SyntheticCheckpointReport r = writeSyntheticCheckpoint(one);
  EXPECT_EQ(r.layers, 1);
  EXPECT_EQ(Checkpoint::open(r.outDir).find("model.layers.1.mlp.up_proj.weight"), nullptr);
  EXPECT_EQ(Checkpoint::open(r.outDir).at("model.layers.0.mlp.up_proj.weight").dtype, DType::F32);
}

TEST_F(Synthesize, RefusesBadInputAndKeepsWhatTheUserOwns) {
  SyntheticCheckpointOptions o = options("bad");
  o.preset = "no-such-model";
  EXPECT_THROW(writeSyntheticCheckpoint(o), InputError);
  o = options("bad");
  o.layers = 3;   // tiny-llama has 2
  EXPECT_THROW(writeSyntheticCheckpoint(o), InputError);
  o = options("bad");
  o.dtype = "int8";
  EXPECT_THROW(writeSyntheticCheckpoint(o), InputError);
  EXPECT_FALSE(fs::exists(dir_ + "/bad"));

  // A folder the user owns is never replaced, --overwrite or not.
  fs::create_directories(dir_ + "/mine");
  std::ofstream(dir_ + "/mine/notes.txt") << "keep";
  o = options("mine");
  o.overwrite = true;
  EXPECT_THROW(writeSyntheticCheckpoint(o), InputError);
  EXPECT_EQ(test::fileText(dir_ + "/mine/notes.txt"), "keep");

  if (test::sharedAvailable()) {
    // ref-small's tokenizer has 8192 ids; tiny-llama's vocabulary is 512.
    o = options("tok");
    o.tokenizer = test::sharedPath("models/ref-small");
    try {
      writeSyntheticCheckpoint(o);
      FAIL() << "a tokenizer larger than the vocabulary was accepted";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("vocabulary of 512"));
    }
    EXPECT_FALSE(fs::exists(dir_ + "/tok"));
  }
}

TEST_F(Synthesize, Cli) {
  const test::RunResult r = test::runCli("--no-record synthesize --preset tiny-llama --layers 1 --shard-size 1MB --out " +
                                         dir_ + "/cli --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layers"], 1);
  EXPECT_EQ(j["files"], (nlohmann::json{"config.json", "generation_config.json", "model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                                        "pareto-export.json"}));
}

}  // namespace
}  // namespace pareto
