// GGUF grids as compression targets (compress/GgufQuantize.h): GPTQ on each GGUF grid against a direct float64
// column-by-column implementation, GPTQ against RTN on the Hessian-weighted error of a real layer of ref-small,
// and the compressed folder end to end on ref-tiny: RTN stores exactly the blocks `export gguf --type X` writes for
// the dense model, the folder loads to the weights the blocks decode to, inspect names the format and its bits
// per weight, and `export gguf --type auto` writes every stored block bit for bit (`--type X` requantizes and
// says so).
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "SharedData.h"
#include "SolverProblems.h"
#include "calib/SequentialPass.h"
#include "calib/TextCalibration.h"
#include "checkpoint/ModelConfig.h"
#include "checkpoint/Safetensors.h"
#include "compress/CompressJob.h"
#include "compress/GgufQuantize.h"
#include "export/GgufExport.h"
#include "formats/CompressionManifest.h"
#include "formats/GgufQuant.h"
#include "formats/PackedModuleIO.h"
#include "model/CheckpointTensors.h"
#include "model/LoadedModel.h"
#include "model/ModelSummary.h"
#include "model/TensorIO.h"
#include "util/Error.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using gguf::TensorType;
using ::testing::HasSubstr;

const std::vector<TensorType> kTypes = {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K};

std::vector<uint8_t> bytesOf(const at::Tensor& blocks) {
  const at::Tensor b = blocks.contiguous();
  return std::vector<uint8_t>(b.data_ptr<uint8_t>(), b.data_ptr<uint8_t>() + b.numel());
}

at::Tensor decodedRows(TensorType type, const at::Tensor& blocks, int64_t cols) {
  at::Tensor out = at::empty({blocks.size(0), cols}, at::kFloat);
  gguf::dequantizeRows(type, blocks.contiguous().data_ptr<uint8_t>(), blocks.size(0), cols, out.data_ptr<float>());
  return out;
}

// GPTQ on a GGUF grid written directly: float64, no lazy blocks, the full update of the later columns after every
// column. A block's grid is chosen from the current weights (as float32, as every GGUF grid is chosen) when the
// sweep reaches its first column; each column takes its nearest code on that grid.
std::vector<uint8_t> referenceGptq(const at::Tensor& weight, const at::Tensor& hessian, TensorType type, double damp) {
  at::Tensor w = weight.to(at::kDouble).clone();
  at::Tensor h = hessian.to(at::kDouble).clone();
  const int64_t rows = w.size(0), cols = w.size(1);
  const gguf::TypeTraits t = gguf::traits(type);
  const at::Tensor dead = h.diagonal() == 0;
  h.diagonal().masked_fill_(dead, 1);
  w.masked_fill_(dead.unsqueeze(0), 0);
  h.diagonal().add_(damp * h.diagonal().mean().item<double>());
  const at::Tensor u = at::linalg_cholesky(at::cholesky_inverse(at::linalg_cholesky(h)), /*upper=*/true);
  std::vector<gguf::BlockGrid> grids(static_cast<size_t>(rows));
  std::vector<int> codes(size_t(rows * cols));
  std::vector<uint8_t> out(size_t(rows * gguf::rowBytes(type, cols)));
  for (int64_t j = 0; j < cols; ++j) {
    const int position = int(j % t.weightsPerBlock);
    if (position == 0) {
      const at::Tensor block = w.narrow(1, j, t.weightsPerBlock).to(at::kFloat).contiguous();
      for (int64_t r = 0; r < rows; ++r)
        grids[size_t(r)] = gguf::chooseGrid(type, block.data_ptr<float>() + r * t.weightsPerBlock);
    }
    const at::Tensor column = w.select(1, j).clone();
    at::Tensor fixed = at::empty({rows}, at::kDouble);
    for (int64_t r = 0; r < rows; ++r) {
      const int code = grids[size_t(r)].nearestCode(position, float(column[r].item<double>()));
      codes[size_t(r * cols + j)] = code;
      fixed[r] = double(grids[size_t(r)].value(position, code));
    }
    const at::Tensor error = (column - fixed) / u[j][j].item<double>();
    w.narrow(1, j, cols - j) -= at::outer(error, u[j].narrow(0, j, cols - j));
    w.select(1, j).copy_(fixed);
    if (position == t.weightsPerBlock - 1)
      for (int64_t r = 0; r < rows; ++r)
        gguf::encodeBlock(grids[size_t(r)], codes.data() + r * cols + j + 1 - t.weightsPerBlock,
                          out.data() + r * gguf::rowBytes(type, cols) + (j / t.weightsPerBlock) * t.bytesPerBlock);
  }
  return out;
}

