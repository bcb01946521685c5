// The decode runtime: packed linears (fusion, prefill slicing), compressed folders loaded packed, the decode
// session (eager vs CUDA graph, against the model's own generate), synthetic models of published
// configurations, and `bench decode`. CPU tests run the kernels' references (CI); CUDA tests skip without a GPU.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <type_traits>
#include <variant>

#include "SharedData.h"
#include "checkpoint/ModelPresets.h"
#include "compress/CompressJob.h"
#include "decode/DecodeBenchmark.h"
#include "decode/DecodeModel.h"
#include "decode/DecodeSession.h"
#include "model/Generation.h"
#include "model/LoadedModel.h"
#include "runtime/DecodeOps.h"
#include "runtime/PackedLinear.h"
#include "util/Error.h"

namespace pareto {
namespace {

using ::testing::HasSubstr;

double relativeError(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor o = out.to(at::kCPU, at::kDouble), r = ref.to(at::kCPU, at::kDouble);
  return (o - r).norm().item<double>() / std::max(r.norm().item<double>(), 1e-30);
}

bool cudaReady() { return at::hasCUDA() && gemvKernelsBuilt() && decodeKernelsBuilt(); }
#define PARETO_REQUIRE_CUDA() \
  if (!cudaReady()) GTEST_SKIP() << "needs a CUDA device and a build with the CUDA kernels"

// --- presets --------------------------------------------------------------------------------------------------

TEST(ModelPresets, PublishedShapesParseAndUnknownNamesListTheKnownOnes) {
  const ModelConfig c = modelPreset("llama-3.1-8b");
  EXPECT_EQ(c.hiddenSize, 4096);
  EXPECT_EQ(c.intermediateSize, 14336);
  EXPECT_EQ(c.numLayers, 32);
  EXPECT_EQ(c.numKvHeads, 8);
  EXPECT_EQ(c.vocabSize, 128256);
  EXPECT_TRUE(c.llama3Rope.has_value());
  EXPECT_TRUE(modelPreset("qwen3-14b").qkNorm);
  EXPECT_TRUE(modelPreset("qwen2.5-7b").attentionBias);
  EXPECT_TRUE(modelPreset("llama-3.2-1b").tieWordEmbeddings);
  for (const auto& name : knownModelPresets()) EXPECT_NO_THROW(modelPreset(name)) << name;
  try {
    modelPreset("llama-9");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("llama-9"));
    EXPECT_THAT(e.what(), HasSubstr("llama-3.1-8b"));
  }
}

// --- packed linears -------------------------------------------------------------------------------------------

class PackedLinearFormats : public ::testing::TestWithParam<std::string> {};

// One fused linear computes what its parts compute, for rows that are and are not multiples of 32 in the last
// part, and a 20-row input (prefill) runs through the 16-row kernel in slices.
TEST_P(PackedLinearFormats, FusedRowsAndPrefillSlicesEqualThePartsOneByOne) {
  const std::string format = GetParam();
  const at::Device cpu(at::kCPU);
  const int64_t cols = 256;
  const PackedLinear a = randomPackedLinear(format, 64, cols, at::kBFloat16, cpu, 1);
  const PackedLinear b = randomPackedLinear(format, 32, cols, at::kBFloat16, cpu, 2);
  const PackedLinear c = randomPackedLinear(format, 48, cols, at::kBFloat16, cpu, 3);
  const PackedLinear fused = concatRows({&a, &b, &c});
  EXPECT_EQ(fused.rows(), 144);
  EXPECT_EQ(fused.format(), format);
  EXPECT_EQ(fused.weightBytes() >= a.weightBytes() + b.weightBytes(), true);
  const at::Tensor x = at::randn({20, cols}).to(at::kBFloat16);
  const at::Tensor whole = fused.forward(x, "fused");
  const at::Tensor parts = at::cat({a.forward(x, "a"), b.forward(x, "b"), c.forward(x, "c")}, 1);
  EXPECT_LT(relativeError(whole, parts), 1e-6);
  // Row by row equals the sliced batch (the kernels' batch does not change a row's result).
  for (int64_t r : {0, 15, 16, 19})
    EXPECT_LT(relativeError(fused.forward(x.narrow(0, r, 1), "row"), whole.narrow(0, r, 1)), 1e-6) << r;
}

// What the decode step folds into a GEMV (GemvFusion), computed the other way: the op's own launch, then the plain
// product; the residual add as the step did it before (addRmsNorm's h = x + attn).
struct FoldCase {
  at::Tensor residual, gateUp, attn, normWeight;
  double eps = 1e-5;
};
FoldCase foldCase(int64_t batch, int64_t cols, at::ScalarType dtype, at::Device device, uint64_t seed) {
  at::manual_seed(int64_t(seed));
  FoldCase f;
  const auto o = at::TensorOptions().dtype(dtype).device(device);
  f.residual = (at::randn({batch, cols}) * 3).to(o);
  f.gateUp = at::randn({batch, 2 * cols}).to(o);
  f.attn = at::randn({batch, cols}).to(o);
  f.normWeight = (at::rand({cols}) + 0.5).to(o);
  return f;
}
GemvFusion rmsNormFold(const FoldCase& f) {
  GemvFusion g;
  g.input = GemvFusion::Input::RmsNorm;
  g.normWeight = f.normWeight;
  g.eps = f.eps;
  return g;
}
GemvFusion siluMulFold(bool accumulate) {
  GemvFusion g;
  g.input = GemvFusion::Input::SiluMul;
  g.accumulate = accumulate;
  return g;
}
GemvFusion accumulateFold() {
  GemvFusion g;
  g.accumulate = true;
  return g;
}
// A packed weight's GEMV with the fusion inside its kernel (its reference on the CPU) whatever the runtime's policy
// (PackedLinear::fusesInKernel); a dense one, or a prefill of more rows than a kernel takes, through forward().
void foldedForward(const PackedLinear& lin, const at::Tensor& x, const at::Tensor& y, const GemvFusion& fusion) {
  if (lin.isDense() || x.size(0) > 16) return lin.forward(x, y, "folded", fusion);
  std::visit(
      [&](const auto& w) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(w)>, at::Tensor>) gemv(w, x, y, "folded", fusion);
      },
      lin.weight());
}

