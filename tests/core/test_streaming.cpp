// Models larger than the device or the host: a streamed model (each block read from the mapped checkpoint when
// used) computes what the whole model computes; the calibration activations give the same result wherever they
// live (device, host, scratch file); memory budgets are planned up front, refused with the size one block needs,
// and kept: a synthetic Llama-3.2-1B (4.9 GB in float32) compresses on the CPU under a 3 GiB host budget.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "FolderContents.h"
#include "SharedData.h"
#include "calib/ActivationStore.h"
#include "checkpoint/ModelConfig.h"
#include "checkpoint/ModelPresets.h"
#include "checkpoint/Safetensors.h"
#include "compress/CompressMemory.h"
#include "eval/EvalMemory.h"
#include "eval/Perplexity.h"
#include "model/LoadedModel.h"
#include "model/MemoryBudget.h"
#include "model/TensorIO.h"
#include "util/Error.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

nlohmann::json manifestOf(const std::string& dir) { return nlohmann::json::parse(readFile(dir + "/pareto.json")); }

TEST(ActivationStore, EveryPlacementGivesBackExactlyWhatWasPut) {
  const std::vector<std::vector<int64_t>> shapes = {{3, 17, 24}, {2, 5, 24}};
  const std::string dir = test::scratchDir("activation-store");
  for (ActivationPlacement where :
       {ActivationPlacement::Device, ActivationPlacement::Host, ActivationPlacement::Scratch}) {
    ActivationStore store(where, shapes, at::kBFloat16, at::kCPU, dir);
    EXPECT_EQ(store.bytes(), (3 * 17 * 24 + 2 * 5 * 24) * 2u);
    std::vector<at::Tensor> put;
    for (size_t i = 0; i < shapes.size(); ++i) {
      put.push_back(at::randn(shapes[i]).to(at::kBFloat16));
      store.put(i, put.back());
    }
    for (size_t i = 0; i < shapes.size(); ++i) EXPECT_TRUE(at::equal(store.get(i), put[i])) << activationPlacementName(where);
    // Overwriting a slot (the next block's inputs) replaces it.
    const at::Tensor again = at::randn(shapes[0]).to(at::kBFloat16);
    store.put(0, again);
    EXPECT_TRUE(at::equal(store.get(0), again));
    EXPECT_THROW(store.put(1, again), c10::Error);   // another shape
  }
  // The scratch file is unlinked at once: nothing is left in the folder.
  EXPECT_TRUE(fs::is_empty(dir));
  EXPECT_THROW(ActivationStore(ActivationPlacement::Scratch, shapes, at::kFloat, at::kCPU, dir + "/missing"), InputError);
}

TEST(StreamedModel, ComputesWhatTheWholeModelComputes) {
  PARETO_REQUIRE_SHARED();
  const std::string dir = test::sharedPath("models/ref-tiny");
  RuntimeOptions opts;
  LoadedModel whole = loadModel(dir, opts);
  LoadedModel streamed = loadModel(dir, opts, WeightResidency::Streamed);
  ASSERT_TRUE(streamed.model->streamed());
  EXPECT_FALSE(whole.model->streamed());
  const at::Tensor ids = at::randint(0, whole.config.vocabSize, {2, 9}, at::kLong);
  const at::Tensor expected = whole.model->forward(ids);

  LlamaModel& m = *streamed.model;
  EXPECT_FALSE(m.layerLoaded(0));
  LlamaModel::Context ctx = m.prepare(2, 9, nullptr, nullptr);
  at::Tensor x = m.embed(ids);
  EXPECT_THROW(m.block(0, x, ctx), Error);   // not loaded yet
  for (int64_t layer = 0; layer < m.numLayers(); ++layer) {
    m.loadLayer(layer);
    x = m.block(layer, x, ctx);
    m.releaseLayer(layer);
    EXPECT_FALSE(m.layerLoaded(layer));
  }
  EXPECT_THROW(m.head(x), Error);
  m.loadHead();
  EXPECT_TRUE(at::equal(m.head(x), expected));
}

