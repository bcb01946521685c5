// export compressed-tensors: the pack-quantized packing on hand-made weights against words written out here, and
// a compressed ref-tiny (int4 symmetric and asymmetric groups, int8 per channel, int8 per tensor, a 2:4-pruned
// layer, a dense module; a GPTQ act-order folder) exported and read back: every packed module dequantizes, by the
// compressed-tensors rule implemented here independently, to exactly Pareto's weight; config.json's
// quantization_config, the ignore list, refusals, --overwrite and nothing left behind on failure.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sys/wait.h>

#include "SharedData.h"
#include "checkpoint/Safetensors.h"
#include "compress/CompressJob.h"
#include "export/CompressedTensorsExport.h"
#include "formats/CompressionManifest.h"
#include "formats/PackedModuleIO.h"
#include "model/TensorIO.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

at::Tensor bytes(std::vector<uint8_t> v, int64_t rows) {
  return at::tensor(std::vector<int64_t>(v.begin(), v.end()), at::kLong).to(at::kByte).reshape({rows, -1});
}
at::Tensor words(std::vector<uint32_t> v, int64_t rows) {
  std::vector<int32_t> s;
  for (uint32_t w : v) s.push_back(static_cast<int32_t>(w));
  return at::tensor(s, at::kInt).reshape({rows, -1});
}
at::Tensor halves(std::vector<float> v, int64_t rows) { return at::tensor(v).to(at::kHalf).reshape({rows, -1}); }

// compressed-tensors' rule, written from its definition: value i of int32 word j along a dimension in bits
// b·i .. b·i + b − 1, stored unsigned with 2^(b−1) added; weight = (q − z) · s with signed q, z.
at::Tensor unpackWords(const at::Tensor& packed, int bits, int64_t count) {
  const int64_t perWord = 32 / bits;
  at::Tensor w = packed.to(at::kLong);
  w = at::where(w < 0, w + (int64_t(1) << 32), w);
  std::vector<at::Tensor> values;
  for (int64_t i = 0; i < perWord; ++i)
    values.push_back(at::remainder(at::floor_divide(w, int64_t(1) << (bits * i)), int64_t(1) << bits));
  return at::stack(values, 2).reshape({w.size(0), -1}).narrow(1, 0, count);
}

at::Tensor dequantizeCompressedTensors(const Checkpoint& ckpt, const std::string& module, int bits, bool symmetric) {
  const at::Tensor shape = readTensor(ckpt.at(module + ".weight_shape")).to(at::kLong);
  const int64_t rows = shape[0].item<int64_t>(), cols = shape[1].item<int64_t>();
  const int64_t offset = int64_t(1) << (bits - 1);
  const at::Tensor q = unpackWords(readTensor(ckpt.at(module + ".weight_packed")), bits, cols) - offset;
  const at::Tensor scale = readTensor(ckpt.at(module + ".weight_scale")).to(at::kFloat);
  const int64_t groups = scale.size(1), g = cols / groups;
  at::Tensor zero = at::zeros({rows, groups}, at::kLong);
  if (!symmetric)
    zero = unpackWords(readTensor(ckpt.at(module + ".weight_zero_point")).t().contiguous(), bits, rows).t() - offset;
  const at::Tensor grouped = (q.reshape({rows, groups, g}) - zero.unsqueeze(2)).to(at::kFloat);
  return (grouped * scale.unsqueeze(2)).reshape({rows, cols});
}

QuantGroupWeight handMade(at::Tensor codes, at::Tensor scales, at::Tensor zeros, int bits, bool symmetric,
                          int64_t groupSize, int64_t rows, int64_t cols) {
  QuantGroupWeight q;
  q.codes = codes;
  q.scales = scales;
  q.zeros = zeros;
  q.bits = bits;
  q.symmetric = symmetric;
  q.groupSize = groupSize;
  q.rows = rows;
  q.cols = cols;
  q.checkConsistent();
  return q;
}