// The three folds of a linear [rows, cols]: y of the norm folded in, y of SiLU·mul folded in, and the residual
// after o (plain x, accumulated) and after down (SiLU·mul, accumulated); `folded` runs them with the fusion in the
// GEMV (foldedForward), otherwise through the ops and the plain product.
std::vector<at::Tensor> foldResults(const PackedLinear& lin, const FoldCase& f, bool folded) {
  const int64_t batch = f.residual.size(0), rows = lin.rows();
  const auto o = f.residual.options();
  at::Tensor normedY = at::empty({batch, rows}, o), siluY = at::empty({batch, rows}, o);
  at::Tensor afterO = f.residual.narrow(1, 0, rows).clone(), afterDown = afterO.clone();
  if (folded) {
    foldedForward(lin, f.residual, normedY, rmsNormFold(f));
    foldedForward(lin, f.gateUp, siluY, siluMulFold(false));
    foldedForward(lin, f.attn, afterO, accumulateFold());
    foldedForward(lin, f.gateUp, afterDown, siluMulFold(true));
    return {normedY, siluY, afterO, afterDown};
  }
  at::Tensor normed = at::empty_like(f.residual), act = at::empty_like(f.attn);
  addRmsNorm(f.residual, at::Tensor(), f.normWeight, f.eps, normed);
  lin.forward(normed, normedY, "plain");
  siluMul(f.gateUp, act);
  lin.forward(act, siluY, "plain");
  const at::Tensor ones = at::ones({rows}, o), scratch = at::empty({batch, rows}, o);
  addRmsNorm(afterO, lin.forward(f.attn, "plain"), ones, f.eps, scratch);
  addRmsNorm(afterDown, siluY, ones, f.eps, scratch);
  return {normedY, siluY, afterO, afterDown};
}

// Folded into the GEMV (the CPU: the ops around the reference) the norm, SiLU·mul and the residual add give what
// the ops and the plain product give, for one row and for a 20-row prefill that runs in 16-row slices.
TEST_P(PackedLinearFormats, FoldedOpsEqualTheOpsAroundThePlainProduct) {
  const at::Device cpu(at::kCPU);
  const int64_t cols = 256;
  const PackedLinear lin = randomPackedLinear(GetParam(), 96, cols, at::kBFloat16, cpu, 4);
  for (int64_t batch : {1, 20}) {
    SCOPED_TRACE(batch);
    const FoldCase f = foldCase(batch, cols, at::kBFloat16, cpu, 5);
    const std::vector<at::Tensor> folded = foldResults(lin, f, true), plain = foldResults(lin, f, false);
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(at::equal(folded[i], plain[i])) << i;
  }
  // The fused input's shape is checked against the weight, naming the module.
  const FoldCase f = foldCase(2, cols, at::kBFloat16, cpu, 6);
  at::Tensor y = at::empty({2, 96}, f.attn.options());
  try {
    lin.forward(f.attn, y, "model.layers.0.mlp.down_proj", siluMulFold(false));  // [2, cols], not [2, 2·cols]
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("down_proj"));
  }
  GemvFusion noWeight = rmsNormFold(f);
  noWeight.normWeight = at::Tensor();
  EXPECT_THROW(lin.forward(f.residual, y, "q", noWeight), InputError);
  // forward() with a fusion gives the same values whether the runtime folds it into this format's kernel or not.
  const std::vector<at::Tensor> viaForward = [&] {
    const FoldCase g = foldCase(3, cols, at::kBFloat16, cpu, 9);
    const int64_t rows = lin.rows();
    at::Tensor normedY = at::empty({3, rows}, g.residual.options()), afterO = g.residual.narrow(1, 0, rows).clone();
    lin.forward(g.residual, normedY, "folded", rmsNormFold(g));
    lin.forward(g.attn, afterO, "folded", accumulateFold());
    return std::vector<at::Tensor>{normedY, afterO};
  }();
  const std::vector<at::Tensor> plain = foldResults(lin, foldCase(3, cols, at::kBFloat16, cpu, 9), false);
  EXPECT_TRUE(at::equal(viaForward[0], plain[0]));
  EXPECT_TRUE(at::equal(viaForward[1], plain[2]));
}

