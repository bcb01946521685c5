// core/search: the knapsack against brute force, the base recipe's checks, sensitivities that order the grids
// as their bits do, and the searched recipe read back as compress reads it.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "SharedData.h"
#include "compress/ModulePlan.h"
#include "compress/Recipe.h"
#include "model/LoadedModel.h"
#include "model/LlamaModel.h"
#include "model/ModelSummary.h"
#include "search/Allocation.h"
#include "search/DecodeTimeModel.h"
#include "search/Search.h"
#include "search/SearchBase.h"
#include "search/Sensitivity.h"
#include "search/SensitivityFile.h"
#include "search/SensitivityRefinement.h"
#include "util/Error.h"

namespace pareto {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

using Modules = std::vector<std::vector<KnapsackItem>>;

Modules randomInstance(std::mt19937& rng, int modules, int choices, uint64_t maxCost) {
  std::uniform_int_distribution<uint64_t> cost(0, maxCost);
  std::uniform_real_distribution<double> loss(0.0, 10.0);
  Modules out(static_cast<size_t>(modules));
  for (auto& items : out)
    for (int k = 0; k < choices; ++k) items.push_back({k, cost(rng), loss(rng)});
  return out;
}

// The least loss with cost ≤ budget over every combination; +inf when none fits.
double bruteForce(const Modules& modules, uint64_t budget) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> pick(modules.size(), 0);
  while (true) {
    uint64_t cost = 0;
    double loss = 0;
    for (size_t m = 0; m < modules.size(); ++m) {
      cost += modules[m][pick[m]].cost;
      loss += modules[m][pick[m]].loss;
    }
    if (cost <= budget) best = std::min(best, loss);
    size_t m = 0;
    while (m < modules.size() && ++pick[m] == modules[m].size()) pick[m++] = 0;
    if (m == modules.size()) break;
  }
  return best;
}

void expectConsistent(const Modules& modules, const FrontPoint& p) {
  uint64_t cost = 0;
  double loss = 0;
  ASSERT_EQ(p.choice.size(), modules.size());
  for (size_t m = 0; m < modules.size(); ++m) {
    cost += modules[m][size_t(p.choice[m])].cost;
    loss += modules[m][size_t(p.choice[m])].loss;
  }
  EXPECT_EQ(cost, p.cost);
  EXPECT_NEAR(loss, p.loss, 1e-9);
}

TEST(SearchKnapsack, ExactFrontMatchesBruteForceAtEveryBudget) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const Modules modules = randomInstance(rng, 5, 4, 40);
    const KnapsackFront front = solveKnapsackFront(modules);
    ASSERT_EQ(front.unit, 1u);   // a small integer range: the exact case
    for (size_t i = 1; i < front.points.size(); ++i) {
      EXPECT_GT(front.points[i].cost, front.points[i - 1].cost);
      EXPECT_LT(front.points[i].loss, front.points[i - 1].loss);
    }
    for (const FrontPoint& p : front.points) expectConsistent(modules, p);
    for (uint64_t budget = 0; budget <= front.maxCost + 1; ++budget) {
      const double expected = bruteForce(modules, budget);
      const FrontPoint* p = front.best(budget);
      if (std::isinf(expected)) {
        EXPECT_EQ(p, nullptr) << "budget " << budget;
        continue;
      }
      ASSERT_NE(p, nullptr) << "budget " << budget;
      EXPECT_LE(p->cost, budget);
      EXPECT_NEAR(p->loss, expected, 1e-9) << "trial " << trial << " budget " << budget;
    }
  }
}

TEST(SearchKnapsack, CoarseGridStaysWithinBudgetAndItsBound) {
  // Large costs on a small grid: unit > 1. A point never exceeds its budget, and its loss is at most the exact
  // optimum at budget − modules · unit.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 10; ++trial) {
    const Modules modules = randomInstance(rng, 6, 3, 1000000);
    const KnapsackFront front = solveKnapsackFront(modules, 64);
    ASSERT_GT(front.unit, 1u);
    for (const FrontPoint& p : front.points) expectConsistent(modules, p);
    const uint64_t slack = modules.size() * front.unit;
    for (uint64_t budget = front.minCost; budget <= front.maxCost; budget += (front.maxCost - front.minCost) / 97 + 1) {
      const FrontPoint* p = front.best(budget);
      ASSERT_NE(p, nullptr);
      EXPECT_LE(p->cost, budget);
      if (budget >= front.minCost + slack) EXPECT_LE(p->loss, bruteForce(modules, budget - slack) + 1e-9);
      EXPECT_GE(p->loss, bruteForce(modules, budget) - 1e-9);
    }
  }
}