TEST(StreamedModel, ChecksEveryTensorBeforeReadingAny) {
  PARETO_REQUIRE_SHARED();
  // A checkpoint whose last layer lacks a tensor fails when the streamed model is made, not hours later.
  const std::string dir = test::scratchDir("streamed-missing");
  for (const auto& f : fs::directory_iterator(test::sharedPath("models/ref-tiny")))
    if (f.path().filename() != "model.safetensors") fs::copy(f.path(), dir);
  const SafetensorsFile file(test::sharedPath("models/ref-tiny/model.safetensors"));
  const ModelConfig config = ModelConfig::fromFile(dir + "/config.json");
  const std::string dropped = "model.layers." + std::to_string(config.numLayers - 1) + ".mlp.down_proj.weight";
  NamedTensors kept;
  for (const TensorEntry& e : file.tensors())
    if (e.name != dropped) kept.emplace_back(e.name, readTensor(e));
  writeSafetensors(dir + "/model.safetensors", kept);
  try {
    loadModel(dir, RuntimeOptions{}, WeightResidency::Streamed);
    FAIL() << "a checkpoint without " << dropped << " was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(dropped));
  }
}

TEST(StreamedPerplexity, ScoresWhatTheWholeModelsScoreWhereverTheHiddenStatesLive) {
  PARETO_REQUIRE_SHARED();
  const std::string dir = test::sharedPath("models/ref-tiny");
  LoadedModel whole = loadModel(dir, RuntimeOptions{});
  const std::vector<TokenId> ids =
      encodeTextFile(*whole.tokenizer, test::sharedPath("data/heldout-prose.txt"), /*addSpecialTokens=*/false);
  PerplexityOptions o;
  o.window = 64;
  o.maxWindows = 6;
  o.batch = 4;   // two batches, the second partial
  o.dense = whole.model.get();
  const PerplexityResult expected = computePerplexity(*whole.model, ids, o);
  LoadedModel streamed = loadModel(dir, RuntimeOptions{}, WeightResidency::Streamed);
  for (ActivationPlacement where : {ActivationPlacement::Device, ActivationPlacement::Scratch}) {
    o.activations = where;
    o.dense = streamed.model.get();   // both models streamed: KL against itself is 0, as for the whole pair
    const PerplexityResult r = computePerplexity(*streamed.model, ids, o);
    EXPECT_EQ(r.ppl, expected.ppl) << activationPlacementName(where);
    EXPECT_EQ(*r.densePpl, *expected.densePpl);
    EXPECT_EQ(r.klToDense->mean, expected.klToDense->mean);
  }
}

TEST(EvalMemory, StreamsOnlyWhatDoesNotFitWholeAndRefusesLessThanOneBlock) {
  ModelConfig c = ModelConfig::fromJson(modelPresetConfig("llama-3.1-8b"), "llama-3.1-8b");
  RuntimeOptions cpu;
  cpu.dtype = at::kBFloat16;
  EXPECT_FALSE(planEvalMemory(c, cpu, {}, 1, 640, 512, 4).streamed);   // no budget
  const EvalMemoryPlan free = planEvalMemory(c, cpu, {0, 64ull << 30}, 1, 640, 512, 4);
  EXPECT_FALSE(free.streamed);
  EXPECT_GT(free.wholeBytes, free.streamedBytes);
  const EvalMemoryPlan tight = planEvalMemory(c, cpu, {0, free.streamedBytes + (1ull << 20)}, 1, 640, 512, 4);
  EXPECT_TRUE(tight.streamed);
  EXPECT_EQ(tight.placement, ActivationPlacement::Scratch);   // 2.7 GB of hidden states do not fit beside it
  EXPECT_EQ(planEvalMemory(c, cpu, {0, free.streamedBytes + (4ull << 30)}, 1, 640, 512, 4).placement,
            ActivationPlacement::Device);
  try {
    planEvalMemory(c, cpu, {0, 1ull << 30}, 1, 640, 512, 4);
    FAIL() << "a budget below one block was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--max-host-memory 1 GiB is less than"));
  }
}