// Which formats the decode step folds its small ops into: the quantized ones and 2:4 + int4, not SpQR or bitmask
// N:M (measured slower folded), nor dense (cuBLAS).
TEST(PackedLinearFolds, OnlyTheFormatsMeasuredFasterFoldedFoldInTheirKernels) {
  const at::Device cpu(at::kCPU);
  for (const auto& [format, folds] : std::vector<std::pair<std::string, bool>>{{"dense", false},
                                                                               {"bitmask-2:4", false},
                                                                               {"bitmask-16:32", false},
                                                                               {"int4-g128", true},
                                                                               {"int8-channel", true},
                                                                               {"spqr-3bit", false},
                                                                               {"bitmask-2:4+int4-g64", true}})
    EXPECT_EQ(randomPackedLinear(format, 96, 256, at::kBFloat16, cpu, 4).fusesInKernel(), folds) << format;
}

// On the GPU the folds run inside the packed GEMV kernels that take them (every arithmetic path of the quantized
// and 2:4 + int4 kernels: FFMA and tensor cores, split and unsplit), or around the plain kernel for the formats
// whose kernels take none (bitmask N:M, SpQR), and give the two launches' values bit for bit.
TEST_P(PackedLinearFormats, FoldedOpsEqualTheTwoLaunchesBitForBitOnCuda) {
  PARETO_REQUIRE_CUDA();
  const at::Device gpu(at::kCUDA);
  for (at::ScalarType dtype : {at::kHalf, at::kBFloat16}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{4096, 4096}, {1024, 14336}, {96, 256}}) {
      const PackedLinear lin = randomPackedLinear(GetParam(), rows, cols, dtype, gpu, 7);
      for (int64_t batch : {1, 2, 3, 8, 11, 16}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " batch " + std::to_string(batch) +
                     (dtype == at::kHalf ? " fp16" : " bf16"));
        const FoldCase f = foldCase(batch, cols, dtype, gpu, 8);
        const std::vector<at::Tensor> folded = foldResults(lin, f, true), plain = foldResults(lin, f, false);
        for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(at::equal(folded[i], plain[i])) << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, PackedLinearFormats,
                         ::testing::Values("dense", "bitmask-2:4", "bitmask-16:32", "int4-g128", "int8-channel",
                                           "spqr-3bit", "bitmask-2:4+int4-g64"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

TEST(PackedLinear, RefusesToFuseMixedFormatsOrUnalignedRowsAndUnknownNames) {
  const at::Device cpu(at::kCPU);
  const PackedLinear q = randomPackedLinear("int4-g128", 64, 256, at::kBFloat16, cpu, 1);
  const PackedLinear d = randomPackedLinear("dense", 64, 256, at::kBFloat16, cpu, 2);
  EXPECT_THROW(concatRows({&q, &d}), InputError);
  const PackedLinear odd = randomPackedLinear("int4-g128", 40, 256, at::kBFloat16, cpu, 3);
  EXPECT_THROW(concatRows({&odd, &q}), InputError);
  EXPECT_NO_THROW(concatRows({&q, &odd}));   // only the last part may end mid row-group
  EXPECT_THROW(randomPackedLinear("int5-g7", 64, 256, at::kBFloat16, cpu, 1), InputError);
  // A fused model runs mixed formats one after the other instead.
  const FusedLinear mixed = FusedLinear::fuse({&q, &d});
  ASSERT_EQ(mixed.parts.size(), 2u);
  const at::Tensor x = at::randn({3, 256}).to(at::kBFloat16);
  at::Tensor out = at::empty({3, 128}, x.options());
  mixed.forward(x, out, "mixed");
  EXPECT_LT(relativeError(out, at::cat({q.forward(x, "q"), d.forward(x, "d")}, 1)), 1e-6);
}

// --- compressed folders run packed ----------------------------------------------------------------------------

class CompressedFolders : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!test::sharedAvailable()) return;
    dir_ = new std::string(test::scratchDir("decode-folders"));
    const std::string text = test::sharedPath("data/heldout-prose.txt");
    const std::vector<std::pair<std::string, std::string>> recipes = {
        {"bitmask-2:4", R"({"prune": {"method": "magnitude", "pattern": "2:4"}})"},
        {"int4-g64", R"({"quantize": {"method": "rtn", "bits": 4, "group_size": 64}})"},
        {"int8-channel", R"({"quantize": {"method": "rtn", "bits": 8, "granularity": "channel"}})"},
        {"bitmask-2:4+int4-g32", R"({"prune": {"method": "magnitude", "pattern": "2:4"},
                                     "quantize": {"method": "rtn", "bits": 4, "group_size": 32}})"},
        {"spqr-3bit", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 256, "window": 128},
                         "quantize": {"method": "spqr", "bits": 3, "outlier_ratio": 0.01}})"},
        {"bitmask-2:4+spqr3", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 256, "window": 128},
                                 "prune": {"method": "magnitude", "pattern": "2:4"},
                                 "quantize": {"method": "spqr", "bits": 3, "outlier_ratio": 0.01}})"}};
    for (const auto& [name, json] : recipes) {
      std::string safe = name;
      for (char& ch : safe)
        if (ch == ':' || ch == '+') ch = '_';
      const std::string recipe = *dir_ + "/" + safe + ".json";
      std::ofstream(recipe) << json;
      CompressOptions o;
      o.modelDir = test::sharedPath("models/ref-tiny");
      o.recipePath = recipe;
      o.outDir = *dir_ + "/" + safe;
      o.overwrite = true;
      o.runtime = makeRuntimeOptions("cpu", "float32");
      runCompress(o);
      folders_.emplace_back(name, o.outDir);
    }
  }
  void SetUp() override { PARETO_REQUIRE_SHARED(); }
  static RuntimeOptions runtime(const std::string& device, bool packed) {
    RuntimeOptions rt = makeRuntimeOptions(device, "bfloat16");
    rt.packedWeights = packed;
    return rt;
  }
  static inline std::string* dir_ = nullptr;
  static inline std::vector<std::pair<std::string, std::string>> folders_;
};

