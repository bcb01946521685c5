// The OBS sweep of compress/ObsSweep.h on its own: against a direct float64 sweep without lazy blocks (any block
// width gives the same result), what the hooks see (the blocks, the current values of a group that runs past its
// block), and the shared start (dead inputs, option checks).
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "compress/ObsSweep.h"
#include "util/Error.h"

namespace pareto {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kRows = 12, kCols = 40;

// A well-conditioned H and its damped inverse's upper Cholesky factor, in float64.
at::Tensor upperFactor() {
  at::manual_seed(3);
  const at::Tensor x = at::randn({4 * kCols, kCols}, at::kDouble);
  at::Tensor h = at::matmul(x.t(), x);
  return dampedInverse(h, 0.01, 0, "test", "TEST").upper;
}

at::Tensor roundToQuarter(const at::Tensor& values) { return at::round(values * 4) / 4; }

// Column by column, no blocks: fix column j to q(w_j), then w[:, j:] -= ((w_j − q_j) / U_jj) ⊗ U[j, j:].
ObsSweepResult directSweep(const at::Tensor& weight, const at::Tensor& u, std::vector<at::Tensor>* seen = nullptr,
                           int64_t look = 0) {
  at::Tensor w = weight.clone();
  double loss = 0;
  for (int64_t j = 0; j < kCols; ++j) {
    if (seen && j % look == 0) seen->push_back(w.narrow(1, j, look).clone());
    const at::Tensor values = w.select(1, j).clone();
    const at::Tensor error = (values - roundToQuarter(values)) / u[j][j];
    loss += 0.5 * error.square().sum().item<double>();
    w.narrow(1, j, kCols - j).sub_(at::outer(error, u.select(0, j).narrow(0, j, kCols - j)));
  }
  return {w, loss};
}

// The fused block kernel (compress/ObsBlockKernel.h) reads U's rows with unit stride and declines a block of any
// other layout, so a column-major U from LAPACK/cuSOLVER would send every block down the column-by-column sweep.
TEST(ObsSweep, TheDampedInverseFactorIsRowMajor) {
  const at::Tensor u = upperFactor();
  EXPECT_TRUE(u.is_contiguous()) << "strides " << u.stride(0) << ", " << u.stride(1);
}

TEST(ObsSweep, AnyBlockWidthMatchesTheDirectSweep) {
  const at::Tensor u = upperFactor();
  at::manual_seed(4);
  const at::Tensor w = at::randn({kRows, kCols}, at::kDouble);
  const ObsSweepResult direct = directSweep(w, u);
  for (int64_t block : {1, 7, 16, 40, 128}) {
    SCOPED_TRACE(block);
    ObsSweepHooks hooks;
    hooks.fixColumn = [](const ObsSweepState&, int64_t, const at::Tensor& values) { return roundToQuarter(values); };
    const ObsSweepResult r = obsSweep(w, u, block, hooks);
    EXPECT_TRUE(at::allclose(r.weight, direct.weight, 0, 1e-12));
    EXPECT_NEAR(r.loss, direct.loss, 1e-9 * direct.loss);
    EXPECT_TRUE(at::equal(roundToQuarter(r.weight), r.weight));  // every column as the hook fixed it
  }
}

TEST(ObsSweep, IsPureAndKeepsWhatTheHookKeeps) {
  const at::Tensor u = upperFactor();
  at::manual_seed(5);
  const at::Tensor w = at::randn({kRows, kCols}, at::kDouble);
  const at::Tensor before = w.clone();
  ObsSweepHooks hooks;
  hooks.fixColumn = [](const ObsSweepState&, int64_t, const at::Tensor& values) { return values.clone(); };
  const ObsSweepResult r = obsSweep(w, u, 16, hooks);
  EXPECT_TRUE(at::equal(r.weight, before));
  EXPECT_EQ(r.loss, 0);
  EXPECT_TRUE(at::equal(w, before));
}

TEST(ObsSweep, HooksSeeTheBlocksAndTheCurrentValuesPastABlock) {
  const at::Tensor u = upperFactor();
  at::manual_seed(6);
  const at::Tensor w = at::randn({kRows, kCols}, at::kDouble);
  // Groups of 10 columns in blocks of 16: groups 1 and 3 start in one block and end in the next.
  const int64_t group = 10, block = 16;
  std::vector<at::Tensor> expected, seen;
  directSweep(w, u, &expected, group);
  std::vector<int64_t> starts, widths, columns;
  ObsSweepHooks hooks;
  hooks.beginBlock = [&](const ObsSweepState& sweep) {
    starts.push_back(sweep.start());
    widths.push_back(sweep.width());
    EXPECT_TRUE(at::equal(sweep.block(), sweep.current(sweep.start(), sweep.width())));
  };
  hooks.fixColumn = [&](const ObsSweepState& sweep, int64_t column, const at::Tensor& values) {
    columns.push_back(column);
    if (column % group == 0) seen.push_back(sweep.current(column, group).clone());
    EXPECT_TRUE(at::equal(sweep.current(column, 1).squeeze(1), values));
    return roundToQuarter(values);
  };
  obsSweep(w, u, block, hooks);
  EXPECT_EQ(starts, (std::vector<int64_t>{0, 16, 32}));
  EXPECT_EQ(widths, (std::vector<int64_t>{16, 16, 8}));
  ASSERT_EQ(columns.size(), size_t(kCols));
  for (int64_t j = 0; j < kCols; ++j) EXPECT_EQ(columns[j], j);
  ASSERT_EQ(seen.size(), expected.size());
  for (size_t g = 0; g < seen.size(); ++g) {
    SCOPED_TRACE(g);
    EXPECT_TRUE(at::allclose(seen[g], expected[g], 0, 1e-12));
  }
}

TEST(ObsSweep, DeadInputsAndOptions) {
  at::Tensor h = at::eye(4, at::kFloat) * 2;
  h[1][1] = 0;
  const at::Tensor w = at::ones({3, 4}, at::kFloat);
  const ObsInputs inputs = obsInputs(w, h, /*keep=*/{}, at::kDouble, "m", "TEST");
  EXPECT_EQ(inputs.deadInputs, 1);
  EXPECT_EQ(inputs.weight.scalar_type(), at::kDouble);
  EXPECT_EQ(inputs.hessian[1][1].item<double>(), 1);
  EXPECT_EQ(inputs.weight.select(1, 1).abs().sum().item<double>(), 0);
  EXPECT_EQ(inputs.weight.sum().item<double>(), 9);
  EXPECT_FALSE(inputs.pruned.defined());
  at::Tensor keep = at::ones({3, 4}, at::kBool);
  keep[0][0] = false;
  const ObsInputs kept = obsInputs(w, h, keep, at::kFloat, "m", "TEST");
  EXPECT_TRUE(at::equal(kept.pruned, keep.logical_not()));
  EXPECT_EQ(kept.weight.sum().item<float>(), 8);
  try {
    obsInputs(w, h, at::ones({4, 3}, at::kBool), at::kFloat, "module 'a.b'", "GPTQ");
    ADD_FAILURE() << "a keep mask of the wrong shape accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("a.b"), HasSubstr("GPTQ keep mask")));
  }
  EXPECT_THROW(obsInputs(w, at::eye(3), {}, at::kFloat, "m", "TEST"), InputError);  // H of the wrong size
  EXPECT_EQ(h[1][1].item<float>(), 0);  // copied, not modified
  EXPECT_EQ(w.sum().item<float>(), 12);

  EXPECT_NO_THROW(checkObsOptions(0.01, 128, 0, "m", "GPTQ"));
  EXPECT_THROW(checkObsOptions(0, 128, 4, "m", "GPTQ"), InputError);
  EXPECT_THROW(checkObsOptions(0.01, 0, 4, "m", "GPTQ"), InputError);
  try {
    checkObsOptions(0.01, 128, -1, "module 'a.b'", "SpQR");
    ADD_FAILURE() << "negative retries accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("a.b"), HasSubstr("SpQR damping retries")));
  }
  try {
    checkSweptWeight(at::full({2, 2}, NAN), "module 'a.b'", "GPTQ", 0.01);
    ADD_FAILURE() << "NaN accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("a.b"), HasSubstr("GPTQ produced NaN"), HasSubstr("degenerate")));
  }
}

}  // namespace
}  // namespace pareto