// On CUDA the block's linears are solved together as far as the device budget holds their workspaces: all seven
// without a budget, one when the budget only holds the block, and in between as the budget grows.
TEST(CompressMemory, SolversAtOnceAreWhatTheDeviceBudgetHolds) {
  ModelConfig c = ModelConfig::fromJson(modelPresetConfig("llama-3.1-8b"), "llama-3.1-8b");
  RuntimeOptions cuda;
  cuda.device = c10::Device(c10::kCUDA);
  const std::vector<std::vector<int64_t>> shapes = {{8, 512, c.hiddenSize}, {8, 512, c.hiddenSize}};
  const CompressMemoryPlan free = planCompressMemory(c, cuda, {}, shapes);
  EXPECT_EQ(free.solverThreads, 7);
  EXPECT_THAT(free.summary(), HasSubstr("7 solvers at once"));
  const uint64_t least = free.deviceNeed + (uint64_t(free.activations) * 2);   // the block and its activations
  const CompressMemoryPlan tight = planCompressMemory(c, cuda, {least, 0}, shapes);
  EXPECT_EQ(tight.placement, ActivationPlacement::Device);
  EXPECT_EQ(tight.solverThreads, 1);
  const CompressMemoryPlan some = planCompressMemory(c, cuda, {least + (3ull << 30), 0}, shapes);
  EXPECT_GT(some.solverThreads, 1);
  EXPECT_LT(some.solverThreads, 7);
  RuntimeOptions cpu;
  EXPECT_EQ(planCompressMemory(c, cpu, {}, shapes).solverThreads, 1);
}

// scripts/gpu-streaming.sh's 70b stage: a Llama-3.3-70B block, decode-calibrated on 16384 continuation tokens
// (128 sequences of ~160), fits one H200 under the budgets it is given, and a 24 GB GPU is told it needs more.
TEST(CompressMemory, A70bBlockFitsTheBudgetsTheStreamingScriptGivesIt) {
  ModelConfig c = ModelConfig::fromJson(modelPresetConfig("llama-3.3-70b"), "llama-3.3-70b");
  RuntimeOptions cuda;
  cuda.device = c10::Device(c10::kCUDA);
  const std::vector<std::vector<int64_t>> shapes(4, std::vector<int64_t>{32, 160, c.hiddenSize});
  const CompressMemoryPlan plan = planCompressMemory(c, cuda, {32ull << 30, 32ull << 30}, shapes);
  EXPECT_LE(plan.deviceNeed, 32ull << 30) << plan.summary();
  EXPECT_GE(plan.solverThreads, 1);
  try {
    planCompressMemory(c, cuda, {16ull << 30, 32ull << 30}, shapes);
    FAIL() << "16 GiB was accepted for a 70B block: " << plan.summary();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--max-gpu-memory 16 GiB is less than"));
  }
}

class CompressBudget : public ::testing::Test {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    dir_ = test::scratchDir("compress-budget");
  }
  std::string recipe(const std::string& name, const std::string& calibration, const std::string& prune) const {
    const std::string path = dir_ + "/" + name + ".json";
    std::ofstream(path) << R"({"calibration": )" << calibration << R"(, "prune": )" << prune << "}";
    return path;
  }
  std::string textCalibration(int tokens, int window) const {
    return R"({"source": "text", "text": ")" + test::sharedPath("data/wikitext2-test.txt") +
           R"(", "tokens": )" + std::to_string(tokens) + R"(, "window": )" + std::to_string(window) + "}";
  }
  std::string dir_;
};