// Each format's modules stay packed (the kernel form of their format), and the model's logits equal those of
// the same folder unpacked to dense; bitmask + SpQR has no kernel and says so.
TEST_F(CompressedFolders, LoadPackedAndMatchTheirDenseUnpackOnTheCpu) {
  for (const auto& [format, dir] : folders_) {
    SCOPED_TRACE(format);
    LoadedModel packed = loadModel(dir, runtime("cpu", true));
    LoadedModel dense = loadModel(dir, runtime("cpu", false));
    int packedLinears = 0;
    for (int64_t l = 0; l < packed.model->numLayers(); ++l)
      for (const auto& [g, lin] : packed.model->layerLinears(l))
        if (lin->packed() != nullptr) {
          ++packedLinears;
          EXPECT_EQ(lin->packed()->format(), format) << lin->name();
        }
    if (format == "bitmask-2:4+spqr3") {
      EXPECT_EQ(packedLinears, 0);
      ASSERT_FALSE(packed.model->runtimeNotes().empty());
      EXPECT_THAT(packed.model->runtimeNotes().front(), HasSubstr("runs dense"));
    } else {
      EXPECT_EQ(packedLinears, 7 * packed.model->numLayers());
    }
    const at::Tensor ids = at::tensor(packed.promptIds("The river runs to the sea and"), at::kLong).unsqueeze(0);
    const at::Tensor a = packed.model->forward(ids);
    const at::Tensor b = dense.model->forward(ids);
    EXPECT_LT(relativeError(a, b), 2e-2);
  }
}

// The decode runtime (fused q/k/v and gate/up, fused decode ops, references of the kernels) continues a prompt
// like the model's own generate(): at every step of generate()'s continuation its logits are the forward
// pass's (bf16 rounding differs between fused and unfused ops, so greedy tokens may part after a near-tie; the
// first ones must agree).
TEST_F(CompressedFolders, DecodeRuntimeContinuesLikeGenerateOnTheCpu) {
  for (const auto& [format, dir] : folders_) {
    if (format != "bitmask-2:4" && format != "int4-g64") continue;
    SCOPED_TRACE(format);
    LoadedModel m = loadModel(dir, runtime("cpu", true));
    const std::vector<TokenId> prompt = m.promptIds("Once upon a time, in a small village,");
    GenerationOptions g;
    g.maxNewTokens = 8;
    const std::vector<TokenId> expected = generate(*m.model, prompt, g);
    const DecodeModel d = DecodeModel::fromModel(*m.model);
    EXPECT_EQ(d.formatSummary(), format);
    const auto got = decodeGreedy(d, {prompt}, 8, {}, /*useGraph=*/false);
    ASSERT_EQ(got.at(0).size(), expected.size());
    EXPECT_TRUE(std::equal(expected.begin(), expected.begin() + 4, got.at(0).begin()));

    std::vector<TokenId> sequence = prompt;
    sequence.insert(sequence.end(), expected.begin(), expected.end() - 1);
    const at::Tensor ref = m.model->forward(at::tensor(sequence, at::kLong).unsqueeze(0)).squeeze(0);
    DecodeSession s(d, 1, int64_t(sequence.size()));
    for (size_t i = 0; i < sequence.size(); ++i) {
      s.feed({sequence[i]}, {int64_t(i)}, {0});
      s.step();
      if (i + 1 >= prompt.size()) EXPECT_LT(relativeError(s.logits(), ref[int64_t(i)].unsqueeze(0)), 2e-2) << i;
    }
  }
}

// Batched prompts of different lengths (left padding) give each prompt its own continuation.
TEST_F(CompressedFolders, BatchedPromptsWithPaddingDecodeLikeEachAlone) {
  LoadedModel m = loadModel(folders_.at(0).second, runtime("cpu", true));
  const DecodeModel d = DecodeModel::fromModel(*m.model);
  const std::vector<std::vector<TokenId>> prompts = {m.promptIds("A short one"),
                                                     m.promptIds("A much longer prompt, with several more words in it")};
  const auto together = decodeGreedy(d, prompts, 6, {}, false);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i], decodeGreedy(d, {prompts[i]}, 6, {}, false)[0]) << i;
}

