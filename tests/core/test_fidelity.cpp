// Comparing a compressed model with its dense reference: decode fidelity and activation drift, on ref-tiny
// against itself and against copies pruned in memory.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "SharedData.h"
#include "analysis/ActivationDrift.h"
#include "eval/Continuations.h"
#include "eval/DecodeFidelity.h"
#include "model/Generation.h"
#include "model/LoadedModel.h"
#include "util/Error.h"

namespace pareto {
namespace {

// Zeroes the smallest-magnitude `sparsity` fraction of every block linear's weight.
void magnitudePrune(LlamaModel& model, double sparsity) {
  for (int64_t l = 0; l < model.numLayers(); ++l)
    for (auto& [group, linear] : model.layerLinears(l)) {
      const at::Tensor& w = linear->weight();
      const int64_t k = static_cast<int64_t>(sparsity * double(w.numel()));
      at::Tensor threshold = std::get<0>(w.abs().flatten().kthvalue(k));
      linear->setWeight(w.masked_fill(w.abs() <= threshold, 0));
    }
}

class Fidelity : public ::testing::Test {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    dense_ = load();
    std::ifstream in(test::sharedPath("data/prompts-prose.txt"));
    std::string line;
    while (prompts_.size() < 6 && std::getline(in, line))
      if (!line.empty()) prompts_.push_back(dense_->promptIds(line));
    ASSERT_EQ(prompts_.size(), 6u);
  }
  static std::unique_ptr<LoadedModel> load() {
    return std::make_unique<LoadedModel>(loadModel(test::sharedPath("models/ref-tiny"), RuntimeOptions{}));
  }
  std::unique_ptr<LoadedModel> pruned(double sparsity) const {
    auto m = load();
    magnitudePrune(*m->model, sparsity);
    return m;
  }
  DecodeFidelityOptions fidelityOptions() const {
    DecodeFidelityOptions o;
    o.maxNewTokens = 24;
    o.batch = 4;   // one full and one partial batch
    o.eosTokenIds = dense_->eosTokenIds;
    return o;
  }
  ActivationDriftOptions driftOptions() const {
    ActivationDriftOptions o;
    o.steps = 24;
    o.batch = 4;
    o.eosTokenIds = dense_->eosTokenIds;
    return o;
  }
  std::unique_ptr<LoadedModel> dense_;
  std::vector<std::vector<TokenId>> prompts_;
};

TEST_F(Fidelity, ModelAgainstItselfIsExact) {
  auto copy = load();
  FidelityResult r = decodeFidelity(*dense_->model, *copy->model, prompts_, fidelityOptions());
  EXPECT_EQ(r.prompts, 6);
  EXPECT_EQ(r.decodeNll, r.denseNll);
  EXPECT_GT(r.denseNll, 0.0);
  EXPECT_EQ(r.top1Agreement, 1.0);
  EXPECT_EQ(r.klMean, 0.0);
  EXPECT_EQ(r.klP99, 0.0);
  EXPECT_EQ(r.fullMatchFraction, 1.0);
  int64_t tokens = 0;
  ASSERT_EQ(r.perPrompt.size(), 6u);
  for (const auto& p : r.perPrompt) {
    EXPECT_EQ(p.sharedPrefix, p.denseTokens);
    EXPECT_EQ(p.compressedTokens, p.denseTokens);
    EXPECT_LE(p.denseTokens, 24);
    tokens += p.denseTokens;
  }
  EXPECT_EQ(r.continuationTokens, tokens);
  EXPECT_EQ(r.sharedPrefixMean, double(tokens) / 6);
}

TEST_F(Fidelity, PruningLowersFidelityMoreWhenHeavier) {
  auto light = pruned(0.3), heavy = pruned(0.6);
  FidelityResult a = decodeFidelity(*dense_->model, *light->model, prompts_, fidelityOptions());
  FidelityResult b = decodeFidelity(*dense_->model, *heavy->model, prompts_, fidelityOptions());
  EXPECT_EQ(a.denseNll, b.denseNll);   // the reference does not depend on the compressed model
  EXPECT_GT(a.decodeNll, a.denseNll);
  EXPECT_LT(a.top1Agreement, 1.0);
  EXPECT_GT(b.decodeNll, a.decodeNll);
  EXPECT_LT(b.top1Agreement, a.top1Agreement);
  EXPECT_LE(b.sharedPrefixMean, a.sharedPrefixMean);
  EXPECT_GT(a.klMean, 0.0);
  EXPECT_GT(b.klMean, a.klMean);
  EXPECT_GE(a.klP99, a.klMean);
  // The per-prompt sums make up the mean over every continuation token.
  double klSum = 0;
  for (const auto& p : a.perPrompt) klSum += p.klSum;
  EXPECT_NEAR(klSum / double(a.continuationTokens), a.klMean, 1e-12);
  EXPECT_LE(a.sharedPrefixMin, a.sharedPrefixMedian);
  EXPECT_LE(a.sharedPrefixMedian, a.sharedPrefixMax);
}

TEST_F(Fidelity, BatchingDoesNotChangeTheResult) {
  auto light = pruned(0.3);
  FidelityResult a = decodeFidelity(*dense_->model, *light->model, prompts_, fidelityOptions());
  DecodeFidelityOptions one = fidelityOptions();
  one.batch = 1;
  FidelityResult b = decodeFidelity(*dense_->model, *light->model, prompts_, one);
  EXPECT_NEAR(a.decodeNll, b.decodeNll, 1e-4);
  EXPECT_NEAR(a.denseNll, b.denseNll, 1e-4);
  EXPECT_EQ(a.continuationTokens, b.continuationTokens);
}

// Decode fidelity and activation drift handed the same continuations (generated once, eval/Continuations.h)
// give exactly the numbers each gives generating its own; continuations for other settings are refused.
TEST_F(Fidelity, SharedContinuationsGiveTheNumbersOfSeparateRuns) {
  auto light = pruned(0.5);
  const FidelityResult fidelity = decodeFidelity(*dense_->model, *light->model, prompts_, fidelityOptions());
  const ActivationDriftResult drift = activationDrift(*dense_->model, *light->model, prompts_, driftOptions());

  const Continuations shared = generateContinuations(*dense_->model, *light->model, prompts_, 24,
                                                     dense_->eosTokenIds, 4);
  ASSERT_EQ(shared.dense.size(), prompts_.size());
  DecodeFidelityOptions f = fidelityOptions();
  f.continuations = &shared;
  ActivationDriftOptions d = driftOptions();
  d.continuations = &shared;
  const FidelityResult sharedFidelity = decodeFidelity(*dense_->model, *light->model, prompts_, f);
  const ActivationDriftResult sharedDrift = activationDrift(*dense_->model, *light->model, prompts_, d);

  EXPECT_EQ(sharedFidelity.decodeNll, fidelity.decodeNll);
  EXPECT_EQ(sharedFidelity.denseNll, fidelity.denseNll);
  EXPECT_EQ(sharedFidelity.top1Agreement, fidelity.top1Agreement);
  EXPECT_EQ(sharedFidelity.sharedPrefixMean, fidelity.sharedPrefixMean);
  EXPECT_EQ(sharedFidelity.continuationTokens, fidelity.continuationTokens);
  EXPECT_LT(fidelity.top1Agreement, 1.0);   // the pruned model does disagree: the comparison means something
  for (const auto* curves : {&drift.free, &drift.forced}) {
    const DriftCurves& other = curves == &drift.free ? sharedDrift.free : sharedDrift.forced;
    EXPECT_EQ(other.counts, curves->counts);
    ASSERT_EQ(other.drift.size(), curves->drift.size());
    for (size_t l = 0; l < curves->drift.size(); ++l)
      for (size_t t = 0; t < curves->drift[l].size(); ++t) {
        if (std::isnan(curves->drift[l][t])) {
          EXPECT_TRUE(std::isnan(other.drift[l][t]));
          continue;
        }
        EXPECT_EQ(other.drift[l][t], curves->drift[l][t]) << "layer " << l << " step " << t;
      }
  }

  DecodeFidelityOptions fewer = f;
  fewer.maxNewTokens = 12;
  EXPECT_THROW(decodeFidelity(*dense_->model, *light->model, prompts_, fewer), Error);
  DecodeFidelityOptions rebatched = f;
  rebatched.batch = 2;
  EXPECT_THROW(decodeFidelity(*dense_->model, *light->model, prompts_, rebatched), Error);
}

// The teacher-forced shortcut: the decode NLL and the KL to the dense model equal those of a real KV-cache decode
// loop in which the compressed model is fed the dense model's tokens one step at a time.
TEST_F(Fidelity, TeacherForcedNllEqualsCacheDecodeLoop) {
  auto light = pruned(0.5);
  const std::vector<TokenId>& prompt = prompts_[2];
  GenerationOptions g;
  g.maxNewTokens = 20;
  g.eosTokenIds = dense_->eosTokenIds;
  std::vector<TokenId> cont = generate(*dense_->model, prompt, g);
  ASSERT_FALSE(cont.empty());

  const LlamaModel& model = *light->model;
  KVCache cache = model.makeCache(1, static_cast<int64_t>(prompt.size() + cont.size()));
  auto ids = [](const std::vector<TokenId>& v) {
    return at::tensor(v, at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
  };
  // The dense model steps along with its own cache: KL(P_dense ‖ P_compressed) at each step, in float64 by
  // LibTorch's kl_div.
  const LlamaModel& reference = *dense_->model;
  KVCache denseCache = reference.makeCache(1, static_cast<int64_t>(prompt.size() + cont.size()));
  at::Tensor logits = model.forward(ids(prompt), &cache, /*lastOnly=*/true);
  at::Tensor denseLogits = reference.forward(ids(prompt), &denseCache, /*lastOnly=*/true);
  double nll = 0, kl = 0;
  int64_t agree = 0;
  for (size_t j = 0; j < cont.size(); ++j) {
    at::Tensor row = logits.reshape({-1}).to(at::kDouble);
    nll += (at::logsumexp(row, {0}) - row[cont[j]]).item<double>();
    agree += row.argmax().item<int64_t>() == cont[j] ? 1 : 0;
    kl += at::kl_div(at::log_softmax(row, 0), at::log_softmax(denseLogits.reshape({-1}).to(at::kDouble), 0),
                     at::Reduction::Sum, /*log_target=*/true)
              .item<double>();
    if (j + 1 < cont.size()) {
      logits = model.forward(ids({cont[j]}), &cache, /*lastOnly=*/true);
      denseLogits = reference.forward(ids({cont[j]}), &denseCache, /*lastOnly=*/true);
    }
  }

  DecodeFidelityOptions o = fidelityOptions();
  o.maxNewTokens = 20;
  FidelityResult r = decodeFidelity(*dense_->model, model, {prompt}, o);
  ASSERT_EQ(r.continuationTokens, static_cast<int64_t>(cont.size()));
  EXPECT_NEAR(r.perPrompt[0].nllSum, nll, 1e-3);
  EXPECT_NEAR(r.decodeNll, nll / double(cont.size()), 1e-4);
  EXPECT_EQ(r.perPrompt[0].agreements, agree);
  EXPECT_GT(kl, 0.0);
  EXPECT_NEAR(r.perPrompt[0].klSum, kl, 1e-3);
  EXPECT_NEAR(r.klMean, kl / double(cont.size()), 1e-4);
}

TEST_F(Fidelity, RefusesModelsOfDifferentShapeAndBadOptions) {
  LoadedModel small = loadModel(test::sharedPath("models/ref-small"), RuntimeOptions{});
  EXPECT_THROW(decodeFidelity(*dense_->model, *small.model, prompts_, fidelityOptions()), InputError);
  EXPECT_THROW(activationDrift(*dense_->model, *small.model, prompts_, driftOptions()), InputError);
  DecodeFidelityOptions o = fidelityOptions();
  o.maxNewTokens = 0;
  EXPECT_THROW(decodeFidelity(*dense_->model, *dense_->model, prompts_, o), InputError);
  EXPECT_THROW(decodeFidelity(*dense_->model, *dense_->model, {}, fidelityOptions()), InputError);
}

TEST(DriftCurveSummary, PlateauIsTheLastQuarterAndSettlingTheFirstStepAt90Percent) {
  // 16 steps: the last quarter (4 steps) averages 1.0; 0.9 is first reached at step 6.
  std::vector<double> curve = {0.0, 0.2, 0.4, 0.6, 0.8, 0.85, 0.9, 0.95, 1.0, 1.0, 1.0, 1.0, 0.9, 1.1, 0.95, 1.05};
  DriftCurveSummary s = summarizeDriftCurve(curve);
  EXPECT_DOUBLE_EQ(s.plateau, 1.0);
  EXPECT_EQ(s.stepsTo90, 6);
  // Fewer than 4 steps: the plateau is the last step.
  s = summarizeDriftCurve({0.1, 0.5, 0.4});
  EXPECT_DOUBLE_EQ(s.plateau, 0.4);
  EXPECT_EQ(s.stepsTo90, 1);
  // 7 steps: the last quarter rounds down to 1 step.
  s = summarizeDriftCurve({0, 0, 0, 0, 0, 2, 4});
  EXPECT_DOUBLE_EQ(s.plateau, 4.0);
  EXPECT_EQ(s.stepsTo90, 6);
  s = summarizeDriftCurve({0, 0, 0});
  EXPECT_EQ(s.plateau, 0.0);
  EXPECT_EQ(s.stepsTo90, 0);
  s = summarizeDriftCurve({});
  EXPECT_TRUE(std::isnan(s.plateau));
  EXPECT_EQ(s.stepsTo90, -1);
}

TEST_F(Fidelity, DriftOfAModelAgainstItselfIsZero) {
  auto copy = load();
  ActivationDriftResult r = activationDrift(*dense_->model, *copy->model, prompts_, driftOptions());
  EXPECT_EQ(r.layers, dense_->model->numLayers() + 1);
  EXPECT_EQ(r.steps, 24);
  EXPECT_EQ(r.prompts, 6);
  EXPECT_EQ(r.free.counts, r.forced.counts);
  EXPECT_GT(r.free.counts[0], 0);
  for (const DriftCurves* c : {&r.free, &r.forced}) {
    ASSERT_EQ(c->drift.size(), static_cast<size_t>(r.layers));
    for (const auto& row : c->drift) {
      ASSERT_EQ(row.size(), 24u);
      for (size_t t = 0; t < row.size(); ++t)
        if (c->counts[t] > 0) EXPECT_EQ(row[t], 0.0);
    }
    for (const auto& s : c->summary) {
      EXPECT_EQ(s.plateau, 0.0);
      EXPECT_EQ(s.stepsTo90, 0);
    }
  }
}

TEST_F(Fidelity, DriftOfAPrunedModelGrowsWhenItRunsFree) {
  auto light = pruned(0.5);
  ActivationDriftResult r = activationDrift(*dense_->model, *light->model, prompts_, driftOptions());
  for (size_t t = 0; t < 24; ++t) EXPECT_GE(r.forced.counts[t], r.free.counts[t]);
  // Only the linears were pruned, so teacher-forced embeddings agree exactly.
  for (size_t t = 0; t < 24; ++t)
    if (r.forced.counts[t] > 0) EXPECT_EQ(r.forced.drift[0][t], 0.0);
  double freeLate = 0, forcedLate = 0;
  int64_t n = 0;
  for (size_t l = 1; l < static_cast<size_t>(r.layers); ++l) {
    EXPECT_GT(r.forced.summary[l].plateau, 0.0) << "layer " << l;
    EXPECT_GT(r.free.summary[l].plateau, 0.0) << "layer " << l;
    for (size_t t = 18; t < 24; ++t)
      if (r.free.counts[t] > 0) {
        freeLate += r.free.drift[l][t];
        forcedLate += r.forced.drift[l][t];
        ++n;
      }
  }
  ASSERT_GT(n, 0);
  EXPECT_GE(freeLate, forcedLate);
}

// The step definition: step t is the decode forward that consumes token t at position promptLen + t. Recorded
// here with real KV-cache decode steps through both models fed the dense tokens (the forced variant).
TEST_F(Fidelity, ForcedDriftEqualsCacheDecodeSteps) {
  auto light = pruned(0.5);
  const std::vector<TokenId>& prompt = prompts_[1];
  const int64_t steps = 12;
  GenerationOptions g;
  g.maxNewTokens = steps;
  g.eosTokenIds = dense_->eosTokenIds;
  std::vector<TokenId> cont = generate(*dense_->model, prompt, g);
  ASSERT_EQ(static_cast<int64_t>(cont.size()), steps) << "pick a prompt the model does not end early";

  const LlamaModel& d = *dense_->model;
  const LlamaModel& c = *light->model;
  const int64_t L = d.numLayers();
  auto ids = [](const std::vector<TokenId>& v) {
    return at::tensor(v, at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
  };
  // Runs one forward through the blocks and returns each row's hidden state at the last position.
  auto layerInputs = [&](const LlamaModel& model, KVCache& cache, const std::vector<TokenId>& tokens) {
    const int64_t T = static_cast<int64_t>(tokens.size());
    LlamaModel::Context ctx = model.prepare(1, T, &cache, nullptr);
    at::Tensor x = model.embed(ids(tokens));
    std::vector<at::Tensor> out{x[0][T - 1]};
    for (int64_t l = 0; l < L; ++l) {
      x = model.block(l, x, ctx, &cache);
      out.push_back(x[0][T - 1]);
    }
    cache.advance(T);
    return out;
  };
  KVCache dc = d.makeCache(1, static_cast<int64_t>(prompt.size()) + steps);
  KVCache cc = c.makeCache(1, static_cast<int64_t>(prompt.size()) + steps);
  layerInputs(d, dc, prompt);   // the prefill is not a step
  layerInputs(c, cc, prompt);
  std::vector<std::vector<double>> want(static_cast<size_t>(L + 1));
  for (int64_t t = 0; t < steps; ++t) {
    auto hd = layerInputs(d, dc, {cont[t]});
    auto hc = layerInputs(c, cc, {cont[t]});
    for (int64_t l = 0; l <= L; ++l)
      want[l].push_back(((hc[l] - hd[l]).norm() / hd[l].norm()).item<double>());
  }

  ActivationDriftOptions o = driftOptions();
  o.steps = steps;
  ActivationDriftResult r = activationDrift(d, c, {prompt}, o);
  for (int64_t l = 0; l <= L; ++l)
    for (int64_t t = 0; t < steps; ++t) EXPECT_NEAR(r.forced.drift[l][t], want[l][t], 1e-4) << l << "," << t;
}

}  // namespace
}  // namespace pareto
