// export hf: a compressed ref-tiny (int4 only, 2:4 only, 2:4 + int4 and 2:4 + asymmetric int3 modules in one
// folder) written as a dense Hugging Face checkpoint. Pareto reads the export back and gets the same logits as
// from the compressed folder; the export has the source's tensor names, shapes and dtype, config and tokenizer
// but no pareto.json; and nothing is left behind when it fails or is cancelled.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "SharedData.h"
#include "checkpoint/Safetensors.h"
#include "compress/CompressJob.h"
#include "export/HfExport.h"
#include "model/LoadedModel.h"
#include "model/TensorIO.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class HfExport : public ::testing::Test {
 protected:
  // One compressed folder for every test of the binary.
  static void SetUpTestSuite() {
    if (!test::sharedAvailable()) return;
    dir_ = test::scratchDir("hf-export");
    std::ofstream(dir_ + "/r.json") << R"({
      "prune": {"method": "magnitude", "pattern": "2:4"},
      "quantize": {"method": "rtn", "bits": 4, "group_size": 32},
      "overrides": [{"match": "model.layers.0.*", "prune": null},
                    {"match": "model.layers.1.*", "quantize": null},
                    {"match": "model.layers.3.*", "quantize": {"method": "rtn", "bits": 3, "group_size": 32,
                                                                "symmetric": false}}]})";
    CompressOptions o;
    o.modelDir = test::sharedPath("models/ref-tiny");
    o.recipePath = dir_ + "/r.json";
    o.outDir = dir_ + "/compressed";
    runCompress(o);
  }
  void SetUp() override { PARETO_REQUIRE_SHARED(); }

  static std::string compressed() { return dir_ + "/compressed"; }

  static at::Tensor logits(const std::string& model, const std::string& dtype) {
    LoadedModel m = loadModel(model, makeRuntimeOptions("cpu", dtype));
    std::vector<TokenId> ids = m.promptIds("def fibonacci(n):\n    if n < 2:\n        return n\n");
    at::Tensor input = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).unsqueeze(0);
    return m.model->forward(input);
  }

  static std::string dir_;
};

std::string HfExport::dir_;

TEST_F(HfExport, Float32ExportGivesTheCompressedLogitsExactly) {
  HfExportOptions o;
  o.modelDir = compressed();
  o.outDir = dir_ + "/hf-f32";
  o.dtype = "float32";
  HfExportReport r = exportHuggingFace(o);
  EXPECT_EQ(r.dtype, "float32");
  EXPECT_EQ(r.densifiedModules, 28);
  at::Tensor fromCompressed = logits(compressed(), "float32");
  at::Tensor fromExport = logits(o.outDir, "float32");
  EXPECT_TRUE(at::equal(fromCompressed, fromExport))
      << "max difference " << (fromCompressed - fromExport).abs().max().item<double>();

  // Same names and shapes as the dense source; every weight is float32 now, and config.json says so.
  Checkpoint source = Checkpoint::open(test::sharedPath("models/ref-tiny"));
  Checkpoint exported = Checkpoint::open(o.outDir);
  ASSERT_EQ(exported.tensors().size(), source.tensors().size());
  for (const TensorEntry* e : source.tensors()) {
    const TensorEntry* x = exported.find(e->name);
    ASSERT_NE(x, nullptr) << e->name;
    EXPECT_EQ(x->shape, e->shape) << e->name;
    EXPECT_EQ(x->dtype, DType::F32) << e->name;
  }
  nlohmann::json config = readJsonFile(o.outDir + "/config.json");
  EXPECT_EQ(config["dtype"], "float32");
  EXPECT_EQ(config["architectures"], readJsonFile(compressed() + "/config.json")["architectures"]);
}

