// The output head as a recipe choice ("lm_head": {"quantize": ...}): parsing, the compressed folder (the head
// untied and packed, the embedding untouched), loading it back dense and packed, the decode runtime's bytes, and
// the exports of such a folder.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "SharedData.h"
#include "TestRuntime.h"
#include "FolderContents.h"
#include "checkpoint/Safetensors.h"
#include "compress/CompressJob.h"
#include "compress/QuantGrid.h"
#include "compress/Recipe.h"
#include "compress/RecipeEstimate.h"
#include "checkpoint/ModelPresets.h"
#include "decode/DecodeBenchmark.h"
#include "decode/DecodeModel.h"
#include "export/CompressedTensorsExport.h"
#include "export/GgufExport.h"
#include "export/HfExport.h"
#include "formats/CompressionManifest.h"
#include "formats/GgufQuant.h"
#include "formats/GridAsGguf.h"
#include "jobs/CompressEvaluateJob.h"
#include "store/MetricNames.h"
#include "model/LoadedModel.h"
#include "model/ModelSummary.h"
#include "model/TensorIO.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

double relativeError(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  return (x - y).norm().item<double>() / y.norm().item<double>();
}

std::string parseError(const json& j) {
  try {
    Recipe::fromJson(j, "", "r.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(HeadRecipe, ParsesTheBlockAndKeepsTheHeadOutOfPruningAndSkips) {
  const Recipe r = Recipe::fromJson(
      json::parse(R"({"prune": {"method": "magnitude", "pattern": "2:4"}, "skip": [],
                      "lm_head": {"quantize": {"method": "rtn", "bits": 8, "granularity": "channel"}}})"),
      "", "r.json");
  ASSERT_TRUE(r.headQuantize.has_value());
  EXPECT_EQ(r.headQuantize->grid.label(), QuantSpec::channel(8).label());
  ASSERT_TRUE(r.quantizeFor("lm_head").has_value());
  EXPECT_EQ(r.quantizeFor("lm_head")->grid.bits, 8);
  EXPECT_FALSE(r.pruneFor("lm_head").has_value());   // with no skip at all
  EXPECT_FALSE(r.quantizeFor("model.layers.0.mlp.up_proj").has_value());
  EXPECT_FALSE(r.needsCalibration());

  // A recipe that only quantizes the head is a recipe; without the block the head is untouched.
  const Recipe only = Recipe::fromJson(json::parse(R"({"lm_head": {"quantize": {"method": "rtn"}}})"), "", "r.json");
  EXPECT_EQ(only.quantizeFor("lm_head")->grid.label(), QuantSpec::group(4, 128).label());
  const Recipe without = Recipe::fromJson(json::parse(R"({"quantize": {"method": "rtn"}, "lm_head": null})"), "", "r.json");
  EXPECT_FALSE(without.headQuantize.has_value());
  EXPECT_FALSE(without.quantizeFor("lm_head").has_value());
}

TEST(HeadRecipe, BadValuesAreRefusedWithTheirPath) {
  EXPECT_THAT(parseError(json::parse(R"({"lm_head": {"quantize": {"method": "rtn", "bits": 9}}})")),
              HasSubstr("r.json: lm_head.quantize.bits: 9 is out of range"));
  EXPECT_THAT(parseError(json::parse(R"({"lm_head": {"quantize": {"method": "awq"}}})")),
              HasSubstr("r.json: lm_head.quantize.method"));
  EXPECT_THAT(parseError(json::parse(R"({"lm_head": {"quantize": {"bits": 8}}})")),
              HasSubstr("r.json: lm_head.quantize: missing \"method\""));
  EXPECT_THAT(parseError(json::parse(R"({"lm_head": {"prune": {"method": "magnitude"}}})")),
              HasSubstr("r.json: lm_head.prune: unknown key"));
  EXPECT_THAT(parseError(json::parse(R"({"lm_head": {}})")), HasSubstr("r.json: lm_head: needs \"quantize\""));
  EXPECT_THAT(parseError(json::parse(R"({"lm_head": [1]})")), HasSubstr("r.json: lm_head: must be an object"));
  EXPECT_THAT(parseError(json::parse(R"({"lm_head": {"quantize": {"method": "rtn", "format": "int8"}}})")),
              HasSubstr("r.json: lm_head.quantize.format"));
  // The sequential pass has no Hessian of the head's input: the methods that need one are refused by name.
  for (const char* method : {"gptq", "spqr"}) {
    const std::string e = parseError(json::parse(std::string(R"({"calibration": {"source": "text", "text": "t.txt"},
        "lm_head": {"quantize": {"method": ")") + method + "\"}}}"));
    EXPECT_THAT(e, HasSubstr("r.json: lm_head.quantize.method: \"" + std::string(method) + "\" needs the Hessian"));
  }
}

class CompressHead : public ::testing::Test {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    dir_ = test::scratchDir("compress-head");
    model_ = test::sharedPath("models/ref-tiny");
  }
  std::string writeRecipe(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
    return dir_ + "/" + name;
  }
  CompressReport compress(const std::string& name, const std::string& recipe) {
    CompressOptions o;
    o.modelDir = model_;
    o.recipePath = writeRecipe(name + ".json", recipe);
    o.outDir = dir_ + "/" + name;
    o.runtime = test::testRuntime();
    return runCompress(o);
  }
  static uint64_t headTensorBytes(const Checkpoint& ckpt) {
    uint64_t bytes = 0;
    for (const TensorEntry* e : ckpt.tensors())
      if (e->name.rfind("lm_head.", 0) == 0) bytes += e->nbytes;
    return bytes;
  }
  // Logits of `model`'s blocks with `head` [vocab, hidden] as the output head (float32, the final norm as
  // transformers computes it).
  static at::Tensor logitsWithHead(const LlamaModel& model, const at::Tensor& ids, const at::Tensor& head) {
    const LlamaModel::Context ctx = model.prepare(ids.size(0), ids.size(1), nullptr, nullptr);
    at::Tensor x = model.embed(ids);
    for (int64_t l = 0; l < model.numLayers(); ++l) x = model.block(l, x, ctx);
    const at::Tensor h = x.to(at::kFloat);
    const at::Tensor normed = h * at::rsqrt(h.pow(2).mean(-1, true) + model.config().rmsNormEps);
    const at::Tensor y = model.finalNorm().to(at::kFloat) * normed.to(x.scalar_type()).to(at::kFloat);
    return at::matmul(y.to(x.scalar_type()), head.to(x.scalar_type()).t()).to(at::kFloat);
  }
  std::string dir_, model_;
};

// The head quantized per channel in int8: its own packed tensor, the embedding as it was, config.json untied,
// and the loaded model's logits are those of the RTN-dequantized head.
TEST_F(CompressHead, Int8HeadIsPackedUntiedAndLoadsAsTheDequantizedHead) {
  const CompressReport r = compress("int8", R"({"lm_head": {"quantize": {"method": "rtn", "bits": 8, "granularity": "channel"}}})");
  const std::string out = dir_ + "/int8";
  const Checkpoint ckpt = Checkpoint::open(out);
  const Checkpoint source = Checkpoint::open(model_);
  EXPECT_EQ(ckpt.find("lm_head.weight"), nullptr);
  ASSERT_NE(ckpt.find("lm_head.weight.qcodes"), nullptr);
  ASSERT_NE(ckpt.find("lm_head.weight.qscales"), nullptr);
  EXPECT_TRUE(at::equal(readTensor(ckpt.at("model.embed_tokens.weight")), readTensor(source.at("model.embed_tokens.weight"))));

  const json config = readJsonFile(out + "/config.json");
  EXPECT_EQ(config.at("tie_word_embeddings"), false);
  EXPECT_EQ(readJsonFile(model_ + "/config.json").at("tie_word_embeddings"), true);
  const CompressionManifest manifest = *CompressionManifest::readFrom(out);
  ASSERT_NE(manifest.find("lm_head"), nullptr);
  EXPECT_EQ(manifest.find("lm_head")->format, "int8-channel");
  EXPECT_EQ(manifest.document.at("lm_head_bytes").get<uint64_t>(), headTensorBytes(ckpt));

  // The head's bytes are its tensors'; they are in the model's bytes, not in the block linears' bits per weight
  // (ref-tiny's block linears stay bf16).
  const int64_t vocab = 8192, hidden = 192;
  EXPECT_EQ(r.headBytes, headTensorBytes(ckpt));
  EXPECT_EQ(r.headBytes, uint64_t(vocab * hidden + vocab * 2));   // int8 codes + an fp16 scale per row
  EXPECT_DOUBLE_EQ(r.linearBitsPerWeight, 16.0);
  const auto head = std::find_if(r.modules.begin(), r.modules.end(), [](const ModuleReport& m) { return m.name == "lm_head"; });
  ASSERT_NE(head, r.modules.end());
  EXPECT_EQ(head->format, "int8-channel");
  EXPECT_NEAR(head->bitsPerWeight, 8.0 + 16.0 / hidden, 1e-9);
  uint64_t stored = 0;
  for (const TensorEntry* e : ckpt.tensors()) stored += e->nbytes;
  EXPECT_EQ(r.bytes, stored);
  const ModelSummary summary = summarizeModel(out);
  EXPECT_NEAR(summary.linearBitsPerWeight, 16.0, 1e-9);

  // Loaded dense: the head is the RTN-dequantized embedding, the embedding the source's.
  LoadedModel folder = loadModel(out, test::testRuntime());
  LoadedModel dense = loadModel(model_, test::testRuntime());
  const at::Tensor expected = rtnQuantize(dense.model->embedding(), QuantSpec::channel(8), "lm_head").dequantized;
  EXPECT_LT(relativeError(folder.model->outputHead().weight(), expected), 1e-6);
  EXPECT_TRUE(at::equal(folder.model->embedding(), dense.model->embedding()));
  const at::Tensor ids = at::tensor(dense.promptIds("The river runs to the sea and"), at::kLong).unsqueeze(0);
  const at::Tensor logits = folder.model->forward(ids);
  EXPECT_LT(relativeError(logits, logitsWithHead(*dense.model, ids, expected)), 1e-5);
  EXPECT_GT((logits - dense.model->forward(ids)).abs().max().item<double>(), 0.0);   // the head did change

  // Loaded packed (the kernels' CPU references): the head runs int8-channel, in the decode runtime too, whose
  // step reads the packed head's bytes.
  RuntimeOptions packedRt = makeRuntimeOptions("cpu", "bfloat16");
  packedRt.packedWeights = true;
  LoadedModel packed = loadModel(out, packedRt);
  ASSERT_NE(packed.model->outputHead().packed(), nullptr);
  EXPECT_EQ(packed.model->outputHead().packed()->format(), "int8-channel");
  LoadedModel unpacked = loadModel(out, makeRuntimeOptions("cpu", "bfloat16"));
  EXPECT_LT(relativeError(packed.model->forward(ids), unpacked.model->forward(ids)), 2e-2);
  const DecodeModel decode = DecodeModel::fromModel(*packed.model);
  EXPECT_EQ(decode.outputHead().format(), "int8-channel");
  // The kernel's layout (rows padded to its tile of columns) reads at least what is stored, far less than bf16.
  const int64_t headRead = decode.outputHead().weightBytes();
  EXPECT_GE(headRead, int64_t(r.headBytes));
  EXPECT_LT(headRead, vocab * hidden * 2 * 7 / 10);
  LoadedModel denseBf16 = loadModel(model_, packedRt);
  const DecodeModel denseDecode = DecodeModel::fromModel(*denseBf16.model);
  EXPECT_EQ(denseDecode.weightBytesPerStep(1) - decode.weightBytesPerStep(1), vocab * hidden * 2 - headRead);
}

// int4 g128 asked on ref-tiny's 192-wide rows: the plan narrows the groups to 64, as for any module, and says so.
TEST_F(CompressHead, Int4GroupHeadBesideQuantizedBlocks) {
  const CompressReport r = compress("int4", R"({"quantize": {"method": "rtn", "bits": 4, "group_size": 64},
                                                "lm_head": {"quantize": {"method": "rtn", "bits": 4, "group_size": 128}}})");
  const std::string out = dir_ + "/int4";
  const CompressionManifest manifest = *CompressionManifest::readFrom(out);
  ASSERT_NE(manifest.find("lm_head"), nullptr);
  EXPECT_EQ(manifest.find("lm_head")->format, "int4-g64");
  EXPECT_THAT(manifest.document.at("modules").at("lm_head").at("note").get<std::string>(), HasSubstr("groups of 64"));
  EXPECT_NEAR(r.linearBitsPerWeight, 4.25, 1e-9);   // the block linears' alone
  const Checkpoint ckpt = Checkpoint::open(out);
  EXPECT_EQ(r.headBytes, headTensorBytes(ckpt));
  EXPECT_EQ(r.headBytes, uint64_t(8192 * 192 / 2 + 8192 * 3 * 2));

  LoadedModel folder = loadModel(out, test::testRuntime());
  LoadedModel dense = loadModel(model_, test::testRuntime());
  const at::Tensor expected = rtnQuantize(dense.model->embedding(), QuantSpec::group(4, 64), "lm_head").dequantized;
  EXPECT_LT(relativeError(folder.model->outputHead().weight(), expected), 1e-6);
  EXPECT_TRUE(at::equal(folder.model->embedding(), dense.model->embedding()));

  RuntimeOptions packedRt = makeRuntimeOptions("cpu", "bfloat16");
  packedRt.packedWeights = true;
  LoadedModel packed = loadModel(out, packedRt);
  ASSERT_NE(packed.model->outputHead().packed(), nullptr);
  EXPECT_EQ(packed.model->outputHead().packed()->format(), "int4-g64");
  const at::Tensor ids = at::tensor(dense.promptIds("Once upon a time"), at::kLong).unsqueeze(0);
  LoadedModel unpacked = loadModel(out, makeRuntimeOptions("cpu", "bfloat16"));
  EXPECT_LT(relativeError(packed.model->forward(ids), unpacked.model->forward(ids)), 2e-2);

  // The instant estimate counts the head as compress stored it.
  const RecipeEstimate e = estimateRecipe(Recipe::fromFile(dir_ + "/int4.json"), summarizeModel(model_), DecodeBandwidth{});
  EXPECT_EQ(e.modelBytes, r.bytes);
}

// Without the block nothing about the head changes: the same files as a run whose recipe says "lm_head": null,
// config.json as the source's, and no head tensor (the head stays the tied embedding).
TEST_F(CompressHead, WithoutTheBlockTheFolderIsAsBefore) {
  const CompressReport a = compress("plain", R"({"quantize": {"method": "rtn", "bits": 4, "group_size": 64}})");
  const CompressReport b = compress("null", R"({"quantize": {"method": "rtn", "bits": 4, "group_size": 64}, "lm_head": null})");
  EXPECT_EQ(a.headBytes, 0u);
  EXPECT_EQ(a.bytes, b.bytes);
  const auto x = test::snapshot(dir_ + "/plain"), y = test::snapshot(dir_ + "/null");
  ASSERT_EQ(x.size(), y.size());
  for (const auto& [file, bytes] : x)
    if (file != "pareto.json") EXPECT_TRUE(y.at(file) == bytes) << file;
  EXPECT_EQ(x.at("config.json"), test::fileText(model_ + "/config.json"));
  const Checkpoint ckpt = Checkpoint::open(dir_ + "/plain");
  EXPECT_EQ(headTensorBytes(ckpt), 0u);
  const json manifest = readJsonFile(dir_ + "/plain/pareto.json");
  EXPECT_FALSE(manifest.at("modules").contains("lm_head"));
  EXPECT_FALSE(manifest.contains("lm_head_bytes"));
  for (const ModuleReport& m : a.modules) EXPECT_NE(m.name, "lm_head");
}

// The compress run's own evaluation sees the head it wrote: with the blocks untouched, every bit of KL to the
// dense model and every lost top-1 token is the head's; its bytes are in the result beside the block linears'.
TEST_F(CompressHead, TheRunsEvaluationMeasuresTheHeadItWrote) {
  CompressEvaluateOptions o;
  o.compress.modelDir = model_;
  o.compress.outDir = dir_ + "/evaluated";
  o.recipeDocument = json::parse(R"({"lm_head": {"quantize": {"method": "rtn", "bits": 4, "group_size": 64}}})");
  o.evaluation.heldOutText = test::sharedPath("data/heldout-prose.txt");
  o.evaluation.perplexityMaxWindows = 2;
  o.evaluation.prompts = test::sharedPath("data/prompts-prose.txt");
  o.evaluation.maxPrompts = 2;
  o.evaluation.maxNewTokens = 16;
  o.evaluation.driftSteps = 0;
  CompressEvaluateJob job(o);
  job.run({}, CancelToken());
  const json r = job.result();
  EXPECT_EQ(r.at("lm_head_bytes").get<uint64_t>(), uint64_t(8192 * 192 / 2 + 8192 * 3 * 2));
  EXPECT_DOUBLE_EQ(r.at(metric::kLinearBitsPerWeight).get<double>(), 16.0);
  bool listed = false;
  for (const json& m : r.at("modules")) listed |= m.at("name") == "lm_head" && m.at("format") == "int4-g64";
  EXPECT_TRUE(listed);
  EXPECT_GT(r.at(metric::kKlMean).get<double>(), 1e-4);
  EXPECT_GT(r.at(metric::kDecodeKlMean).get<double>(), 1e-4);
  EXPECT_GT(r.at(metric::kDecodeNll).get<double>(), r.at(metric::kDenseDecodeNll).get<double>());
}

// The exports of a folder with a packed head: dense HF writes the dequantized head (untied), GGUF writes a
// gguf-* head's blocks as they are and any other head dequantized with a note, compressed-tensors writes it dense.
TEST_F(CompressHead, ExportsWriteTheHeadTheirWay) {
  compress("int8", R"({"lm_head": {"quantize": {"method": "rtn", "bits": 8, "granularity": "channel"}}})");
  compress("q8", R"({"lm_head": {"quantize": {"method": "rtn", "format": "gguf-q8_0"}}})");
  const std::string int8 = dir_ + "/int8", q8 = dir_ + "/q8";
  LoadedModel folder = loadModel(int8, test::testRuntime());

  HfExportOptions hf;
  hf.modelDir = int8;
  hf.outDir = dir_ + "/int8-hf";
  exportHuggingFace(hf);
  const Checkpoint hfCkpt = Checkpoint::open(hf.outDir);
  ASSERT_NE(hfCkpt.find("lm_head.weight"), nullptr);
  EXPECT_FALSE(fs::exists(hf.outDir + "/pareto.json"));
  EXPECT_EQ(readJsonFile(hf.outDir + "/config.json").at("tie_word_embeddings"), false);
  LoadedModel hfModel = loadModel(hf.outDir, test::testRuntime());
  // Written in the checkpoint's dtype (bf16).
  EXPECT_LT(relativeError(hfModel.model->outputHead().weight(),
                          folder.model->outputHead().weight().to(at::kBFloat16).to(at::kFloat)), 1e-6);

  GgufExportOptions g;
  g.modelDir = int8;
  g.outFile = dir_ + "/int8.gguf";
  const GgufExportReport dequantized = exportGguf(g);
  EXPECT_EQ(dequantized.tensorsByType.count("q8_0"), 0u);
  bool noted = false;
  for (const std::string& n : dequantized.notes) noted |= n.find("output.weight written dequantized") != std::string::npos;
  EXPECT_TRUE(noted);
  g.modelDir = q8;
  g.outFile = dir_ + "/q8.gguf";
  const GgufExportReport blocks = exportGguf(g);
  ASSERT_EQ(blocks.tensorsByType.count("q8_0"), 1u);
  EXPECT_EQ(blocks.tensorsByType.at("q8_0"), 1);   // output.weight alone: the block linears stay bf16
  EXPECT_DOUBLE_EQ(blocks.linearBitsPerWeight, 16.0);

  // compressed-tensors packs the block linears; the head beside them is written dense.
  compress("int4int8", R"({"quantize": {"method": "rtn", "bits": 4, "group_size": 64},
                           "lm_head": {"quantize": {"method": "rtn", "bits": 8, "granularity": "channel"}}})");
  // An int8-g32 head is q8_0's blocks: written as such, nothing requantized.
  compress("g32", R"({"lm_head": {"quantize": {"method": "rtn", "bits": 8, "group_size": 32}}})");
  g.modelDir = dir_ + "/g32";
  g.outFile = dir_ + "/g32.gguf";
  const GgufExportReport grid = exportGguf(g);
  ASSERT_EQ(grid.tensorsByType.count("q8_0"), 1u);
  EXPECT_EQ(grid.tensorsByType.at("q8_0"), 1);
  bool exact = false;
  for (const std::string& n : grid.notes) exact |= n.find("output.weight written as q8_0") != std::string::npos;
  EXPECT_TRUE(exact);

  CompressedTensorsExportOptions ct;
  ct.modelDir = dir_ + "/int4int8";
  ct.outDir = dir_ + "/int8-ct";
  const CompressedTensorsExportReport c = exportCompressedTensors(ct);
  bool dense = false;
  for (const std::string& n : c.notes) dense |= n.find("lm_head (int8-channel) is written dense") != std::string::npos;
  EXPECT_TRUE(dense);
  const Checkpoint ctCkpt = Checkpoint::open(ct.outDir);
  ASSERT_NE(ctCkpt.find("lm_head.weight"), nullptr);
  EXPECT_LT(relativeError(readTensor(ctCkpt.at("lm_head.weight")).to(at::kFloat),
                          folder.model->outputHead().weight().to(at::kFloat)), 1e-2);
}