TEST(SearchKnapsack, RefusesAModuleWithoutChoices) {
  Modules modules = {{{0, 1, 1.0}}, {}};
  EXPECT_THROW(solveKnapsackFront(modules), InputError);
}

const json kCalibration = {{"source", "text"}, {"text", "data.txt"}, {"tokens", 512}, {"window", 64}};

TEST(SearchBaseRecipe, DefaultCandidatesAreTheIssueList) {
  const SearchBase base = searchBaseFromJson({{"calibration", kCalibration}}, "/base", "base.json");
  EXPECT_TRUE(base.defaultCandidates);
  std::vector<std::string> names;
  for (const auto& c : base.candidates) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dense", "rtn-int8-channel", "gptq-int4-g64", "gptq-int4-g128",
                                             "gptq-int3-g128", "spqr-3bit", "sparsegpt-2:4",
                                             "sparsegpt-2:4+gptq-int4", "rtn-gguf-q8_0", "gptq-gguf-q4_k",
                                             "rtn-gguf-q4_0"}));
  EXPECT_TRUE(base.candidates[0].dense());
  EXPECT_EQ(base.calibrationBlock.at("text"), "/base/data.txt");   // absolute, for recipes written elsewhere
}

TEST(SearchBaseRecipe, TheShippedBaseReads) {
  const SearchBase base = readSearchBase(PARETO_SOURCE_DIR "/resources/search/wikitext2-default-candidates.json");
  EXPECT_TRUE(base.defaultCandidates);
  EXPECT_EQ(base.calibration.tokens, 16384);
  EXPECT_EQ(base.candidates.size(), 11u);
}