TEST_F(HfExport, SourceDtypeExportKeepsTheFilesAndTheZeros) {
  HfExportOptions o;
  o.modelDir = compressed();
  o.outDir = dir_ + "/hf-bf16";
  HfExportReport r = exportHuggingFace(o);
  EXPECT_EQ(r.dtype, "bfloat16");   // ref-tiny's config.json "dtype"
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
                        "model.safetensors"})
    EXPECT_TRUE(fs::exists(o.outDir + "/" + f)) << f;
  EXPECT_FALSE(fs::exists(o.outDir + "/pareto.json"));
  EXPECT_EQ(readFile(o.outDir + "/config.json"), readFile(compressed() + "/config.json"));
  EXPECT_EQ(readFile(o.outDir + "/tokenizer.json"), readFile(compressed() + "/tokenizer.json"));

  Checkpoint source = Checkpoint::open(test::sharedPath("models/ref-tiny"));
  Checkpoint exported = Checkpoint::open(o.outDir);
  for (const TensorEntry* e : source.tensors()) {
    const TensorEntry* x = exported.find(e->name);
    ASSERT_NE(x, nullptr) << e->name;
    EXPECT_EQ(x->dtype, e->dtype) << e->name;
    EXPECT_EQ(x->shape, e->shape) << e->name;
  }
  // Untouched tensors are the source's bytes; pruned weights hold their zeros in the 2:4 pattern.
  const TensorEntry& embed = exported.at("model.embed_tokens.weight");
  EXPECT_EQ(0, std::memcmp(embed.data, source.at("model.embed_tokens.weight").data, embed.nbytes));
  for (const char* name : {"model.layers.1.mlp.up_proj.weight", "model.layers.2.self_attn.q_proj.weight",
                           "model.layers.3.mlp.down_proj.weight"}) {
    at::Tensor w = readTensor(exported.at(name)).to(at::kFloat);
    at::Tensor perGroup = (w.reshape({w.size(0), -1, 4}) == 0).sum(-1);
    EXPECT_TRUE(at::all(perGroup >= 2).item<bool>()) << name;
  }
  // A layer-0 weight was quantized only: dense, on the int4 grid, not pruned.
  at::Tensor q = readTensor(exported.at("model.layers.0.self_attn.q_proj.weight")).to(at::kFloat);
  EXPECT_LT((q == 0).to(at::kFloat).mean().item<double>(), 0.3);

  // In the dtype it was exported in, the export computes exactly what the compressed folder does.
  EXPECT_TRUE(at::equal(logits(compressed(), "bfloat16"), logits(o.outDir, "bfloat16")));
}

TEST_F(HfExport, RefusesBadInputAndLeavesNothingBehind) {
  HfExportOptions o;
  o.modelDir = test::sharedPath("models/ref-tiny");
  o.outDir = dir_ + "/dense-export";
  try {
    exportHuggingFace(o);
    FAIL() << "a dense folder was exported";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("pareto.json"));
  }
  o.modelDir = compressed();
  o.outDir = compressed() + "/inside";
  EXPECT_THROW(exportHuggingFace(o), InputError);
  o.outDir = dir_ + "/hf-x";
  o.dtype = "int8";
  EXPECT_THROW(exportHuggingFace(o), InputError);
  o.dtype = "";

  CancelToken cancel;
  cancel.cancel();
  EXPECT_THROW(exportHuggingFace(o, {}, &cancel), Cancelled);
  EXPECT_FALSE(fs::exists(o.outDir));
  EXPECT_FALSE(fs::exists(dir_ + "/.hf-x.partial"));

  // Cancelled while writing (the progress callback fires the token at the write stage).
  CancelToken late;
  ProgressCallback cancelAtWrite = [&](const ProgressUpdate& u) {
    if (u.stage == "write") late.cancel();
  };
  EXPECT_THROW(exportHuggingFace(o, cancelAtWrite, &late), Cancelled);
  EXPECT_FALSE(fs::exists(o.outDir));
  EXPECT_FALSE(fs::exists(dir_ + "/.hf-x.partial"));

  exportHuggingFace(o);
  try {
    exportHuggingFace(o);
    FAIL() << "an existing export was overwritten without --overwrite";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("already exists"));
  }
  o.overwrite = true;
  o.dtype = "float16";
  EXPECT_EQ(exportHuggingFace(o).dtype, "float16");
  EXPECT_EQ(Checkpoint::open(o.outDir).at("model.layers.0.mlp.up_proj.weight").dtype, DType::F16);
  EXPECT_FALSE(fs::exists(dir_ + "/.hf-x.old"));
}

TEST_F(HfExport, Cli) {
  const std::string out = dir_ + "/hf-cli";
  const std::string cmd = std::string(PARETO_CLI_PATH) + " export hf --model " + compressed() + " --out " + out +
                          " --json 2>" + dir_ + "/cli-err.txt";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) text.append(buf.data(), n);
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << readFile(dir_ + "/cli-err.txt");
  nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["dtype"], "bfloat16");
  EXPECT_EQ(j["densified_modules"], 28);
  // pareto-export.json records that Pareto wrote the folder (what --overwrite may replace); transformers ignores it.
  EXPECT_EQ(j["files"], (nlohmann::json{"config.json", "generation_config.json", "model.safetensors",
                                        "pareto-export.json", "tokenizer.json", "tokenizer_config.json"}));
}

}  // namespace
}  // namespace pareto