TEST(GgufGptq, ChoosesTheCodesOfADirectFloat64Implementation) {
  const test::Problem p = test::correlatedProblem(12, 512, 2048, 7);
  for (TensorType type : kTypes) {
    SCOPED_TRACE(gguf::traits(type).name);
    const std::vector<uint8_t> expected = referenceGptq(p.weight, p.hessian, type, 0.01);
    // The lazy blocks (whole GGUF blocks, whatever width is asked) change how the updates are summed, not the codes.
    for (int64_t lazy : {1, 128, 512}) {
      GgufGptqOptions o;
      o.blockSize = lazy;
      const GgufGptqResult r = ggufGptqQuantize(p.weight.to(at::kDouble), p.hessian, type, o, "m");
      ASSERT_EQ(r.quant.blocks.sizes(), at::IntArrayRef({12, gguf::rowBytes(type, 512)}));
      EXPECT_EQ(bytesOf(r.quant.blocks), expected) << "lazy blocks of " << lazy;
      EXPECT_EQ(r.quant.dequantized.scalar_type(), at::kDouble);
      EXPECT_TRUE(at::equal(r.quant.dequantized.to(at::kFloat), decodedRows(type, r.quant.blocks, 512)));
      EXPECT_GT(r.report.loss, 0);
    }
    // float32 work reaches the same codes up to the rare tie that rounding moves.
    const GgufGptqResult single = ggufGptqQuantize(p.weight, p.hessian, type, {}, "m");
    const std::vector<uint8_t> got = bytesOf(single.quant.blocks);
    int64_t differing = 0;
    for (size_t i = 0; i < got.size(); ++i) differing += got[i] != expected[i];
    EXPECT_LE(differing, int64_t(got.size() / 100));
  }
}

TEST(GgufGptq, RefusesWhatTheGridCannotTakeNamingTheModule) {
  const test::Problem p = test::correlatedProblem(4, 96, 256, 3);
  try {
    ggufGptqQuantize(p.weight, p.hessian, TensorType::Q4_K, {}, "model.layers.0.mlp.up_proj");
    FAIL() << "96 columns were quantized on 256-weight super-blocks";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("model.layers.0.mlp.up_proj"));
    EXPECT_THAT(e.what(), HasSubstr("96 input columns are not whole 256-weight blocks of gguf-q4_k"));
  }
  EXPECT_THROW(ggufRtnQuantize(p.weight, TensorType::F16, "m"), InputError);
  GgufGptqOptions noDamp;
  noDamp.damp = 0;
  EXPECT_THROW(ggufGptqQuantize(p.weight, p.hessian, TensorType::Q4_0, noDamp, "m"), InputError);
  // An input that never fires: its weights go to 0, which every grid stores.
  at::Tensor h = p.hessian.clone();
  h.select(0, 5).zero_();
  h.select(1, 5).zero_();
  const GgufGptqResult r = ggufGptqQuantize(p.weight, h, TensorType::Q4_0, {}, "m");
  EXPECT_EQ(r.report.deadInputs, 1);
  EXPECT_TRUE(at::equal(r.quant.dequantized.select(1, 5), at::zeros({4})));
}

// tr((W − Ŵ) H (W − Ŵ)ᵀ): the calibration objective GPTQ minimizes.
double weightedError(const at::Tensor& w, const at::Tensor& q, const at::Tensor& h) {
  const at::Tensor d = (w - q).to(at::kDouble);
  return at::matmul(at::matmul(d, h.to(at::kDouble)), d.t()).trace().item<double>();
}

