// GGUF: ggml's block layouts against bytes written out here by hand, the grids' round-to-nearest, the file
// container read back field by field, `export gguf`'s refusals and overwrite rule, and the check by a real
// consumer: llama.cpp (the npm package node-llama-cpp, installed by scripts/setup.sh --llama-cpp) scores the
// exported ref-small as Pareto scores the same weights, and ref-small compressed to GGUF grids by RTN and GPTQ,
// exported as stored, as Pareto scores the compressed folder.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "SharedData.h"
#include "checkpoint/Safetensors.h"
#include "compress/CompressJob.h"
#include "eval/Perplexity.h"
#include "export/GgufExport.h"
#include "export/GgufWriter.h"
#include "formats/GgufQuant.h"
#include "model/LoadedModel.h"
#include "model/TensorIO.h"
#include "tokenizer/Tokenizer.h"
#include "util/Error.h"

namespace pareto {
namespace {
namespace fs = std::filesystem;
using gguf::TensorType;

std::vector<uint8_t> encode(const gguf::BlockGrid& g, const std::vector<int>& codes) {
  std::vector<uint8_t> out(size_t(gguf::traits(g.type).bytesPerBlock));
  gguf::encodeBlock(g, codes.data(), out.data());
  return out;
}

std::vector<float> decode(TensorType type, const std::vector<uint8_t>& bytes) {
  std::vector<float> out(size_t(gguf::traits(type).weightsPerBlock));
  gguf::decodeBlock(type, bytes.data(), out.data());
  return out;
}

// ---- block layouts: bytes by hand -------------------------------------------------------------------------

TEST(GgufBlocks, SizesAndBitsPerWeightAreGgmls) {
  auto bpw = [](TensorType t) { return 8.0 * gguf::traits(t).bytesPerBlock / gguf::traits(t).weightsPerBlock; };
  EXPECT_DOUBLE_EQ(bpw(TensorType::Q8_0), 8.5);
  EXPECT_DOUBLE_EQ(bpw(TensorType::Q4_0), 4.5);
  EXPECT_DOUBLE_EQ(bpw(TensorType::Q4_K), 4.5);
  EXPECT_DOUBLE_EQ(bpw(TensorType::Q6_K), 6.5625);
  EXPECT_EQ(gguf::rowBytes(TensorType::Q4_K, 4096), 16 * 144);
  EXPECT_THROW(gguf::rowBytes(TensorType::Q4_K, 384), InputError);
  EXPECT_EQ(uint32_t(TensorType::Q4_K), 12u);   // ggml_type ids as llama.cpp reads them
  EXPECT_EQ(uint32_t(TensorType::BF16), 30u);
  EXPECT_EQ(gguf::parseTensorType("Q4_K"), TensorType::Q4_K);
  EXPECT_THROW(gguf::parseTensorType("q5_1"), InputError);
}

TEST(GgufBlocks, Q8_0IsAScaleThenSignedBytes) {
  gguf::BlockGrid g;
  g.type = TensorType::Q8_0, g.subBlockWeights = 32, g.codeMin = -128, g.codeMax = 127;
  g.d = 0x3800;   // 0.5
  std::vector<int> codes(32, 0);
  codes[0] = -128, codes[1] = -1, codes[2] = 1, codes[31] = 127;
  const std::vector<uint8_t> b = encode(g, codes);
  const std::vector<uint8_t> head = {0x00, 0x38, 0x80, 0xFF, 0x01, 0x00};
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.begin() + 6), head);
  EXPECT_EQ(b[33], 0x7F);
  const std::vector<float> v = decode(TensorType::Q8_0, b);
  EXPECT_EQ(v[0], -64.0f);
  EXPECT_EQ(v[1], -0.5f);
  EXPECT_EQ(v[31], 63.5f);
}

TEST(GgufBlocks, Q4_0PairsWeightJWithWeightJPlus16) {
  gguf::BlockGrid g;
  g.type = TensorType::Q4_0, g.subBlockWeights = 32, g.codeMin = 0, g.codeMax = 15;
  g.d = 0x3C00;   // 1.0
  std::vector<int> codes(32);
  for (int j = 0; j < 16; ++j) codes[j] = j, codes[j + 16] = 15 - j;
  const std::vector<uint8_t> b = encode(g, codes);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x3C);
  EXPECT_EQ(b[2], 0xF0);    // weight 0 (code 0) low, weight 16 (code 15) high
  EXPECT_EQ(b[3], 0xE1);    // weight 1 (1), weight 17 (14)
  EXPECT_EQ(b[17], 0x0F);   // weight 15 (15), weight 31 (0)
  const std::vector<float> v = decode(TensorType::Q4_0, b);
  EXPECT_EQ(v[0], -8.0f);
  EXPECT_EQ(v[15], 7.0f);
  EXPECT_EQ(v[16], 7.0f);
}

