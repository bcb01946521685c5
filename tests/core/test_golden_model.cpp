// The runtime against Hugging Face transformers (float32 compute) on the reference models, and the KV-cache
// decode path against a full forward. Golden values: ../shared/golden/ref-{tiny,small}.json.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "SharedData.h"
#include "TestRuntime.h"
#include "eval/Perplexity.h"
#include "eval/Score.h"
#include "model/Generation.h"
#include "model/LoadedModel.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {
namespace {

using test::reducedPrecision;
using test::testRuntime;

class GoldenModel : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    golden_ = readJsonFile(test::sharedPath("golden/" + GetParam() + ".json"));
    model_ = std::make_unique<LoadedModel>(loadModel(test::sharedPath("models/" + GetParam()), testRuntime()));
  }
  nlohmann::json golden_;
  std::unique_ptr<LoadedModel> model_;
};

TEST_P(GoldenModel, PromptIdsAreBosPlusTokenizedText) {
  for (const auto& p : golden_["prompts"])
    EXPECT_EQ(model_->promptIds(p["text"].get<std::string>()), p["ids"].get<std::vector<TokenId>>()) << p["text"];
}

TEST_P(GoldenModel, ScoreMatchesTransformers) {
  if (reducedPrecision()) GTEST_SKIP() << "logit tolerances are for float32";
  for (const auto& p : golden_["prompts"]) {
    SCOPED_TRACE(p["text"].get<std::string>());
    ScoreResult r = scoreSequence(*model_->model, p["ids"].get<std::vector<TokenId>>());
    const double goldNll = p["nll_sum"].get<double>();
    EXPECT_NEAR(r.nllSum, goldNll, 1e-3 * std::abs(goldNll));
    auto gold = p["last_logits"].get<std::vector<float>>();
    ASSERT_EQ(r.lastLogits.size(0), static_cast<int64_t>(gold.size()));
    at::Tensor g = at::tensor(gold);
    double maxAbs = (r.lastLogits - g).abs().max().item<double>();
    EXPECT_LE(maxAbs, 1e-3) << "max |logit - golden| over the vocabulary";
    auto goldTop = p["last_top10"].get<std::vector<TokenId>>();
    EXPECT_EQ(std::vector<TokenId>(r.lastTop10.begin(), r.lastTop10.begin() + 5),
              std::vector<TokenId>(goldTop.begin(), goldTop.begin() + 5));
  }
}

TEST_P(GoldenModel, Greedy32MatchesTransformers) {
  if (reducedPrecision()) GTEST_SKIP() << "greedy equality is checked in float32";
  for (const auto& p : golden_["prompts"]) {
    SCOPED_TRACE(p["text"].get<std::string>());
    GenerationOptions opts;
    opts.maxNewTokens = 32;
    opts.eosTokenIds = model_->eosTokenIds;
    auto out = generate(*model_->model, p["ids"].get<std::vector<TokenId>>(), opts);
    EXPECT_EQ(out, p["greedy32"].get<std::vector<TokenId>>());
    EXPECT_EQ(model_->tokenizer->decode(out), p["greedy32_text"].get<std::string>());
  }
}

TEST_P(GoldenModel, HeldoutProsePerplexity) {
  const auto& gold = golden_["perplexity"]["heldout-prose.txt"];
  auto ids = model_->tokenizer->encode(readTextFile(test::sharedPath("data/heldout-prose.txt")));
  PerplexityOptions opts;
  opts.window = 512;
  opts.maxWindows = gold["windows"].get<int64_t>();
  PerplexityResult r = computePerplexity(*model_->model, ids, opts);
  EXPECT_EQ(r.windows, gold["windows"].get<int64_t>());
  EXPECT_EQ(r.tokens, gold["tokens"].get<int64_t>());
  const double goldPpl = gold["ppl"].get<double>();
  const double tolerance = reducedPrecision() ? 0.02 : 0.005;
  EXPECT_NEAR(r.ppl, goldPpl, tolerance * goldPpl) << "relative tolerance " << tolerance;
}