TEST_F(CompressBudget, ActivationsInAScratchFileGiveTheSameWeights) {
  const std::string r = recipe("sparsegpt", textCalibration(2048, 256), R"({"method": "sparsegpt", "pattern": "2:4"})");
  const std::string model = test::sharedPath("models/ref-tiny");
  const test::RunResult free = test::runCli("compress --model " + model + " --recipe " + r + " --out " + dir_ + "/free");
  ASSERT_EQ(free.exitCode, 0) << free.err;
  EXPECT_EQ(manifestOf(dir_ + "/free")["memory"]["activations"], "device");
  // The least host budget the plan takes: what it says one block needs. The activations then go to the scratch file.
  const test::RunResult low = test::runCli("compress --model " + model + " --recipe " + r + " --out " + dir_ +
                                           "/tight --max-host-memory 1MiB");
  ASSERT_NE(low.exitCode, 0);
  EXPECT_THAT(low.err, HasSubstr("one block needs"));
  EXPECT_FALSE(fs::exists(dir_ + "/tight"));
  const std::string needs = low.err.substr(low.err.find("less than the ") + 14);
  const std::string size = needs.substr(0, needs.find(" one block"));   // "371.10 MiB"
  const double mib = std::stod(size) * (size.find("GiB") != std::string::npos ? 1024 : 1) + 1;
  const test::RunResult tight = test::runCli("compress --model " + model + " --recipe " + r + " --out " + dir_ +
                                             "/tight --max-host-memory " + std::to_string(int64_t(mib)) + "MiB");
  ASSERT_EQ(tight.exitCode, 0) << tight.err;
  EXPECT_EQ(manifestOf(dir_ + "/tight")["memory"]["activations"], "scratch file");
  EXPECT_EQ(readFile(dir_ + "/tight/model.safetensors"), readFile(dir_ + "/free/model.safetensors"));
}

TEST_F(CompressBudget, BadBudgetsAndGenerationThatDoesNotFitAreRefusedUpFront) {
  const std::string model = test::sharedPath("models/ref-tiny");
  const std::string r = recipe("wanda", textCalibration(512, 128), R"({"method": "wanda", "pattern": "2:4"})");
  for (const char* bad : {"--max-host-memory lots", "--max-host-memory 0", "--max-gpu-memory 5XB"}) {
    const test::RunResult run = test::runCli("compress --model " + model + " --recipe " + r + " --out " + dir_ + "/x " + bad);
    EXPECT_NE(run.exitCode, 0) << bad;
    EXPECT_THAT(run.err, HasSubstr("--max-")) << bad;
  }
  // Decode calibration from prompts generates with the whole model: a host budget below it is refused, pointing
  // at a continuations file.
  const std::string decode = recipe("decode", R"({"source": "decode", "prompts": ")" +
                                                  test::sharedPath("data/prompts-prose.txt") + R"(", "tokens": 256})",
                                    R"({"method": "wanda", "pattern": "2:4"})");
  const test::RunResult run = test::runCli("compress --model " + model + " --recipe " + decode + " --out " + dir_ +
                                           "/y --max-host-memory 2MiB");
  EXPECT_NE(run.exitCode, 0);
  EXPECT_THAT(run.err, HasSubstr("continuations"));
  EXPECT_FALSE(fs::exists(dir_ + "/y"));
}