TEST(GgufBlocks, Q4KPacksSixBitScalesAndMinsAsGgmlReadsThem) {
  gguf::BlockGrid g;
  g.type = TensorType::Q4_K, g.subBlockWeights = 32, g.codeMin = 0, g.codeMax = 15;
  g.d = 0x3C00;      // 1.0
  g.dmin = 0x3800;   // 0.5
  g.sc = {1, 2, 3, 63, 17, 32, 48, 5};
  g.m = {0, 1, 2, 3, 40, 50, 60, 63};
  std::vector<int> codes(256);
  for (int i = 0; i < 256; ++i) codes[i] = i % 16;
  const std::vector<uint8_t> b = encode(g, codes);
  const std::vector<uint8_t> scales = {0x41, 0x82, 0xC3, 0x3F, 0x80, 0xC1, 0xC2, 0xC3, 0x81, 0x20, 0xC0, 0xF5};
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 4, b.begin() + 16), scales);
  EXPECT_EQ(b[16], 0x00);        // weight 0 (code 0) low nibble, weight 32 (code 0) high nibble
  EXPECT_EQ(b[16 + 1], 0x11);    // weights 1 and 33
  EXPECT_EQ(b[16 + 32 + 5], 0x55);   // weights 64 + 5 and 96 + 5
  const std::vector<float> v = decode(TensorType::Q4_K, b);
  EXPECT_EQ(v[3], 1.0f * 1 * 3 - 0.5f * 0);          // sub-block 0
  EXPECT_EQ(v[128 + 7], 1.0f * 17 * 7 - 0.5f * 40);  // sub-block 4: the high bits in bytes 0 and 4
  EXPECT_EQ(v[255], 1.0f * 5 * 15 - 0.5f * 63);      // sub-block 7
}

TEST(GgufBlocks, Q6KSplitsCodesIntoLowNibblesAndHighPairs) {
  gguf::BlockGrid g;
  g.type = TensorType::Q6_K, g.subBlockWeights = 16, g.codeMin = 0, g.codeMax = 63;
  g.d = 0x3C00;
  for (int s = 0; s < 16; ++s) g.sc6[s] = int8_t(s - 8);
  std::vector<int> codes(256, 32);
  codes[0] = 63, codes[32] = 21, codes[64] = 42, codes[96] = 1;
  const std::vector<uint8_t> b = encode(g, codes);
  EXPECT_EQ(b[0], 0xAF);    // ql[0]: weight 0 (15) low, weight 64 (10) high
  EXPECT_EQ(b[32], 0x15);   // ql[32]: weight 32 (5), weight 96 (1)
  EXPECT_EQ(b[1], 0x00);    // code 32 has low nibble 0
  EXPECT_EQ(b[128], 0x27);  // qh[0]: top pairs 3, 1, 2, 0
  EXPECT_EQ(b[129], 0xAA);  // qh[1]: four codes 32 → pairs 2, 2, 2, 2
  EXPECT_EQ(int8_t(b[192]), -8);   // scales
  EXPECT_EQ(b[208], 0x00);
  EXPECT_EQ(b[209], 0x3C);  // d last
  const std::vector<float> v = decode(TensorType::Q6_K, b);
  EXPECT_EQ(v[0], -8.0f * 31);   // sub-block 0, scale −8
  EXPECT_EQ(v[64], -4.0f * 10);  // sub-block 4, scale −4
  EXPECT_EQ(v[96], -2.0f * -31); // sub-block 6, scale −2
  EXPECT_EQ(v[200], 0.0f);
}

// ---- grids: round to nearest on the grid that is stored -----------------------------------------------------