TEST(CompressedTensorsPacking, Int4SymmetricGroups) {
  // Row 0: codes 0..7 then −1..−7, 0 (stored q + 8: 8..15, 7..1, 8); row 1: −7 everywhere (stored 1).
  const QuantGroupWeight q = handMade(bytes({0x98, 0xBA, 0xDC, 0xFE, 0x67, 0x45, 0x23, 0x81,   //
                                             0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11},
                                            2),
                                      halves({0.5f, 0.25f, 0.125f, 1.5f}, 2), {}, 4, true, 8, 2, 16);
  const PackQuantizedTensors ct = packQuantized(q, at::kHalf, "m");
  EXPECT_TRUE(at::equal(ct.weightPacked, words({0xFEDCBA98u, 0x81234567u, 0x11111111u, 0x11111111u}, 2)));
  EXPECT_EQ(ct.weightScale.scalar_type(), at::kHalf);
  EXPECT_TRUE(at::equal(ct.weightScale, halves({0.5f, 0.25f, 0.125f, 1.5f}, 2)));
  EXPECT_FALSE(ct.weightZeroPoint.defined());
  EXPECT_TRUE(at::equal(ct.weightShape, at::tensor(std::vector<int32_t>{2, 16}, at::kInt)));
  EXPECT_EQ(q.unpack()[0][1].item<float>(), 0.5f);          // code 1 in group 0 of row 0
  EXPECT_EQ(q.unpack()[0][9].item<float>(), -2 * 0.25f);    // code −2 in group 1
}

TEST(CompressedTensorsPacking, Int4AsymmetricZerosPackedAlongRows) {
  // Row 0: codes 0..15; row 1: 15 everywhere. Zeros [[8, 3], [15, 0]]: word g of the zero points holds row 0's
  // zero in bits 0-3 and row 1's in bits 4-7.
  const QuantGroupWeight q =
      handMade(bytes({0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE,  //
                      0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF},
                     2),
               halves({0.5f, 0.25f, 2.0f, 1.0f}, 2), bytes({8, 3, 15, 0}, 2), 4, false, 8, 2, 16);
  const PackQuantizedTensors ct = packQuantized(q, at::kHalf, "m");
  EXPECT_TRUE(at::equal(ct.weightPacked, words({0x76543210u, 0xFEDCBA98u, 0xFFFFFFFFu, 0xFFFFFFFFu}, 2)));
  EXPECT_TRUE(at::equal(ct.weightZeroPoint, words({0xF8u, 0x03u}, 1)));
  EXPECT_TRUE(at::equal(ct.weightShape, at::tensor(std::vector<int32_t>{2, 16}, at::kInt)));
  EXPECT_EQ(q.unpack()[0][10].item<float>(), (10 - 3) * 0.25f);
}

TEST(CompressedTensorsPacking, Int8ChannelAndPerTensor) {
  // int8 symmetric per channel: stored q + 128, four codes a word.
  const at::Tensor codes = at::tensor(std::vector<int64_t>{-127, -1, 0, 127, 5, 6, 7, 8}, at::kLong).to(at::kChar);
  const QuantGroupWeight q = handMade(codes.reshape({2, 4}), halves({0.5f, 2.0f}, 2), {}, 8, true, 4, 2, 4);
  const PackQuantizedTensors ct = packQuantized(q, at::kHalf, "m");
  EXPECT_TRUE(at::equal(ct.weightPacked, words({0xFF807F01u, 0x88878685u}, 2)));
  EXPECT_TRUE(at::equal(ct.weightScale, halves({0.5f, 2.0f}, 2)));

  // int4 asymmetric per tensor, written per channel: the one scale and zero in every row (zeros of rows 0, 1 in
  // one word), and the scale in the asked dtype.
  const QuantGroupWeight t = handMade(bytes({0x10, 0x32, 0x54, 0x76, 0x10, 0x32, 0x54, 0x76}, 2),
                                      halves({0.75f}, 1), bytes({5}, 1), 4, false, 8, 2, 8);
  const PackQuantizedTensors tt = packQuantized(t, at::kFloat, "m");
  EXPECT_TRUE(at::equal(tt.weightPacked, words({0x76543210u, 0x76543210u}, 2)));
  EXPECT_TRUE(at::equal(tt.weightScale, at::full({2, 1}, 0.75f)));
  EXPECT_TRUE(at::equal(tt.weightZeroPoint, words({0x55u}, 1)));

  // Columns that are not whole words are refused, naming the module.
  const QuantGroupWeight odd = handMade(bytes({0x11, 0x11, 0x11}, 1), halves({1.0f}, 1), {}, 4, true, 6, 1, 6);
  try {
    packQuantized(odd, at::kHalf, "model.layers.0.mlp.up_proj");
    FAIL() << "6 columns were packed into int32 words of 8 codes";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.layers.0.mlp.up_proj"));
  }
}