// --- synthetic models and bench decode --------------------------------------------------------------------------

TEST(SyntheticModel, EveryFormatBuildsAndDecodesOnTheCpu) {
  const ModelConfig c = modelPreset("tiny-llama");
  RuntimeOptions rt = makeRuntimeOptions("cpu", "bfloat16");
  for (const std::string format : {"dense", "bitmask-2:4", "int4-g128", "int8-channel", "spqr-3bit", "bitmask-2:4+int4-g128"}) {
    SCOPED_TRACE(format);
    DecodeModel::SyntheticOptions s;
    s.format = format;
    const DecodeModel d = DecodeModel::synthetic(c, s, rt);
    EXPECT_EQ(d.numLayers(), c.numLayers);
    EXPECT_EQ(d.formatSummary(), format);
    DecodeSession session(d, 2, 8);
    session.fillRandomContext(4, 1);
    session.step();
    session.step();
    EXPECT_EQ(session.length(), 6);
    EXPECT_TRUE(at::isfinite(session.logits()).all().item<bool>());
    const at::Tensor next = session.generated().narrow(1, 6, 1);
    EXPECT_TRUE((next >= 0).logical_and(next < c.vocabSize).all().item<bool>());
  }
  DecodeModel::SyntheticOptions bad;
  bad.format = "int3-g7";
  EXPECT_THROW(DecodeModel::synthetic(c, bad, rt), InputError);
  EXPECT_THROW(DecodeModel::synthetic(c, {}, makeRuntimeOptions("cpu", "float32")), InputError);
}

// The decode step with its small ops folded into the packed GEMVs (and attention and the greedy end in one launch
// each) against the step of separate ops (PARETO_DECODE_FUSED=0, and each fusion alone): the same logits and
// tokens, bit for bit, in every format, on `device`, eager or through the CUDA graph.
void expectFoldedStepEqualsUnfolded(const ModelConfig& c, const std::string& device, int64_t layers, bool graph) {
  RuntimeOptions rt = makeRuntimeOptions(device, "bfloat16");
  for (const std::string format : {"dense", "bitmask-2:4", "int4-g128", "int8-channel", "spqr-3bit", "bitmask-2:4+int4-g128"}) {
    SCOPED_TRACE(format);
    DecodeModel::SyntheticOptions s;
    s.format = format;
    s.layers = layers;
    if (format == "int4-g128") s.headFormat = "int8-channel";  // a packed head: the final norm folds into it
    const DecodeModel d = DecodeModel::synthetic(c, s, rt);
    // All fused, none, and each fusion apart (PARETO_DECODE_FUSED keeps those it names); batch 1, where the
    // folds run, and batch 3, where they do not.
    for (const int64_t batch : {1, 3}) {
      std::vector<at::Tensor> logits, tokens;
      for (const char* fused : {"1", "0", "attention,next-token", "folds"}) {
        ::setenv("PARETO_DECODE_FUSED", fused, 1);
        DecodeSession session(d, batch, 12);
        ::unsetenv("PARETO_DECODE_FUSED");
        session.fillRandomContext(4, 1);
        if (graph) session.capture();
        for (int i = 0; i < 5; ++i) session.step();
        logits.push_back(session.logits().cpu());
        tokens.push_back(session.generated().cpu());
      }
      for (size_t k = 1; k < logits.size(); ++k) {
        EXPECT_TRUE(at::equal(logits[0], logits[k])) << "batch " << batch << ", case " << k;
        EXPECT_TRUE(at::equal(tokens[0], tokens[k])) << "batch " << batch << ", case " << k;
      }
    }
  }
}

TEST(SyntheticModel, FoldedStepEqualsTheStepOfSeparateOpsOnTheCpu) {
  expectFoldedStepEqualsUnfolded(modelPreset("tiny-llama"), "cpu", 0, false);
}

// --- sampling on the device ------------------------------------------------------------------------------------

// The probabilities each row's sampled token should follow, [batch, vocab] (0 outside the candidates), written
// apart from DecodeSession::sampleNext, in float64 from the host sampler's rule (model/Generation.cpp): rank the
// tokens by score, keep the top k (tokens tied with the k-th stay, as on the device), then the shortest prefix
// whose mass reaches top-p, and renormalise. `tiedWithLast` marks the tokens whose score equals the last kept
// one's: the device may order such ties differently at the top-p cut, so they are allowed, not expected.
at::Tensor candidateProbabilities(const at::Tensor& logits, const SamplingOptions& s, at::Tensor* tiedWithLast) {
  const at::Tensor l = logits.to(at::kCPU, at::kDouble).contiguous();
  const int64_t rows = l.size(0), vocab = l.size(1);
  at::Tensor out = at::zeros({rows, vocab}, at::kDouble), tied = at::zeros({rows, vocab}, at::kBool);
  for (int64_t b = 0; b < rows; ++b) {
    const double* score = l.data_ptr<double>() + b * vocab;
    std::vector<int64_t> order(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) order[size_t(i)] = i;
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return score[x] > score[y]; });
    size_t keep = size_t(vocab);
    if (s.topK > 0 && s.topK < vocab) {
      keep = size_t(s.topK);
      while (keep < size_t(vocab) && score[order[keep]] == score[order[size_t(s.topK) - 1]]) ++keep;
    }
    std::vector<double> p(keep);
    double total = 0;
    for (size_t i = 0; i < keep; ++i) total += p[i] = std::exp((score[order[i]] - score[order[0]]) / s.temperature);
    if (s.topP < 1.0) {
      double mass = 0;
      size_t n = 0;
      while (n < keep) {
        mass += p[n++] / total;
        if (mass >= s.topP) break;
      }
      keep = n;
    }
    total = 0;
    for (size_t i = 0; i < keep; ++i) total += p[i];
    for (size_t i = 0; i < keep; ++i) out[b][order[i]] = p[i] / total;
    for (int64_t i = 0; i < vocab; ++i) tied[b][i] = score[i] == score[order[keep - 1]];
  }
  if (tiedWithLast != nullptr) *tiedWithLast = tied;
  return out;
}