TEST(GgufGrids, EveryWeightGetsTheNearestCodeOfItsStoredGrid) {
  at::manual_seed(3);
  for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K}) {
    const int n = gguf::traits(type).weightsPerBlock;
    const at::Tensor w = at::randn({4, 2 * 256}) * 0.02 + at::rand({4, 1}) * 0.01;   // offsets: asymmetric blocks
    const std::vector<uint8_t> bytes = gguf::quantizeRows(type, w.data_ptr<float>(), 4, 512);
    ASSERT_EQ(int64_t(bytes.size()), 4 * gguf::rowBytes(type, 512)) << gguf::traits(type).name;
    std::vector<float> back(4 * 512);
    gguf::dequantizeRows(type, bytes.data(), 4, 512, back.data());
    double err = 0, norm = 0;
    for (int64_t b = 0; b < 4 * 512 / n; ++b) {
      const float* x = w.data_ptr<float>() + b * n;
      const gguf::BlockGrid g = gguf::chooseGrid(type, x);
      for (int i = 0; i < n; ++i) {
        const float got = back[size_t(b * n + i)];
        ASSERT_EQ(got, g.value(i, g.nearestCode(i, x[i]))) << gguf::traits(type).name;
        for (int c = g.codeMin; c <= g.codeMax; ++c)   // nothing on this grid is nearer
          ASSERT_LE(std::fabs(got - x[i]), std::fabs(g.value(i, c) - x[i]) + 1e-7f) << gguf::traits(type).name;
        err += double(got - x[i]) * (got - x[i]), norm += double(x[i]) * x[i];
      }
    }
    const double rel = std::sqrt(err / norm);
    EXPECT_LT(rel, type == TensorType::Q8_0 ? 0.01 : type == TensorType::Q6_K ? 0.03 : 0.15) << gguf::traits(type).name;
  }
}

TEST(GgufGrids, ZeroBlocksStayZero) {
  const std::vector<float> zeros(256, 0.0f);
  for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K}) {
    const std::vector<uint8_t> b = gguf::quantizeRows(type, zeros.data(), 1, 256);
    std::vector<float> back(256, 1.0f);
    gguf::dequantizeRows(type, b.data(), 1, 256, back.data());
    for (float v : back) ASSERT_EQ(v, 0.0f) << gguf::traits(type).name;
  }
}

// ---- the container, read back field by field ----------------------------------------------------------------

struct Reader {
  std::vector<uint8_t> bytes;
  size_t at = 0;
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string str() {
    const auto n = get<uint64_t>();
    std::string s(reinterpret_cast<const char*>(bytes.data() + at), size_t(n));
    at += size_t(n);
    return s;
  }
};

std::vector<uint8_t> readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(GgufWriter, HeaderMetadataTensorInfosAndAlignedData) {
  const std::string dir = test::scratchDir("gguf-writer");
  gguf::Writer w;
  w.set("general.architecture", std::string("llama"));
  w.set("llama.block_count", uint32_t(2));
  w.set("tokenizer.ggml.tokens", std::vector<std::string>{"a", "bc"});
  w.set("llama.block_count", uint32_t(3));   // replaces, keeps its place
  w.addTensor({"norm", {3}, TensorType::F32, [] {
                 const float v[3] = {1, 2, 3};
                 return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(v), reinterpret_cast<const uint8_t*>(v) + 12);
               }});
  w.addTensor({"w", {2, 32}, TensorType::Q8_0, [] { return std::vector<uint8_t>(68, 0x5A); }});
  EXPECT_THROW(w.addTensor({"w", {1}, TensorType::F32, {}}), InputError);
  EXPECT_THROW(w.addTensor({"odd", {2, 48}, TensorType::Q8_0, {}}), InputError);
  w.write(dir + "/t.gguf");

  Reader r{readAll(dir + "/t.gguf")};
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.bytes.data()), 4), "GGUF");
  r.at = 4;
  EXPECT_EQ(r.get<uint32_t>(), 3u);
  EXPECT_EQ(r.get<uint64_t>(), 2u);   // tensors
  EXPECT_EQ(r.get<uint64_t>(), 3u);   // keys
  EXPECT_EQ(r.str(), "general.architecture");
  EXPECT_EQ(r.get<uint32_t>(), 8u);   // string
  EXPECT_EQ(r.str(), "llama");
  EXPECT_EQ(r.str(), "llama.block_count");
  EXPECT_EQ(r.get<uint32_t>(), 4u);   // uint32
  EXPECT_EQ(r.get<uint32_t>(), 3u);
  EXPECT_EQ(r.str(), "tokenizer.ggml.tokens");
  EXPECT_EQ(r.get<uint32_t>(), 9u);   // array
  EXPECT_EQ(r.get<uint32_t>(), 8u);   // of strings
  EXPECT_EQ(r.get<uint64_t>(), 2u);
  EXPECT_EQ(r.str(), "a");
  EXPECT_EQ(r.str(), "bc");
  EXPECT_EQ(r.str(), "norm");
  EXPECT_EQ(r.get<uint32_t>(), 1u);
  EXPECT_EQ(r.get<uint64_t>(), 3u);
  EXPECT_EQ(r.get<uint32_t>(), 0u);   // F32
  EXPECT_EQ(r.get<uint64_t>(), 0u);   // offset
  EXPECT_EQ(r.str(), "w");
  EXPECT_EQ(r.get<uint32_t>(), 2u);
  EXPECT_EQ(r.get<uint64_t>(), 32u);  // ne0: the row (innermost) first
  EXPECT_EQ(r.get<uint64_t>(), 2u);
  EXPECT_EQ(r.get<uint32_t>(), 8u);   // Q8_0
  EXPECT_EQ(r.get<uint64_t>(), 32u);  // 12 bytes of norm padded to the 32-byte alignment
  const size_t data = (r.at + 31) / 32 * 32;
  float first;
  std::memcpy(&first, r.bytes.data() + data + 4, 4);
  EXPECT_EQ(first, 2.0f);
  EXPECT_EQ(r.bytes[data + 32], 0x5A);
  EXPECT_EQ(r.bytes.size(), data + 32 + 68 + 28);
}