TEST(SearchBaseRecipe, RefusalsNameTheFileAndKeyPath) {
  auto message = [](const json& j) {
    try {
      searchBaseFromJson(j, "", "base.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(message(json::object()), HasSubstr("\"calibration\" block is needed"));
  EXPECT_THAT(message({{"calibration", kCalibration}, {"quantize", {{"method", "rtn"}}}}),
              HasSubstr("quantize: the search chooses"));
  EXPECT_THAT(message({{"calibration", kCalibration},
                       {"candidates", {{{"name", "a"}}, {{"name", "b"}, {"quantize", {{"method", "rtn"}, {"bits", 9}}}}}}}),
              HasSubstr("base.json: candidates[1]: quantize.bits"));
  EXPECT_THAT(message({{"calibration", kCalibration}, {"candidates", {{{"name", "a"}}, {{"name", "a"}}}}}),
              HasSubstr("\"a\" names two candidates"));
  EXPECT_THAT(message({{"calibration", kCalibration}, {"candidates", {{{"name", "a"}}}}}), HasSubstr("at least two"));
  EXPECT_THAT(message({{"calibration", kCalibration}, {"candidates", {{{"name", "a"}, {"pune", nullptr}}, {{"name", "b"}}}}}),
              HasSubstr("candidates[0].pune: unknown key"));
  EXPECT_THAT(message({{"calibration", kCalibration}, {"refine", {{"reference", "nope"}}}}),
              HasSubstr("base.json: refine.reference: \"nope\" names no candidate"));
  EXPECT_THAT(message({{"calibration", kCalibration}, {"refine", {{"reference", "dense"}}}}), HasSubstr("is dense"));
  EXPECT_THAT(message({{"calibration", kCalibration}, {"refine", {{"windows", 0}}}}),
              HasSubstr("refine.windows: must be an integer of at least 1"));
  EXPECT_THAT(message({{"calibration", kCalibration}, {"refine", {{"window", 2}}}}), HasSubstr("refine.window: unknown key"));
  EXPECT_THAT(message({{"calibration", kCalibration}, {"refine", "yes"}}), HasSubstr("refine: must be false"));
}

TEST(SearchBaseRecipe, TheRefinementIsOnByDefaultAndReadsItsSettings) {
  EXPECT_TRUE(searchBaseFromJson({{"calibration", kCalibration}}, "", "b.json").refine.enabled);
  EXPECT_FALSE(searchBaseFromJson({{"calibration", kCalibration}, {"refine", false}}, "", "b.json").refine.enabled);
  const RefineOptions r =
      searchBaseFromJson({{"calibration", kCalibration},
                          {"refine", {{"windows", 2}, {"modules", 5}, {"reference", "gptq-int3-g128"}}}},
                         "", "b.json")
          .refine;
  EXPECT_TRUE(r.enabled);
  EXPECT_EQ(r.windows, 2);
  EXPECT_EQ(r.modules, 5);
  EXPECT_EQ(r.reference, "gptq-int3-g128");
}

// A measured table of 100 × 100 modules with the same cells each, losses set by hand afterwards.
SensitivityTable tableOf(const std::vector<std::string>& candidates, const std::vector<const char*>& names,
                         const std::vector<SensitivityCell>& cells) {
  SensitivityTable t;
  t.candidates = candidates;
  for (const char* name : names) {
    SensitivityModule m;
    m.name = name;
    m.rows = m.cols = 100;
    m.cells = cells;
    t.modules.push_back(m);
  }
  t.linearWeights = 10000 * int64_t(names.size());
  t.denseLinearBytes = 20000 * uint64_t(names.size());
  t.measured = true;
  return t;
}

// A two-module table with losses set by hand: the front, budgets and the recipe written from it.
SensitivityTable handTable() {
  SensitivityTable t = tableOf({"dense", "int8", "int4"},
                               {"model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"},
                               {{true, "", "dense", "dense", "", 20000, 0.0},
                                {true, "", "int8-channel", "int8-channel", "", 10200, 1.0},
                                {true, "", "int4-g128", "int4-g128", "", 5200, 5.0}});
  t.modules[1].cells[2].loss = 50.0;   // down_proj is the sensitive one
  return t;
}

TEST(SearchFrontTest, BudgetsChooseTheLeastLossAndRefuseWithTheRange) {
  const SensitivityTable t = handTable();
  DecodeBandwidth bw;
  bw.bytesPerSecond = 1e9;
  const SearchFront f = searchFront(t, BudgetKind::BitsPerWeight, bw);
  EXPECT_NEAR(f.minBitsPerWeight, 8.0 * 10400 / 20000, 1e-12);
  EXPECT_NEAR(f.maxBitsPerWeight, 16.0, 1e-12);
  // 6.2 bits per weight = 15500 bytes: int4 on up_proj (the cheap loss) and int8 on down_proj.
  const SearchPoint& p = chooseForBudget(f, {BudgetKind::BitsPerWeight, 6.2});
  EXPECT_EQ(p.choice, (std::vector<int>{2, 1}));
  EXPECT_EQ(p.bytes, 15400u);
  EXPECT_NEAR(p.loss, 6.0, 1e-12);
  try {
    chooseForBudget(f, {BudgetKind::BitsPerWeight, 2.0});
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("outside what the candidates can reach: 4.160 to 16.000 bits per weight"));
  }
  EXPECT_THROW(checkBudget(t, {BudgetKind::BitsPerWeight, 17.0}, bw), InputError);
  EXPECT_NO_THROW(checkBudget(t, {BudgetKind::Bytes, 30000}, bw));
  // Tokens/s at one bandwidth: the time front chooses as the bytes front does.
  const SearchFront tf = searchFront(t, BudgetKind::TokensPerSecond, bw);
  const SearchPoint& q = chooseForBudget(tf, {BudgetKind::TokensPerSecond, 1e9 / 15400.0});
  EXPECT_EQ(q.choice, p.choice);
}

TEST(SearchFrontTest, TokensPerSecondUsesEachKernelsBandwidthAndLeavesOutUnmeasuredOnes) {
  const SensitivityTable t = handTable();
  DecodeBandwidth bw;
  bw.kernels = {{"dense", "NVIDIA H200 (132 SMs)", "s", 1, 1e9, 0}, {"int4-g128", "NVIDIA H200 (132 SMs)", "s", 1, 0.5e9, 0}};
  const SearchFront f = searchFront(t, BudgetKind::TokensPerSecond, bw);
  EXPECT_EQ(f.unmeasured.size(), 2u);   // int8-channel on both modules
  EXPECT_THAT(f.unmeasured[0], HasSubstr("up_proj × int8: no stored benchmark of the int8-channel kernel"));
  // A layout no kernel decodes says which: a GGUF candidate's fallback for this module's shape, with the plan's note.
  SensitivityTable fallback = handTable();
  SensitivityCell& q4 = fallback.modules[0].cells[1];
  q4.format = "gguf-q4_0";
  q4.kernel = "";
  q4.note = "gguf-q4_k → gguf-q4_0: 384 columns";
  const SearchFront g = searchFront(fallback, BudgetKind::TokensPerSecond, bw);
  EXPECT_THAT(g.unmeasured[0], HasSubstr("no benchmarked kernel decodes gguf-q4_0 (gguf-q4_k → gguf-q4_0: 384 columns)"));
  // int4 at half the bandwidth takes 10400 ns per module, dense 20000 ns: the fastest is both int4.
  EXPECT_NEAR(f.maxTokensPerSecond, 1.0 / (2 * 5200 / 0.5e9), 1e-6);
  const SearchPoint& p = chooseForBudget(f, {BudgetKind::TokensPerSecond, f.maxTokensPerSecond});
  EXPECT_EQ(p.choice, (std::vector<int>{2, 2}));
}