TEST(CompressedTensorsPacking, SchemesOfParetoFormats) {
  EXPECT_EQ(compressedTensorsScheme(WeightFormat::parse("int4-g128"), false, "m").weightsArgs(),
            nlohmann::json::parse(R"({"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group",
                                      "group_size": 128, "dynamic": false, "actorder": null})"));
  EXPECT_EQ(compressedTensorsScheme(WeightFormat::parse("int8-channel-asym"), false, "m").weightsArgs(),
            nlohmann::json::parse(R"({"num_bits": 8, "type": "int", "symmetric": false, "strategy": "channel",
                                      "group_size": null, "dynamic": false, "actorder": null})"));
  EXPECT_EQ(compressedTensorsScheme(WeightFormat::parse("int8-tensor"), false, "m").weightsArgs()["strategy"],
            "channel");
  EXPECT_EQ(compressedTensorsScheme(WeightFormat::parse("int4-g64"), true, "m").weightsArgs()["actorder"], "weight");
  for (const char* refused : {"int3-g128", "spqr-3bit", "bitmask-2:4+int4-g128", "int2-channel", "gguf-q4_k"}) {
    try {
      compressedTensorsScheme(WeightFormat::parse(refused), false, "model.layers.3.mlp.down_proj");
      FAIL() << refused << " was given a scheme";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("model.layers.3.mlp.down_proj"));
      EXPECT_THAT(e.what(), HasSubstr("export hf"));
    }
  }
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class CompressedTensorsExport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!test::sharedAvailable()) return;
    dir_ = test::scratchDir("ct-export");
    // Layer 0: int4 symmetric g64 (o_proj dense); layer 1: int4 asymmetric g64; layer 2: int8 per channel
    // (down_proj int8 asymmetric per tensor); layer 3: 2:4 pruned, not quantized.
    std::ofstream(dir_ + "/mixed.json") << R"({
      "quantize": {"method": "rtn", "bits": 4, "group_size": 64},
      "overrides": [{"match": "model.layers.1.*", "quantize": {"method": "rtn", "bits": 4, "group_size": 64,
                                                                "symmetric": false}},
                    {"match": "model.layers.2.*", "quantize": {"method": "rtn", "bits": 8, "granularity": "channel"}},
                    {"match": "model.layers.2.mlp.down_proj", "quantize": {"method": "rtn", "bits": 8,
                                                            "granularity": "tensor", "symmetric": false}},
                    {"match": "model.layers.3.*", "quantize": null, "prune": {"method": "magnitude",
                                                                               "pattern": "2:4"}},
                    {"match": "model.layers.0.self_attn.o_proj", "quantize": null}]})";
    std::ofstream(dir_ + "/gptq.json") << R"({
      "calibration": {"source": "text", "text": ")" + test::sharedPath("data/wikitext2-test.txt") + R"(",
                      "tokens": 2048, "window": 256, "seed": 0},
      "quantize": {"method": "gptq", "bits": 4, "group_size": 64, "act_order": true, "static_groups": true}})";
    std::ofstream(dir_ + "/int3.json") << R"({
      "quantize": {"method": "rtn", "bits": 4, "group_size": 64},
      "overrides": [{"match": "model.layers.3.mlp.down_proj", "quantize": {"method": "rtn", "bits": 3,
                                                                             "group_size": 64}}]})";
    for (const char* name : {"mixed", "gptq", "int3"}) {
      CompressOptions o;
      o.modelDir = test::sharedPath("models/ref-tiny");
      o.recipePath = dir_ + "/" + name + ".json";
      o.outDir = dir_ + "/" + name;
      runCompress(o);
    }
  }
  void SetUp() override { PARETO_REQUIRE_SHARED(); }

  // Every packed int module of `folder` against its export in `out`: dequantized by compressed-tensors' rule, it
  // is Pareto's unpacked weight exactly; the dense ones are Pareto's weight in the written dtype.
  static void expectSameWeights(const std::string& folder, const std::string& out, int64_t quantized) {
    const CompressionManifest manifest = *CompressionManifest::readFrom(folder);
    const Checkpoint source = Checkpoint::open(folder), exported = Checkpoint::open(out);
    struct Parts : StoredTensors {
      explicit Parts(const Checkpoint& c) : c(c) {}
      std::optional<Entry> find(const std::string& n) const override {
        const TensorEntry* e = c.find(n);
        if (e == nullptr) return std::nullopt;
        return Entry{scalarType(e->dtype), e->shape, e->file};
      }
      at::Tensor read(const std::string& n) const override { return readTensor(c.at(n)); }
      std::string location() const override { return c.directory(); }
      const Checkpoint& c;
    } parts(source);
    int64_t seen = 0;
    for (const auto& [module, f] : manifest.modules) {
      if (f.format == "dense") continue;
      PackedModuleRecord record;
      record.actOrder = f.actOrder;
      const PackedModule packed = readPackedModule(parts, module, f.weight, f.shape.at(0), f.shape.at(1), record);
      const at::Tensor pareto = packed.unpack();
      EXPECT_EQ(exported.find(module + ".weight_g_idx"), nullptr) << module;
      if (f.weight.isQuantized()) {
        ++seen;
        EXPECT_EQ(exported.find(module + ".weight"), nullptr) << module;
        EXPECT_EQ(exported.at(module + ".weight_packed").dtype, DType::I32) << module;
        EXPECT_EQ(exported.at(module + ".weight_scale").dtype, DType::F16) << module;
        EXPECT_EQ(exported.find(module + ".weight_zero_point") != nullptr, !f.weight.symmetric) << module;
        EXPECT_TRUE(at::equal(dequantizeCompressedTensors(exported, module, f.weight.bits, f.weight.symmetric),
                              pareto))
            << module;
      } else {
        EXPECT_TRUE(at::equal(readTensor(exported.at(module + ".weight")), pareto.to(at::kHalf))) << module;
      }
    }
    EXPECT_EQ(seen, quantized);
  }

  static std::string dir_;
};