TEST(GgufGptq, BeatsRoundToNearestOnTheWeightedErrorOfARealLayer) {
  PARETO_REQUIRE_SHARED();
  LoadedModel m = loadModel(test::sharedPath("models/ref-small"), {});
  TextCalibrationOptions o;
  o.window = 256;
  o.tokens = 4096;
  const CalibrationSet data = textCalibration(*m.tokenizer, test::sharedPath("data/wikitext2-test.txt"), o);
  std::map<std::string, std::pair<at::Tensor, at::Tensor>> layer;   // weight, H
  runSequentialPass(*m.model, data, [&](const std::string& name, const at::Tensor& w, const HessianAccumulator& h) {
    if (name.rfind("model.layers.3.", 0) == 0) layer[name] = {w.clone(), h.sum().clone()};
    return at::Tensor();
  });
  // q_proj and o_proj read 384 inputs (32-weight types only), down_proj 1024 (every type).
  const std::vector<std::pair<std::string, TensorType>> cases = {
      {"model.layers.3.self_attn.q_proj", TensorType::Q4_0}, {"model.layers.3.self_attn.o_proj", TensorType::Q8_0},
      {"model.layers.3.mlp.down_proj", TensorType::Q4_K},    {"model.layers.3.mlp.down_proj", TensorType::Q6_K},
      {"model.layers.3.mlp.down_proj", TensorType::Q4_0}};
  for (const auto& [name, type] : cases) {
    SCOPED_TRACE(name + " " + gguf::traits(type).name);
    ASSERT_TRUE(layer.count(name));
    const auto& [w, h] = layer.at(name);
    const double rtn = weightedError(w, ggufRtnQuantize(w, type, name).dequantized, h);
    const double gptq = weightedError(w, ggufGptqQuantize(w, h, type, {}, name).quant.dequantized, h);
    std::printf("%s %s: H-weighted error RTN %.4g, GPTQ %.4g (%.2fx)\n", name.c_str(), gguf::traits(type).name, rtn,
                gptq, rtn / gptq);
    EXPECT_LT(gptq, 0.9 * rtn);
  }
}

// ---- the compressed folder end to end -------------------------------------------------------------------------

// The tensors of a GGUF file: type, shape (outermost first) and data bytes, read as llama.cpp's gguf reader does.
struct GgufTensor {
  uint32_t type = 0;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

std::map<std::string, GgufTensor> readGgufTensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> f((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t pos = 4;   // "GGUF"
  auto take = [&](auto& value) {
    std::memcpy(&value, f.data() + pos, sizeof value);
    pos += sizeof value;
  };
  auto u32 = [&] { uint32_t v; take(v); return v; };
  auto u64 = [&] { uint64_t v; take(v); return v; };
  auto str = [&] {
    const uint64_t n = u64();
    std::string s(reinterpret_cast<const char*>(f.data() + pos), size_t(n));
    pos += n;
    return s;
  };
  std::function<void(uint32_t)> skip = [&](uint32_t type) {
    static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
      str();
    } else if (type == 9) {
      const uint32_t element = u32();
      for (uint64_t n = u64(), i = 0; i < n; ++i) skip(element);
    } else {
      pos += sizes[type];
    }
  };
  u32();   // version
  const uint64_t tensors = u64(), keys = u64();
  for (uint64_t k = 0; k < keys; ++k) {
    str();
    skip(u32());
  }
  std::vector<std::pair<std::string, uint64_t>> offsets;
  std::map<std::string, GgufTensor> out;
  for (uint64_t i = 0; i < tensors; ++i) {
    const std::string name = str();
    GgufTensor& t = out[name];
    const uint32_t dims = u32();
    for (uint32_t d = 0; d < dims; ++d) t.shape.insert(t.shape.begin(), int64_t(u64()));
    t.type = u32();
    offsets.emplace_back(name, u64());
  }
  const size_t data = (pos + 31) / 32 * 32;
  for (const auto& [name, offset] : offsets) {
    GgufTensor& t = out[name];
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < t.shape.size(); ++d) rows *= t.shape[d];
    const int64_t bytes = rows * gguf::rowBytes(TensorType(t.type), t.shape.back());
    t.data.assign(f.begin() + long(data + offset), f.begin() + long(data + offset + bytes));
  }
  return out;
}