constexpr int64_t kSamplingBatch = 16;

// One step from the same state (a random 4-slot context, seed 11) replayed n times with sampling `s` (in a CUDA
// graph when `graph`): the frequency of each chosen token per row, [batch, vocab]. Each replay must see the same
// logits (`logits`, when defined): only the noise changes.
at::Tensor sampleFrequencies(const DecodeModel& d, const SamplingOptions& s, int64_t n, bool graph,
                             const at::Tensor& logits) {
  DecodeSession session(d, kSamplingBatch, 8);
  session.fillRandomContext(4, 11);
  session.setSampling(s);
  if (graph) session.capture();
  const DecodeSession::Snapshot from = session.snapshot();
  at::Tensor counts = at::zeros({kSamplingBatch, d.config().vocabSize}, at::kDouble);
  for (int64_t i = 0; i < n; ++i) {
    session.restore(from);
    session.step();
    if (logits.defined()) EXPECT_TRUE(at::equal(session.logits().cpu(), logits)) << "the state was not restored";
    const at::Tensor tok = session.generated().narrow(1, 5, 1).cpu();
    counts.scatter_add_(1, tok, at::ones({kSamplingBatch, 1}, at::kDouble));
  }
  return counts / double(n);
}

// Never a token outside the candidates; over the rows a mean total variation distance of a few percent (400
// draws a row over ≤ ~8 candidates: ~0.04-0.05 expected from chance alone); and not always the top token.
void expectDrawsFollow(const at::Tensor& freq, const at::Tensor& logits, const SamplingOptions& s) {
  at::Tensor tied;
  const at::Tensor expected = candidateProbabilities(logits, s, &tied);
  EXPECT_EQ(freq.masked_select(expected.eq(0).logical_and(tied.logical_not())).sum().item<double>(), 0.0);
  EXPECT_LT((freq - expected).abs().sum(-1).mean().item<double>() / 2, 0.08);
  EXPECT_GT(freq.gt(0).sum().item<int64_t>(), 2 * kSamplingBatch);
}

SamplingOptions samplingOptions(double temperature, int64_t topK, double topP) {
  SamplingOptions s;
  s.greedy = false;
  s.temperature = temperature;
  s.topK = topK;
  s.topP = topP;
  return s;
}

// Greedy logits and tokens of the state sampleFrequencies() starts from.
std::pair<at::Tensor, at::Tensor> greedyStep(const DecodeModel& d) {
  DecodeSession session(d, kSamplingBatch, 8);
  session.fillRandomContext(4, 11);
  session.step();
  return {session.logits().cpu().clone(), session.generated().narrow(1, 5, 1).squeeze(1).cpu().clone()};
}

TEST(DecodeSampling, DrawsFromTheTopKAndTopPDistributionAndIsSeeded) {
  const ModelConfig c = modelPreset("tiny-llama");
  const DecodeModel d = DecodeModel::synthetic(c, {}, makeRuntimeOptions("cpu", "bfloat16"));
  const auto [logits, greedy] = greedyStep(d);
  EXPECT_TRUE(at::equal(greedy, logits.argmax(-1)));

  // The synthetic logits are flat (std ~0.3 over 512 tokens, top gaps ~0.05): top-k 5 at temperature 1.5 gives
  // near-uniform candidates, top-p needs a low temperature to keep the nucleus small enough for 400 draws.
  const SamplingOptions topK = samplingOptions(1.5, 5, 1.0), topP = samplingOptions(0.1, 0, 0.6),
                        both = samplingOptions(0.3, 8, 0.5);
  for (const SamplingOptions& s : {topK, topP, both}) {
    SCOPED_TRACE("top-k " + std::to_string(s.topK) + ", top-p " + std::to_string(s.topP));
    at::manual_seed(5);
    expectDrawsFollow(sampleFrequencies(d, s, 400, false, logits), logits, s);
  }

  // top-k 1 is greedy; the same seed gives the same tokens; bad options are refused.
  at::manual_seed(1);
  EXPECT_TRUE(at::equal(sampleFrequencies(d, samplingOptions(1.5, 1, 1.0), 3, false, logits).argmax(-1), greedy));
  at::manual_seed(9);
  const at::Tensor a = sampleFrequencies(d, topP, 20, false, logits);
  at::manual_seed(9);
  EXPECT_TRUE(at::equal(a, sampleFrequencies(d, topP, 20, false, logits)));
  DecodeSession session(d, 1, 4);
  EXPECT_THROW(session.setSampling(samplingOptions(1.0, 0, 1.5)), InputError);
  EXPECT_THROW(session.setSampling(samplingOptions(0.0, 0, 1.0)), InputError);

  // Through decodeGenerate: seeded by the options, so two calls agree; every token is in the vocabulary.
  const auto x = decodeGenerate(d, {{1, 2, 3}, {4}}, 6, {}, false, topP);
  EXPECT_EQ(x, decodeGenerate(d, {{1, 2, 3}, {4}}, 6, {}, false, topP));
  for (const auto& row : x) {
    EXPECT_EQ(row.size(), 6u);
    for (TokenId t : row) EXPECT_TRUE(t >= 0 && t < c.vocabSize);
  }
}