KernelMeasurement gemv(const std::string& kernel, int64_t rows, int64_t cols, double micros) {
  return {kernel, "NVIDIA H200 (132 SMs)", gemvShapeText(rows, cols, "m"), 1, NAN, 0, micros * 1e-6};
}

TEST(SearchTimeModel, MeasuredShapesWinAFitCoversTheOthersAndBytesOnlyWithoutThem) {
  DecodeBandwidth b;
  b.kernels = {{"dense", "NVIDIA H200 (132 SMs)", "s step", 1, 1e9, 0, 0}};
  b.gemvs = {gemv("dense", 100, 100, 5.0), gemv("dense", 200, 100, 6.0), gemv("dense", 400, 100, 8.0),
             gemv("int4-g128", 300, 100, 4.0)};
  const DecodeTimeModel m(b);
  ASSERT_TRUE(m.perGemv());
  EXPECT_NEAR(m.gemvSeconds("dense", 200, 100, 1), 6.0e-6, 1e-12);   // measured: its own time, not the fit
  // 4 µs a launch + 1e-4 µs a weight fits the three dense shapes exactly.
  EXPECT_NEAR(m.gemvSeconds("dense", 300, 100, 1), 7.0e-6, 1e-12);
  EXPECT_NEAR(m.gemvSeconds("dense", 1000, 1000, 1), 104e-6, 1e-10);
  // One shape: a line through the origin.
  EXPECT_NEAR(m.gemvSeconds("int4-g128", 600, 100, 1), 8.0e-6, 1e-12);
  // Once dense has single-GEMV times, a kernel without them is unmeasured, not priced by its bytes.
  EXPECT_TRUE(std::isnan(m.gemvSeconds("int8-channel", 100, 100, 10000)));
  EXPECT_THAT(m.source(), HasSubstr("GEMVs timed alone on NVIDIA H200 (132 SMs) (2 kernels)"));
  EXPECT_THAT(m.source(), HasSubstr("no stored `bench decode` of this model"));
  // The rest of the step: the measured dense step less the dense linears' predicted time.
  b.denseStepSeconds = 50e-6;
  b.denseStepSource = "the dense model's decode step measured";
  EXPECT_NEAR(DecodeTimeModel(b).otherSeconds(20e-6, 123), 30e-6, 1e-15);
  EXPECT_THAT(DecodeTimeModel(b).source(), HasSubstr("the rest of the step from the dense model's decode step"));
  // Without single GEMVs: bytes over the step bandwidths, as RecipeEstimate predicts.
  b.gemvs.clear();
  b.denseStepSeconds = 0;
  const DecodeTimeModel bytes(b);
  EXPECT_FALSE(bytes.perGemv());
  EXPECT_NEAR(bytes.gemvSeconds("dense", 100, 100, 20000), 20e-6, 1e-15);
  EXPECT_TRUE(std::isnan(bytes.gemvSeconds("int4-g128", 100, 100, 5200)));
  EXPECT_NEAR(bytes.otherSeconds(20e-6, 3000), 3e-6, 1e-15);
}

// ref-small's GEMVs as `bench kernels --per-shape` timed them on the H200 (2026-12-03): dense 3.2-4.1 µs whatever
// the shape (launch and latency), the largest not the slowest; bitmask 2:4 a little more for more weights.
DecodeBandwidth refSmallOnTheH200() {
  DecodeBandwidth b;
  b.gemvs = {gemv("dense", 640, 384, 3.34), gemv("dense", 384, 384, 3.28), gemv("dense", 2048, 384, 3.24),
             gemv("dense", 384, 1024, 4.12), gemv("bitmask-2:4", 640, 384, 2.28), gemv("bitmask-2:4", 384, 384, 2.23),
             gemv("bitmask-2:4", 2048, 384, 2.33), gemv("bitmask-2:4", 384, 1024, 2.79)};
  b.denseStepSeconds = 1 / 4534.9;
  b.denseStepSource = "a measured step";
  return b;
}