std::string CompressedTensorsExport::dir_;

TEST_F(CompressedTensorsExport, MixedFolderDequantizesToParetosWeightsExactly) {
  CompressedTensorsExportOptions o;
  o.modelDir = dir_ + "/mixed";
  o.outDir = dir_ + "/mixed-ct";
  std::vector<std::string> stages;
  const CompressedTensorsExportReport r =
      exportCompressedTensors(o, [&](const ProgressUpdate& u) { stages.push_back(u.stage); });
  EXPECT_EQ(r.dtype, "float16");
  EXPECT_EQ(r.quantizedModules, 20);   // layers 0-2 less layer 0's o_proj
  EXPECT_EQ(r.denseModules, 8);
  EXPECT_NE(std::find(stages.begin(), stages.end(), "pack"), stages.end());
  expectSameWeights(o.modelDir, o.outDir, 20);

  const nlohmann::json config = readJsonFile(o.outDir + "/config.json");
  EXPECT_EQ(config["dtype"], "float16");
  const nlohmann::json& qc = config["quantization_config"];
  EXPECT_EQ(qc["quant_method"], "compressed-tensors");
  EXPECT_EQ(qc["format"], "pack-quantized");
  EXPECT_EQ(qc["quantization_status"], "compressed");
  // Four schemes (int4 sym g64, int4 asym g64, int8 sym channel, int8 asym channel from the per-tensor grid),
  // so each group names its modules.
  ASSERT_EQ(qc["config_groups"].size(), 4u);
  std::set<std::string> targeted;
  for (const auto& [name, group] : qc["config_groups"].items()) {
    EXPECT_TRUE(group["input_activations"].is_null());
    EXPECT_EQ(group["weights"]["type"], "int");
    EXPECT_EQ(group["weights"]["dynamic"], false);
    for (const auto& t : group["targets"]) targeted.insert(t.get<std::string>());
    if (group["targets"] == nlohmann::json{"model.layers.2.mlp.down_proj"}) {
      EXPECT_EQ(group["weights"]["strategy"], "channel");
      EXPECT_EQ(group["weights"]["symmetric"], false);
      EXPECT_EQ(group["weights"]["num_bits"], 8);
    }
  }
  EXPECT_EQ(targeted.size(), 20u);
  EXPECT_TRUE(targeted.count("model.layers.1.self_attn.q_proj"));
  std::vector<std::string> ignore = qc["ignore"];
  std::sort(ignore.begin(), ignore.end());
  EXPECT_EQ(ignore, (std::vector<std::string>{"lm_head", "model.layers.0.self_attn.o_proj",
                                              "model.layers.3.mlp.down_proj", "model.layers.3.mlp.gate_proj",
                                              "model.layers.3.mlp.up_proj", "model.layers.3.self_attn.k_proj",
                                              "model.layers.3.self_attn.o_proj", "model.layers.3.self_attn.q_proj",
                                              "model.layers.3.self_attn.v_proj"}));
  // Layer 3's 2:4 weights are dense with their zeros: half of each.
  const at::Tensor pruned = readTensor(Checkpoint::open(o.outDir).at("model.layers.3.mlp.up_proj.weight"));
  EXPECT_EQ((pruned == 0).sum().item<int64_t>(), pruned.numel() / 2);
  EXPECT_EQ(Checkpoint::open(o.outDir).at("model.embed_tokens.weight").dtype, DType::F16);
  EXPECT_THAT(r.notes, ::testing::Contains(HasSubstr("per-tensor")));
  EXPECT_EQ(readFile(o.outDir + "/tokenizer.json"), readFile(o.modelDir + "/tokenizer.json"));
  EXPECT_EQ(readJsonFile(o.outDir + "/pareto-export.json")["export"], "compressed-tensors");
}