// The commands that generate (fidelity, analyze drift and hessian) hold their models whole: under a budget they are
// checked before any weight is read and refused with the size generation needs; a budget that holds them runs.
TEST(GenerationBudget, FidelityAndAnalysesRefuseABudgetGenerationCannotKeepAndRunUnderOneItCan) {
  PARETO_REQUIRE_SHARED();
  const std::string tiny = test::sharedPath("models/ref-tiny"), prompts = test::sharedPath("data/prompts-prose.txt");
  const std::string compare = " --dense " + tiny + " --model " + tiny + " --prompts " + prompts + " --max-prompts 2";
  const std::pair<std::string, std::string> refused[] = {
      {"fidelity" + compare + " --max-new-tokens 8 --max-host-memory 2MiB", "decode fidelity generates with both"},
      {"analyze drift" + compare + " --steps 4 --max-host-memory 2MiB", "activation drift generates with both"},
      {"analyze hessian --model " + tiny + " --text " + test::sharedPath("data/heldout-prose.txt") + " --prompts " +
           prompts + " --max-host-memory 2MiB",
       "decode calibration generates with the whole model"}};
  for (const auto& [args, message] : refused) {
    const test::RunResult run = test::runCli(args);
    EXPECT_NE(run.exitCode, 0) << args;
    EXPECT_THAT(run.err, HasSubstr(message)) << args;
    EXPECT_THAT(run.err, HasSubstr("more than the 2 MiB of --max-host-memory")) << args;
  }
  const test::RunResult ok = test::runCli("fidelity" + compare + " --max-new-tokens 8 --max-host-memory 2GiB --json");
  EXPECT_EQ(ok.exitCode, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("top1_agreement"));

  // The size itself: weights and KV cache of each model, the logits once, with the planners' headroom.
  const ModelConfig c = ModelConfig::fromJson(modelPresetConfig("llama-3.1-8b"), "llama-3.1-8b");
  const uint64_t one = wholeModelGenerationBytes(c, at::kBFloat16, 4, 640);
  EXPECT_GT(one, modelWeightBytes(c, at::kBFloat16));
  EXPECT_GT(wholeModelGenerationBytes(c, at::kBFloat16, 4, 640, 2), 2 * modelWeightBytes(c, at::kBFloat16));
  EXPECT_NO_THROW(requireGenerationFits(c, at::kCPU, at::kBFloat16, {0, one}, 4, 640, 1, "x"));
  EXPECT_THROW(requireGenerationFits(c, at::kCPU, at::kBFloat16, {0, one - 1}, 4, 640, 1, "x"), InputError);
  EXPECT_NO_THROW(requireGenerationFits(c, at::kCPU, at::kBFloat16, {1, 0}, 4, 640, 1, "x"));   // the GPU's budget
}

// CI's memory check: a Llama-3.2-1B-shaped checkpoint whose float32 weights (4.9 GB) exceed the budget compresses
// with the peak resident memory under the budget plus what the process held before the job (LibTorch's own).
TEST_F(CompressBudget, ASynthetic1BCompressesOnTheCpuUnderAHostBudget) {
  const std::string model = dir_ + "/llama-3.2-1b";
  const test::RunResult synth = test::runCli("synthesize --preset llama-3.2-1b --out " + model + " --tokenizer " +
                                             test::sharedPath("tokenizers/llama3"));
  ASSERT_EQ(synth.exitCode, 0) << synth.err;
  const ModelConfig config = ModelConfig::fromFile(model + "/config.json");
  const uint64_t budget = 3ull << 30;
  ASSERT_GT(modelWeightBytes(config, at::kFloat), budget);
  // Two windows of calibration: the budget is about the streamed weights (block 232 MiB, Hessians 304 MiB, solver
  // 1 GiB), which the token count does not change; the pass's forward and Hessian sums, which it does, were 40 of
  // the 100 s at 512 tokens. 256 still forms a batch of several sequences (planned forward 64 MiB, 128 at 512).
  const std::string r = recipe("wanda-1b", textCalibration(256, 128), R"({"method": "wanda", "pattern": "2:4"})");
  const test::RunResult run = test::runCli("compress --model " + model + " --recipe " + r + " --out " + dir_ +
                                           "/out --max-host-memory 3GiB --json");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const nlohmann::json result = nlohmann::json::parse(run.out);
  const uint64_t peak = result["memory"]["peak_host_bytes"], base = result["memory"]["host_base_bytes"];
  EXPECT_LE(peak, base + budget) << "peak " << peak << ", at the start " << base;
  // The same from outside: the largest child's peak resident memory (synthesize's is far below).
  struct rusage children {};
  ASSERT_EQ(::getrusage(RUSAGE_CHILDREN, &children), 0);
  EXPECT_LE(uint64_t(children.ru_maxrss) * 1024, base + budget);
  EXPECT_EQ(manifestOf(dir_ + "/out")["modules"].size(), size_t(7 * config.numLayers));
  removeTree(model);
  removeTree(dir_ + "/out");
}

}  // namespace
}  // namespace pareto