TEST(DecodeBenchmark, ReportsEveryKeyForEachFormatOnTheCpu) {
  DecodeBenchOptions o;
  o.synthetic = "tiny-llama";
  o.formats = {"dense", "int4-g128", "bitmask-2:4"};
  o.contexts = {4};
  o.newTokens = 3;
  o.batches = {1, 2};
  o.device = "cpu";
  o.dtype = "bfloat16";
  o.runs = 1;
  const DecodeBenchReport r = runDecodeBenchmark(o, {}, CancelToken());
  ASSERT_EQ(r.results.size(), 6u);
  const nlohmann::json j = toJson(r);
  for (const auto& row : j.at("results")) {
    ASSERT_TRUE(row.at("available").get<bool>()) << row.dump();
    for (const char* key : {"tokens_per_second", "ms_per_token", "bytes_per_token", "gb_per_s",
                            "fraction_of_copy_bandwidth", "bits_per_weight"})
      EXPECT_TRUE(row.contains(key)) << key;
    EXPECT_GT(row.at("tokens_per_second").get<double>(), 0);
  }
  // Packed weights read fewer bytes than dense; a batch of 2 reads the weights once for both rows.
  EXPECT_LT(r.results[2].bytesPerStep, r.results[0].bytesPerStep);
  EXPECT_LT(r.results[1].bytesPerToken, r.results[0].bytesPerToken);
  EXPECT_GT(r.results[2].speedupOverDense, 0);
  EXPECT_THAT(toText(r), HasSubstr("int4-g128"));
  EXPECT_EQ(j.at("sampling"), "greedy");

  // Sampled steps (top-k and top-p on the device) time the same loop and say so.
  DecodeBenchOptions sampled = o;
  sampled.formats = {"dense"};
  sampled.batches = {2};
  sampled.temperature = 0.8;
  sampled.topK = 40;
  sampled.topP = 0.9;
  const DecodeBenchReport s = runDecodeBenchmark(sampled, {}, CancelToken());
  ASSERT_TRUE(s.results.at(0).available) << s.results[0].note;
  EXPECT_GT(s.results[0].tokensPerSecond, 0);
  EXPECT_EQ(s.sampling, "temperature 0.8, top-k 40, top-p 0.9");
  EXPECT_THAT(toText(s), HasSubstr("sampling: temperature 0.8"));
  sampled.temperature = 0;   // top-k without a temperature: the token would be the argmax anyway
  EXPECT_THROW(runDecodeBenchmark(sampled, {}, CancelToken()), InputError);
  sampled.temperature = 1;
  sampled.topP = 0;
  EXPECT_THROW(runDecodeBenchmark(sampled, {}, CancelToken()), InputError);

  // The breakdown times each part of the step alone; together they are about the whole step.
  DecodeBenchOptions parts = o;
  parts.formats = {"int4-g128"};
  parts.batches = {1};
  parts.breakdown = true;
  const DecodeBenchReport split = runDecodeBenchmark(parts, {}, CancelToken());
  ASSERT_EQ(split.results.at(0).partMs.size(), 4u);
  double sum = 0;
  for (const auto& [name, ms] : split.results[0].partMs) {
    EXPECT_GT(ms, 0) << name;
    sum += ms;
  }
  EXPECT_GT(sum, 0.3 * split.results[0].msPerToken);
  EXPECT_TRUE(toJson(split)["results"][0].contains("ms_per_step_of_each_part_alone"));

  DecodeBenchOptions bad = o;
  bad.batches = {17};
  EXPECT_THROW(runDecodeBenchmark(bad, {}, CancelToken()), InputError);
  bad = o;
  bad.synthetic.clear();
  EXPECT_THROW(runDecodeBenchmark(bad, {}, CancelToken()), InputError);
  CancelToken cancel;
  cancel.cancel();
  EXPECT_THROW(runDecodeBenchmark(o, {}, cancel), Cancelled);
}

// --- CUDA --------------------------------------------------------------------------------------------------------