// Symmetric int8 / int4 groups of 32 are q8_0 / q4_0 blocks: the blocks decode (as llama.cpp decodes them) to the
// grid's own dequantized weight, bit for bit; other grids have no such type.
TEST(GridAsGguf, SymmetricGroupsOf32AreQ8_0AndQ4_0Exactly) {
  const at::Tensor w = at::randn({24, 96}, at::TensorOptions().dtype(at::kFloat).device(at::kCPU)) * 0.05;
  for (int bits : {8, 4}) {
    SCOPED_TRACE(bits);
    const QuantSpec spec = QuantSpec::group(bits, 32);
    const QuantGroupWeight q = QuantGroupWeight::pack(rtnQuantize(w, spec, "m"), spec);
    ASSERT_EQ(ggufTypeOfGrid(q), bits == 8 ? gguf::TensorType::Q8_0 : gguf::TensorType::Q4_0);
    const at::Tensor blocks = gridAsGgufBlocks(q);
    ASSERT_EQ(blocks.size(1), gguf::rowBytes(*ggufTypeOfGrid(q), 96));
    at::Tensor decoded = at::empty({24, 96}, at::kFloat);
    gguf::dequantizeRows(*ggufTypeOfGrid(q), blocks.data_ptr<uint8_t>(), 24, 96, decoded.data_ptr<float>());
    EXPECT_TRUE(at::equal(decoded, q.unpack()));
  }
  for (const QuantSpec& other : {QuantSpec::group(4, 32, false), QuantSpec::group(8, 96), QuantSpec::channel(8)}) {
    const QuantGroupWeight q = QuantGroupWeight::pack(rtnQuantize(w, other, "m"), other);
    EXPECT_FALSE(ggufTypeOfGrid(q).has_value()) << other.label();
    EXPECT_THROW(gridAsGgufBlocks(q), InputError) << other.label();
  }
}