TEST(SearchTimeModel, LaunchBoundTimesAreNotScaledDownToSmallerShapes) {
  const DecodeTimeModel m(refSmallOnTheH200());
  // Times that do not grow with the weights: the fit is their mean, not a line through the origin (which priced
  // a 128 × 384 k_proj at 0.31 µs).
  EXPECT_NEAR(m.gemvSeconds("dense", 128, 384, 1), 3.495e-6, 1e-12);
  // Times that do grow keep the free fit, intercept and slope.
  const double k = m.gemvSeconds("bitmask-2:4", 128, 384, 1), big = m.gemvSeconds("bitmask-2:4", 4096, 4096, 1);
  EXPECT_GT(k, 2.3e-6);   // 2.35 µs + 1.35e-7 µs a weight
  EXPECT_LT(k, 2.4e-6);
  EXPECT_GT(big, 4e-6);

  // So splitting q (2:4) from k and v (dense), three launches, is slower than the one dense qkv GEMV, and no
  // tokens/s front holds it: the search that chose such splits predicted 4963 tok/s for a recipe that ran at 4140.
  SensitivityTable t = tableOf({"dense", "2:4"},
                               {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                                "model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.o_proj"},
                               {{true, "", "dense", "dense", "", 0, 0.0}, {true, "", "bitmask-2:4", "bitmask-2:4", "", 0, 1.0}});
  const int64_t rows[] = {384, 128, 128, 384};
  for (size_t i = 0; i < 4; ++i) {
    t.modules[i].rows = rows[i];
    t.modules[i].cols = 384;
    t.modules[i].cells[0].bytes = uint64_t(rows[i]) * 384 * 2;
    t.modules[i].cells[1].bytes = uint64_t(rows[i]) * 384 * 9 / 8;
  }
  t.modules[1].cells[1].loss = t.modules[2].cells[1].loss = 10.0;   // k and v the sensitive ones
  const SearchFront f = searchFront(t, BudgetKind::TokensPerSecond, refSmallOnTheH200());
  ASSERT_FALSE(f.points.empty());
  for (const SearchPoint& p : f.points) {
    EXPECT_NE(p.choice, (std::vector<int>{1, 0, 0, 0}));
    EXPECT_NE(p.choice, (std::vector<int>{1, 0, 0, 1}));
  }
}

TEST(SearchTimeModel, GemvShapesReadBack) {
  int64_t r = 0, c = 0;
  EXPECT_TRUE(parseGemvShape(gemvShapeText(6144, 4096, "llama-3.1-8b qkv"), r, c));
  EXPECT_EQ(r, 6144);
  EXPECT_EQ(c, 4096);
  EXPECT_TRUE(parseGemvShape("gemv 8x16", r, c));
  EXPECT_FALSE(parseGemvShape("llama-3.1-8b step", r, c));
  EXPECT_FALSE(parseGemvShape("gemv 8x16x3", r, c));
  EXPECT_FALSE(parseGemvShape("gemv 0x16", r, c));
  // The newest row per kernel and shape; other batches, devices and step rows left out.
  std::vector<KernelMeasurement> rows = {gemv("dense", 8, 16, 2.0), gemv("dense", 8, 16, 3.0),
                                         gemv("dense", 16, 16, 4.0), gemv("int4-g128", 8, 16, 1.0),
                                         {"dense", "NVIDIA H200 (132 SMs)", "s step", 1, 1e9, 0, 1e-3}};
  rows.push_back(gemv("dense", 32, 16, 1.0));
  rows.back().batch = 8;
  rows.push_back(gemv("dense", 64, 16, 1.0));
  rows.back().device = "NVIDIA H100 (132 SMs)";
  const std::vector<KernelMeasurement> chosen = selectGemvMeasurements(rows, "NVIDIA H200");
  ASSERT_EQ(chosen.size(), 3u);
  EXPECT_DOUBLE_EQ(chosen[0].secondsPerCall, 2e-6);
  EXPECT_EQ(chosen[1].shape, gemvShapeText(16, 16, "m"));
  EXPECT_EQ(chosen[2].kernel, "int4-g128");
}

// q, k and v of one layer, two candidates: the decode runtime runs the three as one GEMV only when they share a
// format, so with launches that cost more than the bytes a mixed allocation is slower than either uniform one.
SensitivityTable attentionTable() {
  SensitivityTable t = tableOf({"dense", "int4"},
                               {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                                "model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.o_proj"},
                               {{true, "", "dense", "dense", "", 20000, 0.0},
                                {true, "", "int4-g128", "int4-g128", "", 5200, 1.0}});
  t.modules[2].cells[1].loss = 10.0;   // v_proj is the sensitive one
  t.otherBytesPerToken = 1000;
  return t;
}