// ---- export gguf -------------------------------------------------------------------------------------------

TEST(GgufExport, RefusesWhatItCannotWriteAndReplacesOnlyItsOwnFiles) {
  PARETO_REQUIRE_SHARED();
  const std::string dir = test::scratchDir("gguf-export");
  GgufExportOptions o;
  o.modelDir = test::sharedPath("models/ref-tiny");
  o.outFile = dir + "/tiny.gguf";
  o.type = "q4_0";
  const GgufExportReport r = exportGguf(o);
  EXPECT_EQ(r.architecture, "llama");
  EXPECT_DOUBLE_EQ(r.linearBitsPerWeight, 4.5);
  EXPECT_TRUE(isParetoGguf(o.outFile));
  EXPECT_EQ(fs::file_size(o.outFile), r.bytes);
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "tiny.gguf");   // no leftovers

  EXPECT_THROW(exportGguf(o), InputError);   // exists, no --overwrite
  o.overwrite = true;
  EXPECT_NO_THROW(exportGguf(o));            // Pareto's own file
  const std::string precious = dir + "/precious.gguf";
  std::ofstream(precious) << "GGUF not mine";
  o.outFile = precious;
  try {
    exportGguf(o);
    FAIL() << "replaced a file Pareto did not write";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a file Pareto wrote"), std::string::npos) << e.what();
  }
  std::ifstream in(precious);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "GGUF not mine");

  o.outFile = test::sharedPath("models/ref-tiny/model.safetensors");   // an input of the run
  EXPECT_THROW(exportGguf(o), InputError);
  o.outFile = dir + "/q6.gguf";
  o.type = "q6_k";   // ref-tiny's rows are 192 or 512 wide: the 192-wide fall back to q8_0, and it says so
  const GgufExportReport k = exportGguf(o);
  ASSERT_FALSE(k.notes.empty());
  EXPECT_NE(k.notes[0].find("q6_k → q8_0 (192 columns)"), std::string::npos) << k.notes[0];
  EXPECT_GT(k.tensorsByType.at("q6_k"), 0);
}

// ---- the check by llama.cpp ---------------------------------------------------------------------------------

std::string nodeLlamaCppDir() {
  if (const char* env = std::getenv("PARETO_NODE_LLAMA_CPP"); env != nullptr && *env != '\0') return env;
  return PARETO_NODE_LLAMA_CPP_DIR;
}

std::string run(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0) return "exit " + std::to_string(status) + ": " + out;
  return out;
}

// The ids of the first `count` windows of `window` tokens of a text, as `perplexity` cuts them.
std::vector<std::vector<int64_t>> windowsOf(const std::string& model, const std::string& text, int64_t window, int count) {
  const Tokenizer tok = Tokenizer::fromPath(model);
  const std::vector<TokenId> ids = encodeTextFile(tok, text);
  std::vector<std::vector<int64_t>> out;
  for (int w = 0; w < count && int64_t(w + 1) * window <= int64_t(ids.size()); ++w)
    out.emplace_back(ids.begin() + w * window, ids.begin() + (w + 1) * window);
  return out;
}

