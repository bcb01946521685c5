// Magnitude, Wanda and SparseGPT obey their sparsity patterns exactly, choose what their scores say, and reject
// bad input naming the module.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "InputErrors.h"
#include "calib/HessianAccumulator.h"
#include "compress/MagnitudePrune.h"
#include "compress/SparseGpt.h"
#include "compress/SparsityPattern.h"
#include "compress/WandaPrune.h"
#include "util/Error.h"

namespace pareto {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

struct Problem {
  at::Tensor weight;   // [rows, cols] float32, no zeros
  at::Tensor inputs;   // [samples, cols]
  at::Tensor hessian;  // inputsᵀ inputs
};

// Inputs with log-normal per-column scales, so that Wanda's and SparseGPT's scores differ from |W|.
Problem randomProblem(int64_t rows, int64_t cols, int64_t samples, uint64_t seed) {
  at::manual_seed(seed);
  Problem p;
  p.weight = at::randn({rows, cols});
  p.inputs = at::randn({samples, cols}) * at::exp(at::randn({cols})).unsqueeze(0);
  p.hessian = at::matmul(p.inputs.t(), p.inputs);
  return p;
}

using Pruner = std::function<PruneResult(const Problem&, const SparsityPattern&)>;

struct Method {
  std::string name;
  Pruner prune;
};

std::vector<Method> allMethods() {
  return {
      {"magnitude", [](const Problem& p, const SparsityPattern& s) { return magnitudePrune(p.weight, s, "m"); }},
      {"wanda",
       [](const Problem& p, const SparsityPattern& s) {
         return wandaPrune(p.weight, wandaInputNorms(p.hessian), s, "m");
       }},
      {"sparsegpt",
       [](const Problem& p, const SparsityPattern& s) { return sparseGptPrune(p.weight, p.hessian, s, {}, "m").pruned; }},
  };
}

// Kept-per-group counts [rows, cols/m] of a bool or numeric tensor (nonzero = kept).
at::Tensor perGroup(const at::Tensor& t, int m) {
  return (t != 0).reshape({t.size(0), t.size(1) / m, m}).sum(-1);
}

TEST(Pruning, EveryNMPatternKeepsExactlyNPerGroupForEveryMethod) {
  const Problem p = randomProblem(24, 256, 512, 1);
  ASSERT_TRUE((p.weight != 0).all().item<bool>());
  for (const char* text : {"1:4", "2:4", "4:8", "8:16", "16:32", "2:8", "1:2", "31:32"}) {
    const SparsityPattern pattern = SparsityPattern::parse(text);
    for (const Method& method : allMethods()) {
      SCOPED_TRACE(method.name + " " + text);
      const PruneResult r = method.prune(p, pattern);
      ASSERT_EQ(r.mask.scalar_type(), at::kBool);
      ASSERT_EQ(r.mask.sizes(), p.weight.sizes());
      ASSERT_EQ(r.weight.sizes(), p.weight.sizes());
      EXPECT_TRUE((perGroup(r.mask, pattern.m()) == pattern.n()).all().item<bool>());
      EXPECT_TRUE((perGroup(r.weight, pattern.m()) == pattern.n()).all().item<bool>());
      EXPECT_TRUE((r.weight.masked_select(r.mask.logical_not()) == 0).all().item<bool>());
    }
  }
}

TEST(Pruning, UnstructuredHitsTheSparsity) {
  const Problem p = randomProblem(32, 320, 512, 2);
  for (double s : {0.0, 0.3, 0.5, 0.7, 0.9}) {
    const SparsityPattern pattern = SparsityPattern::unstructured(s);
    for (const Method& method : allMethods()) {
      SCOPED_TRACE(method.name + " " + pattern.label());
      const PruneResult r = method.prune(p, pattern);
      const int64_t removed = r.mask.logical_not().sum().item<int64_t>();
      // SparseGPT rounds per block of 128 columns (3 blocks here), the others once or per row.
      EXPECT_NEAR(double(removed), s * p.weight.numel(), 3.0 * 32) << removed;
      EXPECT_EQ(r.weight.eq(0).sum().item<int64_t>(), removed);
    }
  }
}

TEST(MagnitudePrune, RemovesTheSmallestOverTheWholeTensor) {
  const Problem p = randomProblem(16, 64, 8, 3);
  const PruneResult r = magnitudePrune(p.weight, SparsityPattern::unstructured(0.3));
  EXPECT_EQ(r.mask.logical_not().sum().item<int64_t>(), int64_t(std::floor(0.3 * 16 * 64 + 1e-9)));
  const at::Tensor magnitude = p.weight.abs();
  EXPECT_LE(magnitude.masked_select(r.mask.logical_not()).max().item<float>(),
            magnitude.masked_select(r.mask).min().item<float>());
  EXPECT_TRUE(at::equal(r.weight.masked_select(r.mask), p.weight.masked_select(r.mask)));
  // Rows lose different counts: the ranking is global, not per row.
  const at::Tensor perRow = r.mask.logical_not().sum(1);
  EXPECT_GT(perRow.max().item<int64_t>(), perRow.min().item<int64_t>());
}

TEST(MagnitudePrune, NMKeepsTheLargestOfEachGroup) {
  const Problem p = randomProblem(16, 64, 8, 4);
  const PruneResult r = magnitudePrune(p.weight, SparsityPattern::nm(2, 8));
  const at::Tensor groups = p.weight.abs().reshape({16, 8, 8});
  const at::Tensor keep = r.mask.reshape({16, 8, 8});
  const at::Tensor minKept = groups.masked_fill(keep.logical_not(), std::numeric_limits<float>::infinity()).amin(-1);
  const at::Tensor maxRemoved = groups.masked_fill(keep, -1).amax(-1);
  EXPECT_TRUE((minKept >= maxRemoved).all().item<bool>());
}

TEST(MagnitudePrune, KeepsDtypeAndNeverOverPrunesOnTies) {
  // Every weight equal: a "<= threshold" rule would remove all of them.
  const at::Tensor w = at::ones({8, 32}, at::kHalf);
  const PruneResult r = magnitudePrune(w, SparsityPattern::unstructured(0.25));
  EXPECT_EQ(r.weight.scalar_type(), at::kHalf);
  EXPECT_EQ(r.mask.logical_not().sum().item<int64_t>(), 64);
  const PruneResult nm = magnitudePrune(w.to(at::kBFloat16), SparsityPattern::nm(2, 4));
  EXPECT_EQ(nm.weight.scalar_type(), at::kBFloat16);
  EXPECT_TRUE((perGroup(nm.mask, 4) == 2).all().item<bool>());
}

TEST(WandaPrune, RanksWithinEachRowByWeightTimesInputNorm) {
  const Problem p = randomProblem(16, 64, 256, 5);
  const at::Tensor norms = wandaInputNorms(p.hessian);
  const PruneResult r = wandaPrune(p.weight, norms, SparsityPattern::unstructured(0.5));
  EXPECT_TRUE((r.mask.logical_not().sum(1) == 32).all().item<bool>());
  const at::Tensor scores = p.weight.abs() * norms.unsqueeze(0);
  const at::Tensor minKept = scores.masked_fill(r.mask.logical_not(), std::numeric_limits<float>::infinity()).amin(1);
  const at::Tensor maxRemoved = scores.masked_fill(r.mask, -1).amax(1);
  EXPECT_TRUE((minKept >= maxRemoved).all().item<bool>());
  // The input norms matter: with these scales the mask differs from the magnitude one.
  EXPECT_FALSE(at::equal(r.mask, magnitudePrune(p.weight, SparsityPattern::unstructured(0.5)).mask));
}

TEST(WandaPrune, InputNormsAreTheColumnNormsOfTheActivations) {
  const Problem p = randomProblem(4, 48, 300, 6);
  HessianAccumulator accumulator(48, at::kCPU, "m");
  accumulator.add(p.inputs);
  const at::Tensor norms = wandaInputNorms(accumulator.sum());
  EXPECT_TRUE(at::allclose(norms, p.inputs.norm(2, {0}), 1e-4, 1e-5));
}

TEST(Pruning, RejectsBadInputNamingTheModule) {
  const Problem p = randomProblem(8, 64, 64, 7);
  const SparsityPattern p24 = SparsityPattern::nm(2, 4);
  auto message = [](const std::function<void()>& f) { return test::inputErrorOf(f); };
  EXPECT_THAT(message([&] { magnitudePrune(at::randn({8, 62}), p24, "layers.1.o_proj"); }),
              AllOf(HasSubstr("layers.1.o_proj"), HasSubstr("62"), HasSubstr("2:4")));
  EXPECT_THAT(message([&] { wandaPrune(at::randn({8, 62}), at::ones({62}), p24, "layers.1.o_proj"); }),
              HasSubstr("layers.1.o_proj"));
  EXPECT_THAT(message([&] { sparseGptPrune(at::randn({8, 62}), at::eye(62), p24, {}, "layers.1.o_proj"); }),
              HasSubstr("layers.1.o_proj"));
  EXPECT_THAT(message([&] { magnitudePrune(at::randn({64}), p24, "q"); }), AllOf(HasSubstr("'q'"), HasSubstr("2-D")));
  EXPECT_THAT(message([&] { magnitudePrune(at::ones({8, 64}, at::kInt), p24, "q"); }), HasSubstr("floating"));
  EXPECT_THAT(message([&] { magnitudePrune(at::full({8, 64}, NAN), p24, "q"); }), HasSubstr("NaN"));
  EXPECT_THAT(message([&] { wandaPrune(p.weight, at::ones({63}), p24, "k"); }),
              AllOf(HasSubstr("'k'"), HasSubstr("64")));
  EXPECT_THAT(message([&] { wandaPrune(p.weight, -at::ones({64}), p24, "k"); }), HasSubstr(">= 0"));
  EXPECT_THAT(message([&] { sparseGptPrune(p.weight, at::eye(32), p24, {}, "v"); }),
              AllOf(HasSubstr("'v'"), HasSubstr("Hessian")));
  EXPECT_THAT(message([&] { magnitudePrune(at::Tensor(), p24); }), HasSubstr("weight"));
}

}  // namespace
}  // namespace pareto