TEST(SearchFrontTest, TokensPerSecondPricesTheGemvsTheRuntimeLaunches) {
  const SensitivityTable t = attentionTable();
  DecodeBandwidth b;
  // A GEMV: 10 µs of launch and latency + 1e-4 µs a weight dense, 0.25e-4 int4 (measured at the fused and the
  // single shapes, so the fit is exact).
  b.gemvs = {gemv("dense", 100, 100, 11.0), gemv("dense", 300, 100, 13.0), gemv("int4-g128", 100, 100, 10.25),
             gemv("int4-g128", 300, 100, 10.75)};
  b.denseStepSeconds = 100e-6;   // measured: 24 µs of dense linears (qkv 13 + o 11) and 76 µs of the rest
  b.denseStepSource = "a measured step";
  const SearchFront f = searchFront(t, BudgetKind::TokensPerSecond, b);
  EXPECT_TRUE(f.unmeasured.empty());
  const auto stepOf = [&](const std::vector<int>& choice) {
    for (const SearchPoint& p : f.points)
      if (p.choice == choice) return 1.0 / p.tokensPerSecond;
    return std::numeric_limits<double>::quiet_NaN();
  };
  // All dense: the measured step itself.
  EXPECT_NEAR(stepOf({0, 0, 0, 0}), 100e-6, 1e-12);
  // All int4: one fused qkv GEMV of int4 (10.75) and o (10.25).
  EXPECT_NEAR(f.maxTokensPerSecond, 1.0 / (76e-6 + 10.75e-6 + 10.25e-6), 1e-6);
  // v dense and q, k int4 saves bytes but launches three GEMVs (10.25 + 10.25 + 11 = 31.5 µs against 13): slower
  // than all dense, so it is on no front of time, and a budget just under the all-int4 speed takes all int4
  // although v's loss is 10.
  for (const SearchPoint& p : f.points) EXPECT_NE(p.choice, (std::vector<int>{1, 1, 0, 0}));
  const SearchPoint& fast = chooseForBudget(f, {BudgetKind::TokensPerSecond, 1.0 / (76e-6 + 10.75e-6 + 11e-6)});
  EXPECT_EQ(fast.choice, (std::vector<int>{1, 1, 1, 0}));
  EXPECT_NEAR(fast.loss, 12.0, 1e-12);
  // A bytes search is module by module; its points still carry the step time of what the runtime would launch.
  const SearchFront bytes = searchFront(t, BudgetKind::Bytes, b);
  for (const SearchPoint& p : bytes.points)
    if (p.choice == std::vector<int>{1, 1, 0, 0}) EXPECT_NEAR(1.0 / p.tokensPerSecond, 76e-6 + 31.5e-6 + 11e-6, 1e-12);
}

TEST(SearchFrontTest, TheRecipeReadsBackAsOneOverridePerModule) {
  const SearchBase base = searchBaseFromJson(
      {{"calibration", kCalibration},
       {"candidates", {{{"name", "dense"}},
                       {{"name", "int8"}, {"quantize", {{"method", "rtn"}, {"bits", 8}, {"granularity", "channel"}}}},
                       {{"name", "int4"}, {"quantize", {{"method", "gptq"}, {"bits", 4}, {"group_size", 20}}}}}}},
      "/base", "base.json");
  const SensitivityTable t = handTable();
  DecodeBandwidth bw;
  const SearchFront f = searchFront(t, BudgetKind::Bytes, bw);
  const SearchPoint& p = chooseForBudget(f, {BudgetKind::Bytes, 15400});
  const Recipe r = Recipe::fromJson(searchRecipe(base, t, p, "test"), "", "searched.json");
  ASSERT_EQ(r.overrides.size(), 2u);
  EXPECT_EQ(planModule(r, "model.layers.0.mlp.up_proj", 100, 100).format.name(), "int4-g20");
  EXPECT_EQ(planModule(r, "model.layers.0.mlp.down_proj", 100, 100).format.name(), "int8-channel");
  EXPECT_FALSE(planModule(r, "model.layers.1.mlp.down_proj", 100, 100).touched());   // exact names, no globbing
  EXPECT_EQ(r.calibration->file, "/base/data.txt");
}