TEST_F(CompressedTensorsExport, GptqActOrderIsActorderWeightWithoutGroupIndex) {
  CompressedTensorsExportOptions o;
  o.modelDir = dir_ + "/gptq";
  o.outDir = dir_ + "/gptq-ct";
  const CompressedTensorsExportReport r = exportCompressedTensors(o);
  EXPECT_EQ(r.quantizedModules, 28);
  const CompressionManifest manifest = *CompressionManifest::readFrom(o.modelDir);
  ASSERT_TRUE(manifest.modules.at("model.layers.0.mlp.up_proj").actOrder);
  expectSameWeights(o.modelDir, o.outDir, 28);
  const nlohmann::json qc = readJsonFile(o.outDir + "/config.json")["quantization_config"];
  ASSERT_EQ(qc["config_groups"].size(), 1u);
  const nlohmann::json& group = qc["config_groups"]["group_0"];
  EXPECT_EQ(group["targets"], nlohmann::json{"Linear"});
  EXPECT_EQ(group["weights"]["actorder"], "weight");
  EXPECT_EQ(group["weights"]["group_size"], 64);
  EXPECT_EQ(qc["ignore"], nlohmann::json{"lm_head"});
}

TEST_F(CompressedTensorsExport, SourceDtypeRoundsScalesAndSaysSo) {
  CompressedTensorsExportOptions o;
  o.modelDir = dir_ + "/gptq";
  o.outDir = dir_ + "/gptq-bf16";
  o.dtype = "source";
  const CompressedTensorsExportReport r = exportCompressedTensors(o);
  EXPECT_EQ(r.dtype, "bfloat16");
  const Checkpoint out = Checkpoint::open(o.outDir);
  EXPECT_EQ(out.at("model.layers.0.mlp.up_proj.weight_scale").dtype, DType::BF16);
  EXPECT_EQ(out.at("model.norm.weight").dtype, DType::BF16);
  EXPECT_EQ(readJsonFile(o.outDir + "/config.json")["dtype"], "bfloat16");
  EXPECT_THAT(r.notes, ::testing::Contains(HasSubstr("scales changed when rounded to bfloat16")));
  o.dtype = "int8";
  o.outDir = dir_ + "/never";
  EXPECT_THROW(exportCompressedTensors(o), InputError);
  EXPECT_FALSE(fs::exists(o.outDir));
}