std::string writeRecipe(const std::string& dir, const std::string& method, const std::string& format) {
  nlohmann::json recipe = {{"quantize", {{"method", method}, {"format", format}}}};
  if (method == "gptq")
    recipe["calibration"] = {{"source", "text"}, {"text", test::sharedPath("data/wikitext2-test.txt")},
                             {"tokens", 1024}, {"window", 128}};
  const std::string path = dir + "/" + format + "-" + method + ".json";
  std::ofstream(path) << recipe.dump();
  return path;
}

GgufExportReport exportTo(const std::string& model, const std::string& out, const std::string& type) {
  GgufExportOptions o;
  o.modelDir = model;
  o.outFile = out;
  o.type = type;
  o.overwrite = true;
  return exportGguf(o);
}

TEST(GgufCompress, RoundToNearestStoresTheBlocksExportWritesForTheDenseModel) {
  PARETO_REQUIRE_SHARED();
  const std::string dir = test::scratchDir("compress-gguf-rtn");
  const std::string model = test::sharedPath("models/ref-tiny");
  const Checkpoint dense = Checkpoint::open(model);
  for (TensorType type : kTypes) {
    const std::string name = gguf::traits(type).name;
    SCOPED_TRACE(name);
    CompressOptions o;
    o.modelDir = model;
    o.recipePath = writeRecipe(dir, "rtn", "gguf-" + name);
    o.outDir = dir + "/" + name;
    o.overwrite = true;
    const CompressReport report = runCompress(o);
    const auto manifest = CompressionManifest::readFrom(o.outDir);
    ASSERT_TRUE(manifest);
    const nlohmann::json& modules = manifest->document["modules"];
    const Checkpoint folder = Checkpoint::open(o.outDir);
    const CheckpointTensors stored(folder);
    const LoadedModel loaded = loadModel(o.outDir, {});
    std::map<std::string, at::Tensor> runs;
    for (int64_t l = 0; l < loaded.model->numLayers(); ++l)
      for (const auto& [group, linear] : loaded.model->layerLinears(l)) runs[linear->name()] = linear->weight();
    ASSERT_EQ(report.modules.size(), runs.size());
    for (const ModuleReport& mr : report.modules) {
      SCOPED_TRACE(mr.name);
      const at::Tensor w = readTensor(dense.at(mr.name + ".weight")).to(at::kFloat).contiguous();
      // ref-tiny's 192-wide rows take the 32-weight type a k-quant falls back to, and the manifest says so.
      const TensorType expectedType = w.size(1) % gguf::traits(type).weightsPerBlock ? gguf::narrowRowType(type) : type;
      const WeightFormat format = WeightFormat::ggufBlocks(expectedType);
      EXPECT_EQ(mr.format, format.name());
      EXPECT_DOUBLE_EQ(mr.bitsPerWeight, format.blockBitsPerWeight());
      EXPECT_EQ(modules[mr.name].contains("note"), expectedType != type);
      if (expectedType != type)
        EXPECT_THAT(modules[mr.name]["note"].get<std::string>(), HasSubstr("192 input columns are not whole"));
      const PackedModule p = readPackedModule(stored, mr.name, format, w.size(0), w.size(1));
      EXPECT_EQ(bytesOf(p.gguf), gguf::quantizeRows(expectedType, w.data_ptr<float>(), w.size(0), w.size(1)));
      // It runs as the blocks decode (ggml's dequantization).
      EXPECT_TRUE(at::equal(runs.at(mr.name), decodedRows(expectedType, p.gguf, w.size(1))));
    }
    // inspect names each module's format and its bits per weight.
    const ModelSummary summary = summarizeModel(o.outDir);
    for (const ModuleFormatSummary& s : summary.modules) {
      EXPECT_EQ(s.format.rfind("gguf-", 0), 0u) << s.name;
      EXPECT_DOUBLE_EQ(s.bitsPerWeight, WeightFormat::parse(s.format).blockBitsPerWeight()) << s.name;
    }

    // `auto` writes the stored blocks; the dense model requantized by --type gives the very same file contents.
    const GgufExportReport fromFolder = exportTo(o.outDir, dir + "/" + name + "-auto.gguf", "auto");
    EXPECT_THAT(fromFolder.notes.back(), HasSubstr("written as compress stored them"));
    exportTo(model, dir + "/" + name + "-dense.gguf", name);
    const auto a = readGgufTensors(dir + "/" + name + "-auto.gguf");
    const auto b = readGgufTensors(dir + "/" + name + "-dense.gguf");
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [tensor, t] : b) {
      ASSERT_TRUE(a.count(tensor)) << tensor;
      EXPECT_EQ(a.at(tensor).type, t.type) << tensor;
      EXPECT_EQ(a.at(tensor).shape, t.shape) << tensor;
      EXPECT_TRUE(a.at(tensor).data == t.data) << tensor;
    }
  }
}

