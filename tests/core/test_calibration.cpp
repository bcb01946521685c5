// Calibration sources and the sequential pass on the reference model.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "SharedData.h"
#include "TestRuntime.h"
#include "calib/DecodeCalibration.h"
#include "calib/SequentialPass.h"
#include "calib/TextCalibration.h"
#include "model/LoadedModel.h"
#include "util/Error.h"

namespace pareto {
namespace {

class Calibration : public ::testing::Test {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    m_ = std::make_unique<LoadedModel>(loadModel(test::sharedPath("models/ref-tiny"), test::testRuntime()));
  }
  DecodeCalibrationOptions decodeOptions(int64_t tokens, int64_t maxNew) const {
    DecodeCalibrationOptions o;
    o.tokens = tokens;
    o.maxNewTokens = maxNew;
    o.eosTokenIds = m_->eosTokenIds;
    o.bosTokenId = m_->config.bosTokenId;
    o.batch = 3;
    return o;
  }
  std::unique_ptr<LoadedModel> m_;
};

TEST_F(Calibration, TextWindowsCountExactlyAndAreSeeded) {
  TextCalibrationOptions o;
  o.window = 64;
  o.tokens = 300;   // 4 full windows and one of 44
  o.seed = 5;
  CalibrationSet a = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  EXPECT_EQ(a.source, "text");
  ASSERT_EQ(a.sequences.size(), 5u);
  EXPECT_EQ(a.countedTokens(), 300);
  EXPECT_EQ(a.totalTokens(), 300);
  EXPECT_EQ(a.sequences.back().ids.size(), 44u);
  CalibrationSet b = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  EXPECT_EQ(a.sequences[2].ids, b.sequences[2].ids);
  o.seed = 6;
  CalibrationSet c = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  EXPECT_NE(a.sequences[0].ids, c.sequences[0].ids);
  o.tokens = 100000000;
  EXPECT_THROW(textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o), InputError);
}

TEST_F(Calibration, DecodeSequencesWeightOnlyContinuations) {
  auto prompts = readPrompts(test::sharedPath("data/prompts-prose.txt"));
  CalibrationSet set = decodeCalibration(*m_->model, *m_->tokenizer, prompts, decodeOptions(50, 12));
  EXPECT_EQ(set.source, "decode");
  EXPECT_EQ(set.countedTokens(), 50);
  for (const auto& s : set.sequences) {
    ASSERT_EQ(s.ids.size(), s.weights.size());
    EXPECT_EQ(s.ids.front(), *m_->config.bosTokenId);
    // Weights: a run of zeros (BOS + prompt) then ones (the continuation).
    auto firstOne = std::find(s.weights.begin(), s.weights.end(), 1.0f);
    ASSERT_NE(firstOne, s.weights.end());
    EXPECT_TRUE(std::all_of(s.weights.begin(), firstOne, [](float w) { return w == 0.0f; }));
    EXPECT_TRUE(std::all_of(firstOne, s.weights.end(), [](float w) { return w == 1.0f; }));
    EXPECT_LE(s.weights.end() - firstOne, 12);
    // The continuation is the dense model's greedy continuation of the prompt.
    std::vector<TokenId> prompt(s.ids.begin(), s.ids.begin() + (firstOne - s.weights.begin()));
    std::vector<TokenId> cont(s.ids.begin() + (firstOne - s.weights.begin()), s.ids.end());
    GenerationOptions g;
    g.maxNewTokens = static_cast<int64_t>(cont.size());
    EXPECT_EQ(generate(*m_->model, prompt, g), cont);
  }
}

