// KL divergence to the dense model (eval/KlDivergence.h): the per-position values against float64 references,
// llama.cpp's percentile, perplexity's window-by-window comparison of two models, and `pareto-cli perplexity
// --dense`.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "SharedData.h"
#include "eval/KlDivergence.h"
#include "eval/Perplexity.h"
#include "model/LoadedModel.h"
#include "util/Error.h"

namespace pareto {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(KlDivergence, ADistributionAgainstItselfIsExactlyZero) {
  at::manual_seed(1);
  at::Tensor logits = at::randn({9, 300}) * 4;
  at::Tensor kl = tokenKlDivergence(logits, logits.clone());
  ASSERT_EQ(kl.numel(), 9);
  EXPECT_EQ(kl.abs().max().item<double>(), 0.0);
}

TEST(KlDivergence, MatchesHandComputedValues) {
  // p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4): KL(p‖q) = ½ ln 2 + ¼ ln ½ + 0 = ¼ ln 2.
  // r = (0.7, 0.2, 0.1), s = (0.1, 0.2, 0.7): KL(r‖s) = 0.7 ln 7 + 0 + 0.1 ln(1/7) = 0.6 ln 7.
  // Logits are log-probabilities plus a per-row constant, which softmax removes.
  const std::vector<double> p = {0.5, 0.25, 0.25}, q = {0.25, 0.5, 0.25}, r = {0.7, 0.2, 0.1}, s = {0.1, 0.2, 0.7};
  auto logits = [](std::vector<double> a, std::vector<double> b, double shift) {
    at::Tensor t = at::tensor({a[0], a[1], a[2], b[0], b[1], b[2]}, at::TensorOptions().dtype(at::kDouble));
    return (t.log() + shift).view({2, 3}).to(at::kFloat);
  };
  at::Tensor kl = tokenKlDivergence(logits(p, r, 3.0), logits(q, s, -1.5));
  EXPECT_NEAR(kl[0].item<double>(), 0.25 * std::log(2.0), 1e-7);
  EXPECT_NEAR(kl[1].item<double>(), 0.6 * std::log(7.0), 1e-7);
  // Both pairs above are symmetric; the direction, KL(dense ‖ model), shows on an asymmetric pair:
  // KL((0.9, 0.1) ‖ (0.5, 0.5)) = 0.9 ln 1.8 + 0.1 ln 0.2, KL((0.5, 0.5) ‖ (0.9, 0.1)) = ½ ln(5/9) + ½ ln 5.
  at::Tensor a = at::tensor({0.9, 0.1}).log().view({1, 2}), b = at::tensor({0.5, 0.5}).log().view({1, 2});
  EXPECT_NEAR(tokenKlDivergence(a, b).item<double>(), 0.9 * std::log(1.8) + 0.1 * std::log(0.2), 1e-7);
  EXPECT_NEAR(tokenKlDivergence(b, a).item<double>(), 0.5 * std::log(5.0 / 9.0) + 0.5 * std::log(5.0), 1e-7);
}

TEST(KlDivergence, PercentileIsLlamaCppsLinearInterpolation) {
  // 11 values 0..10: the 99th percentile sits at 0.99 · 10 = 9.9, between 9 and 10.
  std::vector<double> sorted;
  for (int i = 0; i <= 10; ++i) sorted.push_back(i);
  EXPECT_DOUBLE_EQ(percentileOfSorted(sorted, 0.99), 9.9);
  EXPECT_DOUBLE_EQ(percentileOfSorted(sorted, 0.5), 5.0);
  EXPECT_DOUBLE_EQ(percentileOfSorted(sorted, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(percentileOfSorted(sorted, 1.0), 10.0);
  EXPECT_DOUBLE_EQ(percentileOfSorted({4.0}, 0.99), 4.0);
  EXPECT_THROW(percentileOfSorted({}, 0.99), Error);
  // 201 values: position 0.99 · 200 = 198 exactly, the 199th smallest. The accumulator sorts what it was given in
  // any order, across batches.
  KlAccumulator acc;
  std::vector<double> values;
  for (int i = 0; i <= 200; ++i) values.push_back(double((i * 37) % 201) / 100.0);
  acc.add(at::tensor(std::vector<double>(values.begin(), values.begin() + 50), at::TensorOptions().dtype(at::kDouble)));
  acc.add(at::tensor(std::vector<double>(values.begin() + 50, values.end()), at::TensorOptions().dtype(at::kDouble)));
  const KlDivergenceSummary sum = acc.summary();
  EXPECT_EQ(sum.positions, 201);
  EXPECT_DOUBLE_EQ(sum.p99, 1.98);
  EXPECT_NEAR(sum.mean, 1.0, 1e-12);   // 0.00 .. 2.00 in steps of 0.01
  EXPECT_THROW(KlAccumulator().summary(), Error);
}

class PerplexityKl : public ::testing::Test {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    dense_ = load();
    ids_ = encodeTextFile(*dense_->tokenizer, test::sharedPath("data/heldout-prose.txt"), false);
    opts_.window = 64;
    opts_.maxWindows = 5;
    opts_.batch = 2;   // two full batches and a partial one
  }
  static std::unique_ptr<LoadedModel> load() {
    return std::make_unique<LoadedModel>(loadModel(test::sharedPath("models/ref-tiny"), RuntimeOptions{}));
  }
  std::unique_ptr<LoadedModel> dense_;
  std::vector<TokenId> ids_;
  PerplexityOptions opts_;
};

TEST_F(PerplexityKl, AModelAgainstItselfHasZeroKlAndItsOwnPerplexity) {
  auto copy = load();
  PerplexityOptions o = opts_;
  o.dense = dense_->model.get();
  const PerplexityResult r = computePerplexity(*copy->model, ids_, o);
  ASSERT_TRUE(r.klToDense.has_value());
  EXPECT_EQ(r.klToDense->positions, r.scoredTokens);
  EXPECT_EQ(r.klToDense->mean, 0.0);
  EXPECT_EQ(r.klToDense->p99, 0.0);
  EXPECT_EQ(*r.densePpl, r.ppl);
  // Without the dense model: the same perplexity, and no KL.
  const PerplexityResult alone = computePerplexity(*copy->model, ids_, opts_);
  EXPECT_EQ(alone.ppl, r.ppl);
  EXPECT_FALSE(alone.klToDense.has_value());
}

TEST_F(PerplexityKl, KlToAPerturbedModelMatchesAFloat64Reference) {
  auto perturbed = load();
  at::manual_seed(7);
  auto linears = perturbed->model->layerLinears(1);
  ASSERT_FALSE(linears.empty());
  const at::Tensor& w = linears.front().second->weight();
  linears.front().second->setWeight(w + 0.05 * at::randn(w.sizes(), w.options()));

  PerplexityOptions o = opts_;
  o.dense = dense_->model.get();
  const PerplexityResult r = computePerplexity(*perturbed->model, ids_, o);
  ASSERT_TRUE(r.klToDense.has_value());

  // The reference: each window's logits from both models, then LibTorch's own kl_div in float64 over the W-1
  // predictions, the mean, and at::quantile (linear interpolation, the same rule as llama.cpp's).
  const int64_t W = o.window, windows = r.windows;
  std::vector<at::Tensor> perPosition;
  for (int64_t i = 0; i < windows; ++i) {
    at::Tensor ids = at::tensor(at::ArrayRef<int64_t>(ids_.data() + i * W, W), at::TensorOptions().dtype(at::kLong))
                         .unsqueeze(0);
    at::Tensor logP = at::log_softmax(dense_->model->forward(ids)[0].narrow(0, 0, W - 1).to(at::kDouble), -1);
    at::Tensor logQ = at::log_softmax(perturbed->model->forward(ids)[0].narrow(0, 0, W - 1).to(at::kDouble), -1);
    perPosition.push_back(at::kl_div(logQ, logP, at::Reduction::None, /*log_target=*/true).sum(-1));
  }
  at::Tensor all = at::cat(perPosition);
  const double mean = all.mean().item<double>();
  const double p99 = at::quantile(all, 0.99).item<double>();
  EXPECT_GT(mean, 1e-4);
  EXPECT_NEAR(r.klToDense->mean, mean, 1e-9 + 1e-6 * mean);
  EXPECT_NEAR(r.klToDense->p99, p99, 1e-9 + 1e-6 * p99);
  EXPECT_GT(r.klToDense->p99, r.klToDense->mean);
}

TEST_F(PerplexityKl, BatchesDoNotChangeTheKl) {
  auto perturbed = load();
  auto linears = perturbed->model->layerLinears(0);
  const at::Tensor& w = linears.back().second->weight();
  linears.back().second->setWeight(w * 0.9);
  PerplexityOptions one = opts_, many = opts_;
  one.batch = 1;
  many.batch = 5;
  one.dense = many.dense = dense_->model.get();
  const PerplexityResult a = computePerplexity(*perturbed->model, ids_, one);
  const PerplexityResult b = computePerplexity(*perturbed->model, ids_, many);
  // The same windows and positions either way; only float32 rounding may differ, since the BLAS may block a GEMM
  // of 1 window and of 5 differently. A window scored against another window's dense logits would move these KLs
  // (~0.01-0.03) by orders more than the bound.
  EXPECT_NEAR(a.klToDense->mean, b.klToDense->mean, 1e-6);
  EXPECT_NEAR(a.klToDense->p99, b.klToDense->p99, 1e-6);
}

// pareto-cli perplexity --dense, end to end.
using test::RunResult;
RunResult runCli(const std::string& args) { return test::runCli(args + " --no-record"); }

TEST(PerplexityCli, DenseGivesKlMeanAndP99AndRefusesAnotherTokenizer) {
  PARETO_REQUIRE_SHARED();
  const std::string tiny = test::sharedPath("models/ref-tiny"), small = test::sharedPath("models/ref-small");
  const std::string text = test::sharedPath("data/heldout-prose.txt");
  const std::string common = " --text " + text + " --window 64 --max-windows 3 --json";

  // ref-tiny against ref-small: one tokenizer and vocabulary, two different models.
  RunResult r = runCli("perplexity --model " + tiny + " --dense " + small + common);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* k : {"ppl", "windows", "tokens", "window", "kl_mean", "kl_p99", "dense_ppl"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_GT(j["kl_mean"].get<double>(), 0.01);
  EXPECT_GT(j["kl_p99"].get<double>(), j["kl_mean"].get<double>());
  RunResult plain = runCli("perplexity --model " + tiny + common);
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["ppl"], j["ppl"]);
  EXPECT_FALSE(nlohmann::json::parse(plain.out).contains("kl_mean"));
  RunResult small1 = runCli("perplexity --model " + small + common);
  ASSERT_EQ(small1.exitCode, 0) << small1.err;
  EXPECT_EQ(nlohmann::json::parse(small1.out)["ppl"], j["dense_ppl"]);

  RunResult self = runCli("perplexity --model " + tiny + " --dense " + tiny + common);
  ASSERT_EQ(self.exitCode, 0) << self.err;
  EXPECT_EQ(nlohmann::json::parse(self.out)["kl_mean"].get<double>(), 0.0);

  // A copy of ref-tiny whose tokenizer maps two common tokens to each other's ids: the same vocabulary size,
  // other token windows. Refused, naming both folders.
  const std::string other = test::scratchDir("perplexity-kl-other-tokenizer");
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json", "tokenizer_config.json"})
    if (fs::exists(tiny + "/" + f)) fs::copy_file(tiny + "/" + f, other + "/" + f, fs::copy_options::overwrite_existing);
  nlohmann::json tok = nlohmann::json::parse(std::ifstream(tiny + "/tokenizer.json"));
  auto& vocab = tok["model"]["vocab"];
  const nlohmann::json e = vocab["e"], t = vocab["t"];
  vocab["e"] = t;
  vocab["t"] = e;
  std::ofstream(other + "/tokenizer.json") << tok.dump();
  RunResult refused = runCli("perplexity --model " + other + " --dense " + tiny + common);
  EXPECT_EQ(refused.exitCode, 2) << refused.out;
  EXPECT_THAT(refused.err, HasSubstr(other));
  EXPECT_THAT(refused.err, HasSubstr(tiny));
  EXPECT_THAT(refused.err, HasSubstr("tokenizer encodes"));
}

}  // namespace
}  // namespace pareto