// bench decode's synthetic models take the head's format too: its bytes are what a step reads of the head.
TEST(SyntheticHead, APackedHeadIsItsOwnWeightAndCountsItsBytes) {
  const ModelConfig c = modelPreset("tiny-llama");
  const RuntimeOptions rt = makeRuntimeOptions("cpu", "bfloat16");
  DecodeModel::SyntheticOptions s;
  s.layers = 1;
  const DecodeModel dense = DecodeModel::synthetic(c, s, rt);
  s.headFormat = "int8-channel";
  const DecodeModel int8 = DecodeModel::synthetic(c, s, rt);
  EXPECT_EQ(dense.outputHead().format(), "dense");
  EXPECT_EQ(int8.outputHead().format(), "int8-channel");
  EXPECT_EQ(int8.outputHead().rows(), c.vocabSize);
  EXPECT_EQ(dense.weightBytesPerStep(1) - int8.weightBytesPerStep(1),
            dense.outputHead().weightBytes() - int8.outputHead().weightBytes());
  EXPECT_LT(int8.outputHead().weightBytes(), dense.outputHead().weightBytes() * 6 / 10);
  s.headFormat = "int5-g7";
  EXPECT_THROW(DecodeModel::synthetic(c, s, rt), InputError);

  DecodeBenchOptions o;
  o.modelDir = "some-folder";
  o.headFormat = "int8-channel";
  o.device = "cpu";
  EXPECT_THAT([&] { runDecodeBenchmark(o, {}, CancelToken()); },
              ::testing::ThrowsMessage<InputError>(HasSubstr("--head-format applies to synthetic models")));
}

}  // namespace
}  // namespace pareto