// The teacher-forced shortcut: block 0's Hessians from the decode calibration set equal those accumulated from
// the activations of real KV-cache decode steps (prefill excluded).
TEST_F(Calibration, DecodeHessianEqualsRecordedDecodeSteps) {
  auto prompts = readPrompts(test::sharedPath("data/prompts-python.txt"));
  CalibrationSet set = decodeCalibration(*m_->model, *m_->tokenizer, prompts, decodeOptions(40, 10));
  const LlamaModel& model = *m_->model;

  std::map<LinearGroup, HessianAccumulator> recorded;
  for (const auto& [group, linear] : model.layerLinears(0))
    if (!recorded.count(group)) recorded.emplace(group, HessianAccumulator(linear->inFeatures(), model.options().device));
  for (const auto& s : set.sequences) {
    const int64_t promptLen = std::find(s.weights.begin(), s.weights.end(), 1.0f) - s.weights.begin();
    KVCache cache = model.makeCache(1, static_cast<int64_t>(s.ids.size()));
    auto run = [&](int64_t from, int64_t len, bool record) {
      at::Tensor ids = at::tensor(std::vector<TokenId>(s.ids.begin() + from, s.ids.begin() + from + len),
                                  at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
      LlamaModel::Context ctx = model.prepare(1, len, &cache, nullptr);
      model.block(0, model.embed(ids), ctx, &cache, [&](int64_t, LinearGroup g, const at::Tensor& x) {
        if (record) recorded.at(g).add(x);
      });
      cache.advance(len);
    };
    run(0, promptLen, false);   // prefill: discarded
    for (int64_t t = promptLen; t < static_cast<int64_t>(s.ids.size()); ++t) run(t, 1, true);   // decode steps
  }

  int checked = 0;
  observeHessians(model, {&set}, [&](int64_t layer, LinearGroup g, const std::vector<std::string>&,
                                     const std::vector<const HessianAccumulator*>& h) {
    if (layer != 0) return;
    const HessianAccumulator& want = recorded.at(g);
    EXPECT_EQ(h[0]->samples(), want.samples()) << linearGroupName(g);
    EXPECT_EQ(h[0]->samples(), 40);
    double rel = ((h[0]->sum() - want.sum()).norm() / want.sum().norm()).item<double>();
    EXPECT_LT(rel, 1e-5) << linearGroupName(g);
    ++checked;
  });
  EXPECT_EQ(checked, 4);
}

at::Tensor logitsOf(const LlamaModel& model, const std::vector<TokenId>& ids) {
  return model.forward(at::tensor(ids, at::TensorOptions().dtype(at::kLong)).unsqueeze(0));
}

TEST_F(Calibration, SequentialPassIdentityKeepsLogitsAndVisitsEveryModule) {
  TextCalibrationOptions o;
  o.window = 32;
  o.tokens = 96;
  CalibrationSet set = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  auto probe = m_->promptIds("The history of the United States");
  at::Tensor before = logitsOf(*m_->model, probe);
  std::vector<std::string> visited;
  int progressCalls = 0;
  SequentialPassOptions opts;
  opts.batch = 2;
  opts.progress = [&](const ProgressUpdate&) { ++progressCalls; };
  runSequentialPass(*m_->model, set,
                    [&](const std::string& name, const at::Tensor& w, const HessianAccumulator& h) {
                      visited.push_back(name);
                      EXPECT_EQ(h.columns(), w.size(1)) << name;
                      EXPECT_EQ(h.samples(), 96) << name;
                      return w.clone();   // identity, but installed: forces the recompute path
                    },
                    opts);
  EXPECT_EQ(visited.size(), static_cast<size_t>(7 * m_->config.numLayers));
  EXPECT_EQ(visited.front(), "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(visited.back(), "model.layers.3.mlp.down_proj");
  EXPECT_EQ(progressCalls, m_->config.numLayers);
  at::Tensor after = logitsOf(*m_->model, probe);
  EXPECT_LT(((after - before).norm() / before.norm()).item<double>(), 1e-6);
}

TEST_F(Calibration, SequentialPassInstallsWeightsAndFeedsLaterBlocks) {
  TextCalibrationOptions o;
  o.window = 32;
  o.tokens = 64;
  CalibrationSet set = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  auto probe = m_->promptIds("Once upon a time");
  at::Tensor before = logitsOf(*m_->model, probe);
  // Zero layer 0's down projection: later blocks must see the changed activations (their Hessians change).
  std::map<std::string, double> traces;
  runSequentialPass(*m_->model, set, [&](const std::string& name, const at::Tensor& w, const HessianAccumulator& h) {
    traces[name] = h.sum().trace().item<double>();
    return name == "model.layers.0.mlp.down_proj" ? at::zeros_like(w) : at::Tensor();
  });
  at::Tensor after = logitsOf(*m_->model, probe);
  EXPECT_GT(((after - before).norm() / before.norm()).item<double>(), 1e-3);

  LoadedModel fresh = loadModel(test::sharedPath("models/ref-tiny"), test::testRuntime());
  std::map<std::string, double> denseTraces;
  runSequentialPass(*fresh.model, set, [&](const std::string& name, const at::Tensor&, const HessianAccumulator& h) {
    denseTraces[name] = h.sum().trace().item<double>();
    return at::Tensor();
  });
  EXPECT_DOUBLE_EQ(traces["model.layers.0.self_attn.q_proj"], denseTraces["model.layers.0.self_attn.q_proj"]);
  EXPECT_NE(traces["model.layers.1.self_attn.q_proj"], denseTraces["model.layers.1.self_attn.q_proj"]);
}

TEST_F(Calibration, SequentialPassStopsWhenCancelled) {
  TextCalibrationOptions o;
  o.window = 32;
  o.tokens = 32;
  CalibrationSet set = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  CancelToken cancel;
  SequentialPassOptions opts;
  opts.cancel = &cancel;
  int layersDone = 0;
  opts.progress = [&](const ProgressUpdate&) {
    if (++layersDone == 2) cancel.cancel();
  };
  EXPECT_THROW(runSequentialPass(*m_->model, set, [](auto&&...) { return at::Tensor(); }, opts), Cancelled);
  EXPECT_EQ(layersDone, 2);
}

TEST(CalibrationPrompts, ReadPromptsSkipsBlankLinesAndRefusesEmptyFiles) {
  const std::string dir = test::scratchDir("prompts");
  std::ofstream(dir + "/p.txt") << "first\n\n  \nsecond\r\n";
  EXPECT_EQ(readPrompts(dir + "/p.txt"), (std::vector<std::string>{"first", "second"}));
  std::ofstream(dir + "/empty.txt") << "\n\n";
  EXPECT_THROW(readPrompts(dir + "/empty.txt"), InputError);
  auto p = seededPermutation(10, 3);
  EXPECT_EQ(p, seededPermutation(10, 3));
  EXPECT_NE(p, seededPermutation(10, 4));
  std::sort(p.begin(), p.end());
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i], i);
}

}  // namespace
}  // namespace pareto