TEST_F(CompressedTensorsExport, RefusesA3BitModuleNamingItAndLeavesNothing) {
  CompressedTensorsExportOptions o;
  o.modelDir = dir_ + "/int3";
  o.outDir = dir_ + "/int3-ct";
  try {
    exportCompressedTensors(o);
    FAIL() << "a 3-bit module was exported";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.layers.3.mlp.down_proj"));
    EXPECT_THAT(e.what(), HasSubstr("int3-g64"));
    EXPECT_THAT(e.what(), HasSubstr("export hf"));
  }
  EXPECT_FALSE(fs::exists(o.outDir));
  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_THAT(entry.path().filename().string(), ::testing::Not(HasSubstr("int3-ct"))) << "left behind";

  // A dense folder has nothing to pack.
  o.modelDir = test::sharedPath("models/ref-tiny");
  try {
    exportCompressedTensors(o);
    FAIL() << "a dense folder was exported";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("pareto.json"));
  }
}

TEST_F(CompressedTensorsExport, OverwriteReplacesOnlyParetosOutputAndCancelLeavesNothing) {
  CompressedTensorsExportOptions o;
  o.modelDir = dir_ + "/mixed";
  o.outDir = dir_ + "/ct-x";

  CancelToken late;
  ProgressCallback cancelAtWrite = [&](const ProgressUpdate& u) {
    if (u.stage == "write") late.cancel();
  };
  EXPECT_THROW(exportCompressedTensors(o, cancelAtWrite, &late), Cancelled);
  EXPECT_FALSE(fs::exists(o.outDir));
  for (const auto& entry : fs::directory_iterator(dir_))
    EXPECT_THAT(entry.path().filename().string(), ::testing::Not(HasSubstr("ct-x"))) << "left behind";

  exportCompressedTensors(o);
  try {
    exportCompressedTensors(o);
    FAIL() << "an existing export was overwritten without --overwrite";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("already exists"));
  }
  o.overwrite = true;
  exportCompressedTensors(o);
  EXPECT_TRUE(fs::exists(o.outDir + "/model.safetensors"));

  // A folder Pareto did not write is never replaced.
  const std::string mine = dir_ + "/users-folder";
  fs::create_directories(mine);
  std::ofstream(mine + "/notes.txt") << "mine";
  o.outDir = mine;
  EXPECT_THROW(exportCompressedTensors(o), InputError);
  EXPECT_EQ(readFile(mine + "/notes.txt"), "mine");
}

TEST_F(CompressedTensorsExport, Cli) {
  const std::string out = dir_ + "/ct-cli";
  const std::string cmd = std::string(PARETO_CLI_PATH) + " export compressed-tensors --model " + dir_ +
                          "/gptq --out " + out + " --json 2>" + dir_ + "/cli-err.txt";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string text;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) text.append(buf.data(), n);
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << readFile(dir_ + "/cli-err.txt");
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["dtype"], "float16");
  EXPECT_EQ(j["quantized_modules"], 28);
  EXPECT_EQ(j["ignore"], nlohmann::json{"lm_head"});
  EXPECT_EQ(j["files"], (nlohmann::json{"config.json", "generation_config.json", "model.safetensors",
                                        "pareto-export.json", "tokenizer.json", "tokenizer_config.json"}));
}

}  // namespace
}  // namespace pareto