// ref-small through the decode runtime on the GPU: the CUDA-graph loop gives exactly the eager loop's tokens, and
// both continue like the model's own generate() (LibTorch ops, no graph).
TEST(DecodeCuda, GraphGreedyEqualsEagerAndGenerateOnRefSmall) {
  PARETO_REQUIRE_SHARED();
  PARETO_REQUIRE_CUDA();
  RuntimeOptions rt = makeRuntimeOptions("cuda", "float16");
  LoadedModel m = loadModel(test::sharedPath("models/ref-small"), rt);
  const DecodeModel d = DecodeModel::fromModel(*m.model);
  const std::vector<std::vector<TokenId>> prompts = {m.promptIds("The history of the city begins"),
                                                     m.promptIds("def fibonacci(n):")};
  for (const auto& prompt : prompts) {
    const auto graph = decodeGreedy(d, {prompt}, 48, {}, true);
    const auto eager = decodeGreedy(d, {prompt}, 48, {}, false);
    EXPECT_EQ(graph, eager);
    GenerationOptions g;
    g.maxNewTokens = 48;
    const std::vector<TokenId> reference = generate(*m.model, prompt, g);
    size_t same = 0;
    while (same < reference.size() && same < graph[0].size() && graph[0][same] == reference[same]) ++same;
    // fp16 rounding differs between fused and unfused ops; greedy paths may part after a near-tie, not early.
    EXPECT_GE(same, 16u) << "graph decode parts from generate() at token " << same;
  }
  // Batched: the graph runs the same as each prompt alone.
  const auto batched = decodeGreedy(d, prompts, 24, {}, true);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(batched[i], decodeGreedy(d, {prompts[i]}, 24, {}, true)[0]);
}

// Sampling inside the captured step: every replay draws fresh noise from the graph's generator state, and the
// draws follow the same candidates' softmax as on the CPU.
TEST(DecodeCuda, GraphSamplingDrawsFromTheCandidatesWithFreshNoiseEachReplay) {
  PARETO_REQUIRE_CUDA();
  const DecodeModel d = DecodeModel::synthetic(modelPreset("tiny-llama"), {}, makeRuntimeOptions("cuda", "float16"));
  const auto [logits, greedy] = greedyStep(d);
  for (const SamplingOptions& s : {samplingOptions(1.5, 5, 1.0), samplingOptions(0.1, 0, 0.6), samplingOptions(0.3, 8, 0.5)}) {
    SCOPED_TRACE("top-k " + std::to_string(s.topK) + ", top-p " + std::to_string(s.topP));
    at::manual_seed(5);
    expectDrawsFollow(sampleFrequencies(d, s, 400, true, logits), logits, s);
  }
  at::manual_seed(1);
  EXPECT_TRUE(at::equal(sampleFrequencies(d, samplingOptions(1.5, 1, 1.0), 3, true, logits).argmax(-1), greedy));
}

// Every compressed format: logits of the CUDA kernels (graph) match the CPU references after the same prompt.
TEST_F(CompressedFolders, CudaKernelsMatchTheCpuReferencePath) {
  PARETO_REQUIRE_CUDA();
  for (const auto& [format, dir] : folders_) {
    SCOPED_TRACE(format);
    LoadedModel gpu = loadModel(dir, runtime("cuda", true));
    LoadedModel cpu = loadModel(dir, runtime("cpu", true));
    const DecodeModel dg = DecodeModel::fromModel(*gpu.model);
    const DecodeModel dc = DecodeModel::fromModel(*cpu.model);
    const std::vector<TokenId> prompt = gpu.promptIds("The committee met on Tuesday to discuss");
    DecodeSession sg(dg, 1, int64_t(prompt.size()));
    DecodeSession sc(dc, 1, int64_t(prompt.size()));
    sg.capture();
    for (size_t i = 0; i < prompt.size(); ++i) {
      sg.feed({prompt[i]}, {int64_t(i)}, {0});
      sg.step();
      sc.feed({prompt[i]}, {int64_t(i)}, {0});
      sc.step();
    }
    EXPECT_LT(relativeError(sg.logits(), sc.logits()), 3e-2);
  }
}

TEST(DecodeCuda, FoldedStepEqualsTheStepOfSeparateOpsBitForBit) {
  PARETO_REQUIRE_CUDA();
  expectFoldedStepEqualsUnfolded(modelPreset("llama-3.1-8b"), "cuda", 2, true);
}

TEST(DecodeCuda, SyntheticLlama8bShapesDecodeInEveryFormat) {
  PARETO_REQUIRE_CUDA();
  DecodeBenchOptions o;
  o.synthetic = "llama-3.1-8b";
  o.layers = 2;
  o.formats = {"dense", "bitmask-2:4", "int4-g128", "spqr-3bit", "bitmask-2:4+int4-g128"};
  o.contexts = {64};
  o.newTokens = 8;
  o.batches = {1, 4};
  o.runs = 2;
  const DecodeBenchReport r = runDecodeBenchmark(o, {}, CancelToken());
  for (const auto& row : r.results) {
    EXPECT_TRUE(row.available) << row.format << ": " << row.note;
    EXPECT_GT(row.tokensPerSecond, 0) << row.format;
  }
}

}  // namespace
}  // namespace pareto
