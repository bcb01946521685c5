// The OBS sweep's fused block kernel (compress/ObsBlockKernel.h) against the column-by-column sweep it replaces on
// CUDA: SparseGPT's masks and GPTQ's grids and codes, for block widths, row counts that leave a partial CTA, and
// blocks narrower than the last group. Without a CUDA device only the kernel's shape rules are checked.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "compress/Gptq.h"
#include "compress/ObsBlockKernel.h"
#include "compress/SolveTimings.h"
#include "compress/SparseGpt.h"
#include "compress/SparsityPattern.h"
#include "kernels/ObsBlockSweep.h"
#include "SolverProblems.h"

namespace pareto {
namespace {

using test::correlatedProblem;
using test::Problem;
using test::relativeDifference;

// PARETO_OBS_FUSED=1 for the object's lifetime: unset again even when a solver throws, so that a later
// "column-by-column" side can never run fused and compare the kernel with itself.
struct FusedKernelOn {
  FusedKernelOn() { ::setenv("PARETO_OBS_FUSED", "1", 1); }
  ~FusedKernelOn() { ::unsetenv("PARETO_OBS_FUSED"); }
  FusedKernelOn(const FusedKernelOn&) = delete;
  FusedKernelOn& operator=(const FusedKernelOn&) = delete;
};

// Runs `solve` with the fused kernel and again without it (the column-by-column sweep).
template <class Solve>
auto fusedAndColumnwise(const Solve& solve) {
  const auto fused = [&] {
    const FusedKernelOn on;
    return solve();
  }();
  const auto columnwise = solve();
  return std::make_pair(fused, columnwise);
}

double agreement(const at::Tensor& a, const at::Tensor& b) {
  return (a.cpu() == b.cpu()).to(at::kDouble).mean().item<double>();
}

TEST(ObsBlockKernel, RefusesShapesItDoesNotTake) {
  namespace k = kernels;
  float dummy = 0;
  int flag = 0;
  uint8_t keep = 0;
  k::ObsBlockSweepProblem p;
  p.rows = 4;
  p.width = 128;
  p.block = p.errors = p.losses = &dummy;
  p.hinv = &dummy;
  p.keep = &keep;
  EXPECT_EQ(k::checkObsBlockSweep(p), "");
  p.width = 129;
  EXPECT_NE(k::checkObsBlockSweep(p).find("block width 129"), std::string::npos);
  p.width = 96;
  p.rule = k::ObsRule::NMMask;
  p.n = 2;
  p.m = 64;
  EXPECT_NE(k::checkObsBlockSweep(p).find("N:M"), std::string::npos);
  p.m = 32;
  EXPECT_EQ(k::checkObsBlockSweep(p), "");
  p.rule = k::ObsRule::Quantize;
  p.scales = p.zeros = p.codes = &dummy;
  p.overflow = &flag;
  p.groupSize = 128;
  p.dynamicGroups = true;
  EXPECT_NE(k::checkObsBlockSweep(p).find("dynamic group"), std::string::npos);
  p.groupSize = 32;
  p.start = 96;
  EXPECT_EQ(k::checkObsBlockSweep(p), "");
}

TEST(ObsBlockKernel, SparseGptMatchesTheColumnSweepOnCuda) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this build or machine";
  const Problem p = correlatedProblem(200, 416, 4096, 21);  // 200 rows: a partial CTA; 416 = 3 × 128 + 32
  const at::Tensor w = p.weight.to(at::kCUDA), h = p.hessian.to(at::kCUDA);
  const bool available = [&] {
    const FusedKernelOn on;
    return obsBlockKernelAvailable(w);
  }();
  ASSERT_TRUE(available) << "a CUDA build with PARETO_OBS_FUSED=1 must run the fused block sweep";
  for (const char* text : {"2:4", "4:8", "16:32", "1:4", "50%", "70%"}) {
    for (int64_t block : {128, 64, 32}) {
      SCOPED_TRACE(std::string(text) + " block " + std::to_string(block));
      SparseGptOptions options;
      options.blockSize = block;
      const SparsityPattern pattern = SparsityPattern::parse(text);
      const auto [fused, columnwise] =
          fusedAndColumnwise([&] { return sparseGptPrune(w, h, pattern, options, "test.proj"); });
      EXPECT_GE(agreement(fused.pruned.mask, columnwise.pruned.mask), 0.999);
      EXPECT_LT(relativeDifference(fused.pruned.weight, columnwise.pruned.weight), 1e-3);
      EXPECT_NEAR(fused.report.loss, columnwise.report.loss, 1e-3 * columnwise.report.loss);
    }
  }
}

TEST(ObsBlockKernel, GptqMatchesTheColumnSweepOnCuda) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this build or machine";
  const Problem p = correlatedProblem(200, 384, 4096, 22);
  const at::Tensor w = p.weight.to(at::kCUDA), h = p.hessian.to(at::kCUDA);
  at::manual_seed(3);
  const at::Tensor keep = (at::rand({200, 384}) > 0.3).to(at::kCUDA);
  GptqOptions staticGroups;
  staticGroups.staticGroups = true;
  GptqOptions withKeep;
  withKeep.keep = keep;
  GptqOptions narrowBlocks;
  narrowBlocks.blockSize = 32;  // groups of 64 straddle two blocks: the column sweep takes those
  const std::pair<QuantSpec, GptqOptions> cases[] = {
      {QuantSpec::group(4, 128), {}},          {QuantSpec::group(4, 128, false), {}},
      {QuantSpec::group(3, 64), {}},           {QuantSpec::group(4, 32, false), withKeep},
      {QuantSpec::channel(4), {}},             {QuantSpec::channel(8, false), withKeep},
      {QuantSpec::tensor(4), {}},              {QuantSpec::group(4, 64), staticGroups},
      {QuantSpec::group(4, 64), narrowBlocks},
  };
  for (const auto& [spec, options] : cases) {
    SCOPED_TRACE(spec.label() + " block " + std::to_string(options.blockSize) +
                 (options.keep.defined() ? " with a keep mask" : ""));
    const auto [fused, columnwise] = fusedAndColumnwise([&, &spec = spec, &options = options] {
      return gptqQuantize(w, h, spec, options, "test.proj");
    });
    EXPECT_GE(agreement(fused.quant.codes, columnwise.quant.codes), 0.999);
    EXPECT_LT(relativeDifference(fused.quant.dequantized, columnwise.quant.dequantized), 1e-3);
    EXPECT_LT(relativeDifference(fused.quant.scales, columnwise.quant.scales), 1e-3);
    EXPECT_NEAR(fused.report.loss, columnwise.report.loss, 1e-3 * columnwise.report.loss);
    // Codes, scales and zeros still describe the dequantized weight exactly.
    const int64_t rows = w.size(0), cols = w.size(1);
    const int64_t perGroup = spec.columnsPerGroup(cols);
    at::Tensor s = fused.quant.scales.repeat_interleave(perGroup, 1).expand({rows, cols});
    at::Tensor z = spec.symmetric ? at::zeros_like(s)
                                  : fused.quant.zeros.to(at::kFloat).repeat_interleave(perGroup, 1).expand({rows, cols});
    EXPECT_TRUE(at::equal(((fused.quant.codes.to(at::kFloat) - z) * s).cpu(), fused.quant.dequantized.cpu()));
  }
}

// The equality tests above would pass if the kernel silently declined every block (both sides column by column):
// the sweep's timed parts say which path each block took.
TEST(ObsBlockKernel, TakesEveryBlockOfAnAlignedSweepOnCuda) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this build or machine";
  const Problem p = correlatedProblem(200, 384, 4096, 23);
  const at::Tensor w = p.weight.to(at::kCUDA), h = p.hessian.to(at::kCUDA);
  SolveTimings timings;
  {
    const FusedKernelOn on;
    const SolveTimings::Scope scope(&timings);
    gptqQuantize(w, h, QuantSpec::group(4, 128), {}, "test.proj");
    sparseGptPrune(w, h, SparsityPattern::nm(2, 4), SparseGptOptions{}, "test.proj");
  }
  const auto totals = timings.totals();
  EXPECT_EQ(totals.count("sweep: block kernel, host"), 1u);
  EXPECT_EQ(totals.count("sweep: column by column, host"), 0u) << "a block fell back to the column sweep";
}

}  // namespace
}  // namespace pareto