// A dense folder beside the original whose block linears hold the weights a GGUF type stores for them: what
// llama.cpp reads from the exported file, for Pareto to score.
std::string foldToGrid(const std::string& model, const std::string& dir, TensorType type) {
  const Checkpoint ckpt = Checkpoint::open(model);
  NamedTensors tensors;
  for (const TensorEntry* e : ckpt.tensors()) {
    at::Tensor t = readTensor(*e).to(at::kFloat).contiguous();
    const bool linear = e->name.find("_proj.weight") != std::string::npos;
    if (linear && gguf::traits(type).quantized) {
      TensorType grid = type;
      if (t.size(1) % gguf::traits(type).weightsPerBlock != 0) grid = type == TensorType::Q6_K ? TensorType::Q8_0 : TensorType::Q4_0;
      const std::vector<uint8_t> q = gguf::quantizeRows(grid, t.data_ptr<float>(), t.size(0), t.size(1));
      at::Tensor back = at::empty_like(t);
      gguf::dequantizeRows(grid, q.data(), t.size(0), t.size(1), back.data_ptr<float>());
      t = back;
    }
    tensors.emplace_back(e->name, t);
  }
  fs::create_directories(dir);
  writeSafetensors(dir + "/model.safetensors", tensors);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    if (fs::exists(fs::path(model) / f)) fs::copy_file(fs::path(model) / f, fs::path(dir) / f);
  return dir;
}

// llama.cpp's scores of the windows in `idsFile` for a GGUF file: {"mean_nll", "tokens"}; null (and a failure of
// the test) when it does not answer.
nlohmann::json llamaCppScore(const std::string& package, const std::string& file, const std::string& idsFile) {
  const std::string out = run("node " + std::string(PARETO_SOURCE_DIR) + "/tests/gguf/score.mjs '" + package + "' '" +
                              file + "' '" + idsFile + "' 2>&1");
  try {
    return nlohmann::json::parse(out.substr(out.rfind('{')));
  } catch (const std::exception&) {
    ADD_FAILURE() << file << ": llama.cpp did not score the file: " << out;
    return nullptr;
  }
}

TEST(GgufLlamaCpp, LlamaCppScoresTheExportAsParetoScoresTheSameWeights) {
  PARETO_REQUIRE_SHARED();
  const std::string package = nodeLlamaCppDir();
  ASSERT_TRUE(fs::exists(package + "/node_modules/node-llama-cpp/package.json"))
      << "node-llama-cpp is not installed in " << package << ": scripts/setup.sh --llama-cpp installs it (Node >= 20)";
  const std::string dir = test::scratchDir("gguf-llama-cpp");
  const std::string model = test::sharedPath("models/ref-small");
  const int64_t window = 256;
  const auto windows = windowsOf(model, test::sharedPath("data/heldout-prose.txt"), window, 8);
  ASSERT_EQ(windows.size(), 8u);
  const std::string idsFile = dir + "/windows.json";
  std::ofstream(idsFile) << nlohmann::json(windows).dump();

  struct Case { std::string type; double tolerance; };
  // llama.cpp rounds activations to 8 bits in its quantized dot products: 2% for the 4-bit types.
  for (const Case& c : {Case{"f16", 0.01}, Case{"q8_0", 0.01}, Case{"q4_0", 0.02}, Case{"q4_k", 0.02}}) {
    GgufExportOptions o;
    o.modelDir = model;
    o.outFile = dir + "/" + c.type + ".gguf";
    o.type = c.type;
    exportGguf(o);
    const nlohmann::json scored = llamaCppScore(package, o.outFile, idsFile);
    ASSERT_FALSE(scored.is_null()) << c.type;
    const TensorType type = gguf::parseTensorType(c.type);
    RuntimeOptions cpu;
    const std::string folded = gguf::traits(type).quantized ? foldToGrid(model, dir + "/pareto-" + c.type, type) : model;
    const LoadedModel m = loadModel(folded, cpu);
    std::vector<TokenId> ids;
    for (const auto& w : windows) ids.insert(ids.end(), w.begin(), w.end());
    PerplexityOptions p;
    p.window = window;
    const double pareto = computePerplexity(*m.model, ids, p).meanNll;
    const double llama = scored["mean_nll"].get<double>();
    std::printf("gguf %s: llama.cpp mean NLL %.5f, Pareto %.5f (%.3f%%)\n", c.type.c_str(), llama, pareto,
                100 * (llama - pareto) / pareto);
    EXPECT_EQ(scored["tokens"].get<int64_t>(), 8 * (window - 1)) << c.type;
    EXPECT_NEAR(llama, pareto, c.tolerance * pareto) << c.type;
  }
}

}  // namespace
}  // namespace pareto