// Prefill of a prefix then one-token steps must reproduce the full forward's logits at every position.
TEST_P(GoldenModel, KVCacheDecodeMatchesFullForward) {
  const auto& p = golden_["prompts"][0];
  auto ids = p["ids"].get<std::vector<TokenId>>();
  auto greedy = p["greedy32"].get<std::vector<TokenId>>();
  ids.insert(ids.end(), greedy.begin(), greedy.begin() + 16);
  const LlamaModel& model = *model_->model;
  at::Tensor all = at::tensor(ids, at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
  at::Tensor full = model.forward(all).squeeze(0).to(at::kCPU);

  const int64_t prefix = 5;
  KVCache cache = model.makeCache(1, static_cast<int64_t>(ids.size()));
  at::Tensor pre = model.forward(all.narrow(1, 0, prefix), &cache).squeeze(0).to(at::kCPU);
  std::vector<at::Tensor> rows = {pre};
  for (int64_t t = prefix; t < static_cast<int64_t>(ids.size()); ++t)
    rows.push_back(model.forward(all.narrow(1, t, 1), &cache).squeeze(0).to(at::kCPU));
  at::Tensor incremental = at::cat(rows, 0);
  ASSERT_EQ(cache.length(), static_cast<int64_t>(ids.size()));
  const double rel = ((incremental - full).norm() / full.norm()).item<double>();
  EXPECT_LT(rel, reducedPrecision() ? 2e-2 : 1e-4) << "relative difference of KV-cache logits";
}

INSTANTIATE_TEST_SUITE_P(RefModels, GoldenModel, ::testing::Values("ref-tiny", "ref-small"));

// The stream a front end shows tokens from is the generation itself: step by step it gives generate()'s
// tokens (the transformers-checked greedy ones), the callback sees each as it comes, and it stops at EOS or
// the token budget.
TEST_P(GoldenModel, AGenerationStreamGivesWhatGenerateGives) {
  if (reducedPrecision()) GTEST_SKIP() << "greedy equality is checked in float32";
  const auto& p = golden_["prompts"][0];
  const std::vector<TokenId> prompt = p["ids"].get<std::vector<TokenId>>();
  GenerationOptions opts;
  opts.maxNewTokens = 32;
  GenerationStream stream(*model_->model, prompt, opts);
  int steps = 0;
  while (stream.step()) ++steps;
  EXPECT_EQ(steps, 32);
  EXPECT_TRUE(stream.done());
  EXPECT_FALSE(stream.step());
  EXPECT_EQ(stream.tokens(), p["greedy32"].get<std::vector<TokenId>>());
  EXPECT_GT(stream.decodeSeconds(), 0);
  std::vector<TokenId> seen;
  const auto out = generate(*model_->model, prompt, opts, [&](TokenId t) { seen.push_back(t); });
  EXPECT_EQ(seen, out);
  EXPECT_EQ(out, stream.tokens());
  // An EOS ends the stream after emitting it.
  opts.eosTokenIds = {out.at(3)};
  GenerationStream early(*model_->model, prompt, opts);
  while (early.step()) {
  }
  const auto firstEos = std::find(out.begin(), out.end(), out.at(3));
  EXPECT_EQ(early.tokens(), std::vector<TokenId>(out.begin(), firstEos + 1));
  opts.maxNewTokens = 1 << 30;
  EXPECT_THROW(GenerationStream(*model_->model, prompt, opts), InputError);
}

TEST(Sampling, SameSeedSameTokensDifferentSeedDifferent) {
  PARETO_REQUIRE_SHARED();
  LoadedModel m = loadModel(test::sharedPath("models/ref-tiny"), testRuntime());
  GenerationOptions opts;
  opts.maxNewTokens = 24;
  opts.sampling.greedy = false;
  opts.sampling.temperature = 1.0;
  opts.sampling.topK = 50;
  opts.sampling.topP = 0.95;
  opts.sampling.seed = 7;
  auto prompt = m.promptIds("Once upon a time");
  auto a = generate(*m.model, prompt, opts);
  auto b = generate(*m.model, prompt, opts);
  EXPECT_EQ(a, b);
  opts.sampling.seed = 8;
  auto c = generate(*m.model, prompt, opts);
  EXPECT_NE(a, c);
}

TEST(Sampling, TopKOneIsGreedy) {
  PARETO_REQUIRE_SHARED();
  LoadedModel m = loadModel(test::sharedPath("models/ref-tiny"), testRuntime());
  GenerationOptions greedy;
  greedy.maxNewTokens = 16;
  GenerationOptions topk = greedy;
  topk.sampling.greedy = false;
  topk.sampling.topK = 1;
  topk.sampling.seed = 3;
  auto prompt = m.promptIds("The history of");
  EXPECT_EQ(generate(*m.model, prompt, greedy), generate(*m.model, prompt, topk));
}

TEST(Sampling, StopsAtEos) {
  PARETO_REQUIRE_SHARED();
  LoadedModel m = loadModel(test::sharedPath("models/ref-tiny"), testRuntime());
  GenerationOptions opts;
  opts.maxNewTokens = 20;
  auto prompt = m.promptIds("The history of");
  auto free = generate(*m.model, prompt, opts);
  ASSERT_GE(free.size(), 4u);
  // Declare the fourth greedy token an end-of-sequence token: generation must stop right after it.
  opts.eosTokenIds = {free[3]};
  auto stopped = generate(*m.model, prompt, opts);
  auto firstEos = std::find(free.begin(), free.end(), free[3]);
  EXPECT_EQ(stopped, std::vector<TokenId>(free.begin(), firstEos + 1));
}

TEST(Sampling, RejectsBadOptions) {
  SamplingOptions s;
  s.greedy = false;
  s.temperature = 0;
  EXPECT_THROW(validate(s), InputError);
  s.temperature = 1;
  s.topP = 1.5;
  EXPECT_THROW(validate(s), InputError);
}

}  // namespace
}  // namespace pareto