TEST(GgufCompress, GptqFolderExportsItsOwnBlocksAndRequantizesOnlyWhenAsked) {
  PARETO_REQUIRE_SHARED();
  const std::string dir = test::scratchDir("compress-gguf-gptq");
  const std::string model = test::sharedPath("models/ref-tiny");
  CompressOptions o;
  o.modelDir = model;
  o.recipePath = writeRecipe(dir, "gptq", "gguf-q4_k");
  o.outDir = dir + "/q4_k";
  o.overwrite = true;
  const CompressReport report = runCompress(o);
  const Checkpoint folder = Checkpoint::open(o.outDir);
  const CheckpointTensors stored(folder);
  const Checkpoint dense = Checkpoint::open(model);
  const ModelConfig config = ModelConfig::fromFile(model + "/config.json");
  exportTo(o.outDir, dir + "/auto.gguf", "auto");
  const auto written = readGgufTensors(dir + "/auto.gguf");
  int superBlocks = 0;
  for (const ModuleReport& mr : report.modules) {
    SCOPED_TRACE(mr.name);
    const WeightFormat format = WeightFormat::parse(mr.format);
    superBlocks += format.ggufType == TensorType::Q4_K;
    const std::vector<int64_t> shape = dense.at(mr.name + ".weight").shape;
    at::Tensor blocks = readPackedModule(stored, mr.name, format, shape[0], shape[1]).gguf;
    // llama.cpp's RoPE pairs: q and k rows are reordered per head, whole rows at a time.
    const bool q = mr.name.find("q_proj") != std::string::npos, k = mr.name.find("k_proj") != std::string::npos;
    if (q || k) {
      const int64_t heads = q ? config.numHeads : config.numKvHeads;
      blocks = blocks.reshape({heads, 2, blocks.size(0) / heads / 2, -1}).transpose(1, 2).reshape(blocks.sizes());
    }
    const std::string layer = mr.name.substr(13, mr.name.find('.', 13) - 13);
    std::string ggufName = "blk." + layer + ".";
    for (const auto& [hf, g] : std::vector<std::pair<std::string, std::string>>{
             {"q_proj", "attn_q"}, {"k_proj", "attn_k"}, {"v_proj", "attn_v"}, {"o_proj", "attn_output"},
             {"gate_proj", "ffn_gate"}, {"up_proj", "ffn_up"}, {"down_proj", "ffn_down"}})
      if (mr.name.find(hf) != std::string::npos) ggufName += g + ".weight";
    ASSERT_TRUE(written.count(ggufName)) << ggufName;
    EXPECT_EQ(written.at(ggufName).type, uint32_t(format.ggufType));
    EXPECT_TRUE(written.at(ggufName).data == bytesOf(blocks)) << ggufName;
  }
  EXPECT_EQ(superBlocks, 4);   // the down projections read 512 inputs; the rest fall back to q4_0

  const GgufExportReport requantized = exportTo(o.outDir, dir + "/q8.gguf", "q8_0");
  bool said = false;
  for (const std::string& note : requantized.notes) said = said || note.find("requantized") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_EQ(readGgufTensors(dir + "/q8.gguf").at("blk.0.ffn_down.weight").type, uint32_t(TensorType::Q8_0));
}

}  // namespace
}  // namespace pareto