TEST(SearchSensitivity, FewerBitsEstimateMoreLossOnEveryModuleOfRefTiny) {
  PARETO_REQUIRE_SHARED();
  const std::string model = test::sharedPath("models/ref-tiny");
  auto gptq = [](int bits) {
    return json{{"method", "gptq"}, {"bits", bits}, {"group_size", 64}, {"symmetric", true}};
  };
  const json j = {{"calibration", {{"source", "text"}, {"text", test::sharedPath("data/wikitext2-test.txt")},
                                   {"tokens", 2048}, {"window", 128}}},
                  {"candidates", {{{"name", "dense"}},
                                  {{"name", "int8"}, {"quantize", {{"method", "rtn"}, {"bits", 8}, {"granularity", "channel"}}}},
                                  {{"name", "int4"}, {"quantize", gptq(4)}},
                                  {{"name", "int3"}, {"quantize", gptq(3)}},
                                  {{"name", "int4-g100"}, {"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 100}}}}}}};
  const SearchBase base = searchBaseFromJson(j, "", "base.json");
  SensitivityTable t = planSensitivity(base, summarizeModel(model));
  // ref-tiny's 192-column linears take no groups of 100 (nor of 50): left out there, with the module named.
  bool leftOut = false;
  for (const auto& s : t.skipped()) leftOut |= s.find("× int4-g100: model.layers.0.self_attn.q_proj") != std::string::npos;
  EXPECT_TRUE(leftOut);
  measureSensitivity(t, base, model, RuntimeOptions{}, 0, {}, nullptr);
  EXPECT_GT(t.calibrationTokens, 0);
  for (const SensitivityModule& m : t.modules) {
    EXPECT_EQ(m.cells[0].loss, 0.0);
    EXPECT_GT(m.cells[1].loss, 0.0) << m.name;
    EXPECT_LT(m.cells[1].loss, m.cells[2].loss) << m.name;
    EXPECT_LT(m.cells[2].loss, m.cells[3].loss) << m.name;
  }
}

TEST(SearchTableFile, ReadsBackOnlyForTheSameKey) {
  SensitivityTable t = handTable();
  t.modules[0].scale = 0.25;
  t.modules[0].cells[1].outputError = 4.0;
  t.modules[1].cells[2] = {false, "model.layers.0.mlp.down_proj: refused", "", "", "", 0, 0, 0};
  t.refinement = {true, "int4", 2, 256, 2};
  t.calibrationTokens = 512;
  const SearchBase base = searchBaseFromJson({{"calibration", kCalibration}}, "/base", "base.json");
  const json key = sensitivityKey(base, "/models/m", "float32");
  const std::string path = test::scratchDir("search-table") + "/table.json";
  std::filesystem::remove(path);
  EXPECT_FALSE(readSensitivityTable(path, key).has_value());   // none yet
  writeSensitivityTable(path, t, key);
  const std::optional<SensitivityTable> back = readSensitivityTable(path, key);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->measured);
  EXPECT_EQ(back->candidates, t.candidates);
  EXPECT_EQ(back->estimate(), t.estimate());
  ASSERT_EQ(back->modules.size(), 2u);
  EXPECT_EQ(back->modules[0].scale, 0.25);
  EXPECT_TRUE(std::isnan(back->modules[0].referenceKl));
  EXPECT_EQ(back->modules[0].cells[1].outputError, 4.0);
  EXPECT_EQ(back->modules[0].cells[2].loss, t.modules[0].cells[2].loss);
  EXPECT_FALSE(back->modules[1].cells[2].applies);
  EXPECT_EQ(back->modules[1].cells[2].problem, "model.layers.0.mlp.down_proj: refused");
  // Another dtype, model or refinement: not this table.
  EXPECT_FALSE(readSensitivityTable(path, sensitivityKey(base, "/models/m", "bfloat16")).has_value());
  EXPECT_FALSE(readSensitivityTable(path, sensitivityKey(base, "/models/other", "float32")).has_value());
  SearchBase plain = base;
  plain.refine.enabled = false;
  EXPECT_FALSE(readSensitivityTable(path, sensitivityKey(plain, "/models/m", "float32")).has_value());
  std::ofstream(path) << "{\"runs\": []}";
  EXPECT_THROW(readSensitivityTable(path, key), InputError);
}

// The KL refinement on ref-tiny: small calibration, RTN candidates (fast, and exactly equivariant to scaling a
// weight, which the last test relies on).
SearchBase refineBase(int64_t modules) {
  return searchBaseFromJson(
      {{"calibration", {{"source", "text"}, {"text", test::sharedPath("data/wikitext2-test.txt")},
                        {"tokens", 1024}, {"window", 128}}},
       {"candidates", {{{"name", "dense"}},
                       {{"name", "int8"}, {"quantize", {{"method", "rtn"}, {"bits", 8}, {"granularity", "channel"}}}},
                       {{"name", "int4"}, {"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 64}}}}}},
       {"refine", {{"windows", 2}, {"modules", modules}}}},
      "", "base.json");
}

SensitivityTable refinedTable(const SearchBase& base, LoadedModel& m) {
  SensitivityTable t = planSensitivity(base, summarizeModel(m.directory));
  measureSensitivity(t, base, m, 0, {}, nullptr);
  return t;
}

TEST(SearchRefinement, ScalesArePositiveDeterministicAndLeaveTheModelDense) {
  PARETO_REQUIRE_SHARED();
  LoadedModel m = loadModel(test::sharedPath("models/ref-tiny"), RuntimeOptions{});
  const SearchBase base = refineBase(0);
  const at::Tensor before = m.model->layerLinears(1).at(3).second->weight().clone();
  const SensitivityTable t = refinedTable(base, m);
  EXPECT_TRUE(at::equal(m.model->layerLinears(1).at(3).second->weight(), before));
  EXPECT_TRUE(t.refinement.done);
  EXPECT_EQ(t.refinement.reference, "int4");   // the smaller of the two middle ones
  EXPECT_EQ(t.refinement.measuredModules, t.modules.size());
  EXPECT_EQ(t.refinement.windows, 2);
  EXPECT_THAT(t.estimate(), HasSubstr("predicted KL"));
  for (const SensitivityModule& mod : t.modules) {
    EXPECT_TRUE(std::isfinite(mod.scale) && mod.scale > 0) << mod.name << " " << mod.scale;
    EXPECT_GT(mod.referenceKl, 0) << mod.name;
    // The reference's refined loss is its measured KL alone.
    EXPECT_NEAR(mod.cells[2].loss, mod.referenceKl, 1e-12 * mod.referenceKl) << mod.name;
    EXPECT_NEAR(mod.cells[1].loss, mod.cells[1].outputError * mod.scale, 1e-12 * mod.cells[1].loss);
  }
  const SensitivityTable again = refinedTable(base, m);
  for (size_t i = 0; i < t.modules.size(); ++i)
    for (size_t c = 0; c < t.candidates.size(); ++c) EXPECT_EQ(t.modules[i].cells[c].loss, again.modules[i].cells[c].loss);
}

TEST(SearchRefinement, UnmeasuredModulesTakeTheirKindsMedianScale) {
  PARETO_REQUIRE_SHARED();
  LoadedModel m = loadModel(test::sharedPath("models/ref-tiny"), RuntimeOptions{});
  const SensitivityTable t = refinedTable(refineBase(3), m);
  EXPECT_EQ(t.refinement.measuredModules, 3u);
  size_t measured = 0;
  for (const SensitivityModule& mod : t.modules) {
    measured += std::isnan(mod.referenceKl) ? 0 : 1;
    EXPECT_TRUE(std::isfinite(mod.scale) && mod.scale > 0) << mod.name;
  }
  EXPECT_EQ(measured, 3u);
  EXPECT_THAT(t.estimate(), HasSubstr("3 of " + std::to_string(t.modules.size()) + " modules measured"));
}

// Dividing v_proj by 4 and multiplying o_proj by 4 leaves the model's function as it was, but v_proj's output
// error shrinks 16-fold while the KL its quantization causes stays: its scale must grow about 16-fold, o_proj's
// stay (its output error and its KL are both unchanged).
TEST(SearchRefinement, AModuleWhoseOutputErrorUnderstatesItsHarmGetsALargerScale) {
  PARETO_REQUIRE_SHARED();
  LoadedModel m = loadModel(test::sharedPath("models/ref-tiny"), RuntimeOptions{});
  const SearchBase base = refineBase(0);
  auto scaleOf = [](const SensitivityTable& t, const std::string& name) {
    for (const SensitivityModule& mod : t.modules)
      if (mod.name == name) return mod.scale;
    ADD_FAILURE() << name;
    return 0.0;
  };
  const SensitivityTable plain = refinedTable(base, m);
  Linear* v = nullptr;
  Linear* o = nullptr;
  for (const auto& [group, linear] : m.model->layerLinears(0)) {
    if (linear->name() == "model.layers.0.self_attn.v_proj") v = linear;
    if (linear->name() == "model.layers.0.self_attn.o_proj") o = linear;
  }
  ASSERT_TRUE(v != nullptr && o != nullptr);
  v->setWeight(v->weight() / 4.0);
  o->setWeight(o->weight() * 4.0);
  const SensitivityTable moved = refinedTable(base, m);
  const double vRatio = scaleOf(moved, v->name()) / scaleOf(plain, v->name());
  const double oRatio = scaleOf(moved, o->name()) / scaleOf(plain, o->name());
  EXPECT_GT(vRatio, 8.0);
  EXPECT_LT(vRatio, 32.0);
  EXPECT_GT(oRatio, 0.5);
  EXPECT_LT(oRatio, 2.0);
}

}  // namespace
}  // namespace pareto