namespace pareto {
namespace {

// Two prompts of different lengths in one left-padded batch, prefilled and then decoded with the KV cache,
// give the same logits as each prompt run alone.
TEST(BatchLayoutTest, LeftPaddedBatchMatchesSingleSequences) {
  PARETO_REQUIRE_SHARED();
  LoadedModel m = loadModel(test::sharedPath("models/ref-tiny"), testRuntime());
  const LlamaModel& model = *m.model;
  std::vector<std::vector<TokenId>> prompts = {m.promptIds("The history of the United States of America"),
                                               m.promptIds("Once upon")};
  const int64_t L = static_cast<int64_t>(prompts[0].size());
  const int64_t pad = L - static_cast<int64_t>(prompts[1].size());
  ASSERT_GT(pad, 0);
  const int64_t steps = 3;
  std::vector<TokenId> next = {17, 42, 99};   // arbitrary continuation fed to both sequences

  // Batched: [pad tokens | prompt] for the short one.
  std::vector<TokenId> flat = prompts[0];
  flat.insert(flat.end(), pad, 0);
  flat.insert(flat.end(), prompts[1].begin(), prompts[1].end());
  at::Tensor ids = at::tensor(flat, at::TensorOptions().dtype(at::kLong)).view({2, L});
  at::Tensor positions = at::arange(L, at::kLong).repeat({2, 1});
  positions[1] = (positions[1] - pad).clamp_min(0);
  at::Tensor padding = at::zeros({2, L + steps}, at::kBool);
  padding[1].narrow(0, 0, pad).fill_(true);
  KVCache cache = model.makeCache(2, L + steps);
  BatchLayout layout{positions, padding.narrow(1, 0, L)};
  std::vector<at::Tensor> batched = {model.forward(ids, &cache, true, &layout).to(at::kCPU)};
  for (int64_t s = 0; s < steps; ++s) {
    at::Tensor step = at::full({2, 1}, next[s], at::kLong);
    BatchLayout stepLayout{at::stack({at::full({1}, L + s, at::kLong), at::full({1}, L - pad + s, at::kLong)}),
                           padding.narrow(1, 0, L + s + 1)};
    batched.push_back(model.forward(step, &cache, true, &stepLayout).to(at::kCPU));
  }

  for (int b = 0; b < 2; ++b) {
    std::vector<TokenId> seq = prompts[b];
    KVCache single = model.makeCache(1, static_cast<int64_t>(seq.size()) + steps);
    at::Tensor one = at::tensor(seq, at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
    std::vector<at::Tensor> alone = {model.forward(one, &single, true).to(at::kCPU)};
    for (int64_t s = 0; s < steps; ++s)
      alone.push_back(model.forward(at::full({1, 1}, next[s], at::kLong), &single, true).to(at::kCPU));
    for (size_t s = 0; s < alone.size(); ++s) {
      at::Tensor a = alone[s][0], c = batched[s][b];
      EXPECT_LT(((a - c).norm() / a.norm()).item<double>(), reducedPrecision() ? 2e-2 : 1e-5)
          << "sequence " << b << " step " << s;
    }
  }
}

}  // namespace
}  // namespace pareto

namespace pareto {
namespace {

TEST(BatchLayoutTest, BatchedGenerationEqualsOneByOne) {
  PARETO_REQUIRE_SHARED();
  LoadedModel m = loadModel(test::sharedPath("models/ref-tiny"), testRuntime());
  std::vector<std::vector<TokenId>> prompts = {m.promptIds("The history of the United States"),
                                               m.promptIds("def fibonacci(n):"), m.promptIds("Once")};
  for (bool greedy : {true, false}) {
    GenerationOptions opts;
    opts.maxNewTokens = 20;
    opts.eosTokenIds = m.eosTokenIds;
    opts.sampling.greedy = greedy;
    opts.sampling.topK = 40;
    opts.sampling.seed = 11;
    auto batched = generateBatch(*m.model, prompts, opts);
    ASSERT_EQ(batched.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerationOptions one = opts;
      one.sampling.seed = opts.sampling.seed + i;
      EXPECT_EQ(batched[i], generate(*m.model, prompts[i], one)) << "prompt " << i << (greedy ? " greedy" : " sampled");
    }
  }
}

}  // namespace
}  // namespace pareto