namespace pareto {
namespace {

// Issue 22 point 4 for the GGUF grids as compression targets: ref-small compressed in Pareto to Q8_0, Q4_0 and
// Q4_K by RTN and by GPTQ, exported with `--type auto` (the stored blocks bit for bit), scored by llama.cpp within
// 1% (Q8_0) / 2% (Q4_*: llama.cpp rounds activations to 8 bits in its dot products) of Pareto's own mean NLL on the
// compressed folder.
TEST(GgufLlamaCpp, FoldersCompressedToGgufGridsScoreInLlamaCppAsInPareto) {
  PARETO_REQUIRE_SHARED();
  const std::string package = nodeLlamaCppDir();
  ASSERT_TRUE(fs::exists(package + "/node_modules/node-llama-cpp/package.json"))
      << "node-llama-cpp is not installed in " << package << ": scripts/setup.sh --llama-cpp installs it (Node >= 20)";
  const std::string dir = test::scratchDir("gguf-llama-cpp-compressed");
  const std::string model = test::sharedPath("models/ref-small");
  const int64_t window = 256;
  // 4 windows (1020 predictions): five files, and llama.cpp's scoring is most of the test's time on 2 cores.
  const auto windows = windowsOf(model, test::sharedPath("data/heldout-prose.txt"), window, 4);
  ASSERT_EQ(windows.size(), 4u);
  const std::string idsFile = dir + "/windows.json";
  std::ofstream(idsFile) << nlohmann::json(windows).dump();
  std::vector<TokenId> ids;
  for (const auto& w : windows) ids.insert(ids.end(), w.begin(), w.end());

  struct Case { std::string format, method; double tolerance; };
  for (const Case& c : {Case{"gguf-q8_0", "rtn", 0.01}, Case{"gguf-q4_0", "rtn", 0.02}, Case{"gguf-q4_0", "gptq", 0.02},
                        Case{"gguf-q4_k", "rtn", 0.02}, Case{"gguf-q4_k", "gptq", 0.02}}) {
    const std::string label = c.format + " " + c.method;
    SCOPED_TRACE(label);
    nlohmann::json recipe = {{"quantize", {{"method", c.method}, {"format", c.format}}}};
    if (c.method == "gptq")
      recipe["calibration"] = {{"source", "text"}, {"text", test::sharedPath("data/wikitext2-test.txt")},
                               {"tokens", 2048}, {"window", 256}};
    const std::string stem = dir + "/" + c.format + "-" + c.method;
    std::ofstream(stem + ".json") << recipe.dump();
    CompressOptions compress;
    compress.modelDir = model;
    compress.recipePath = stem + ".json";
    compress.outDir = stem;
    compress.overwrite = true;
    const CompressReport report = runCompress(compress);

    GgufExportOptions o;
    o.modelDir = stem;
    o.outFile = stem + ".gguf";
    o.overwrite = true;
    const GgufExportReport exported = exportGguf(o);
    const nlohmann::json scored = llamaCppScore(package, o.outFile, idsFile);
    ASSERT_FALSE(scored.is_null());
    const LoadedModel m = loadModel(stem, {});
    PerplexityOptions p;
    p.window = window;
    const double pareto = computePerplexity(*m.model, ids, p).meanNll;
    const double llama = scored["mean_nll"].get<double>();
    std::printf("%s (%.4f bits/weight in the block linears): llama.cpp mean NLL %.5f (ppl %.3f), Pareto %.5f "
                "(ppl %.3f), %+.3f%%\n", label.c_str(), exported.linearBitsPerWeight, llama, std::exp(llama), pareto,
                std::exp(pareto), 100 * (llama - pareto) / pareto);
    EXPECT_NEAR(exported.linearBitsPerWeight, report.linearBitsPerWeight, 1e-9);
    EXPECT_EQ(scored["tokens"].get<int64_t>(), 4 * (window - 1));
    EXPECT_NEAR(llama, pareto, c.tolerance * pareto);
  }
}

}  // namespace
}  // namespace pareto
