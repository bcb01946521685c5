// Quantization: RTN grids (error bound, code ranges, degenerate groups), GPTQ against a direct float64
// column-by-column implementation and against RTN on reconstruction error, GPTQ after pruning (mask kept, beats
// RTN of the kept values), the packed QuantGroupWeight format, and the block structs of formats/PackedBlocks.h.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <tuple>
#include <string>
#include <vector>

#include "compress/Gptq.h"
#include "compress/QuantGrid.h"
#include "compress/SparseGpt.h"
#include "formats/BitmaskNMWeight.h"
#include "formats/PackedBlocks.h"
#include "formats/QuantGroupWeight.h"
#include "SolverProblems.h"
#include "util/Error.h"

namespace pareto {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using test::correlatedProblem;
using test::lowRankProblem;
using test::Problem;
using test::reconstructionError;
using test::relativeDifference;

// A [gridRows, groups] tensor spread to one value per weight of a [rows, cols] matrix.
at::Tensor perWeight(const at::Tensor& grid, int64_t rows, int64_t cols) {
  const at::Tensor g = grid.to(at::kDouble).cpu();
  return g.repeat_interleave(cols / g.size(1), 1).expand({rows, cols});
}

std::vector<QuantSpec> allGrids(int bits) {
  std::vector<QuantSpec> specs;
  for (bool symmetric : {true, false}) {
    specs.push_back(QuantSpec::tensor(bits, symmetric));
    specs.push_back(QuantSpec::channel(bits, symmetric));
    specs.push_back(QuantSpec::group(bits, 32, symmetric));
    specs.push_back(QuantSpec::group(bits, 128, symmetric));
  }
  return specs;
}

void expectOnGridWithinHalfStep(const at::Tensor& weight, const QuantResult& r, const QuantSpec& spec) {
  const int64_t rows = weight.size(0), cols = weight.size(1);
  ASSERT_EQ(r.codes.scalar_type(), spec.symmetric ? at::kChar : at::kByte);
  ASSERT_EQ(r.scales.scalar_type(), at::kFloat);
  const int64_t gridRows = spec.granularity == QuantSpec::Granularity::Tensor ? 1 : rows;
  const int64_t groups = spec.granularity == QuantSpec::Granularity::Group ? cols / spec.groupSize : 1;
  ASSERT_EQ(r.scales.sizes(), at::IntArrayRef({gridRows, groups}));
  EXPECT_EQ(r.zeros.defined(), !spec.symmetric);
  if (!spec.symmetric) ASSERT_EQ(r.zeros.sizes(), r.scales.sizes());
  EXPECT_TRUE(at::equal(r.scales.to(at::kHalf).to(at::kFloat), r.scales)) << "scales must be fp16-exact";

  const at::Tensor codes = r.codes.to(at::kDouble).cpu();
  EXPECT_GE(codes.min().item<double>(), double(spec.qmin()));
  EXPECT_LE(codes.max().item<double>(), double(spec.qmax()));
  const at::Tensor s = perWeight(r.scales, rows, cols);
  const at::Tensor z = spec.symmetric ? at::zeros_like(s) : perWeight(r.zeros, rows, cols);
  EXPECT_TRUE(at::equal((codes - z) * s, r.dequantized.to(at::kDouble).cpu())) << "ŵ = (q − z) · s";
  const at::Tensor excess = (weight.to(at::kDouble).cpu() - r.dequantized.to(at::kDouble).cpu()).abs() - s / 2;
  EXPECT_LE(excess.max().item<double>(), 1e-6 * s.max().item<double>());
}

TEST(QuantSpec, LabelsAndValidation) {
  EXPECT_EQ(QuantSpec::group(4, 128).label(), "int4 sym g128");
  EXPECT_EQ(QuantSpec::channel(3, false).label(), "int3 asym channel");
  EXPECT_EQ(QuantSpec::tensor(8).label(), "int8 sym tensor");
  EXPECT_EQ(QuantSpec::group(4, 128).qmax(), 7);
  EXPECT_EQ(QuantSpec::group(4, 128).qmin(), -7);
  EXPECT_EQ(QuantSpec::group(4, 128, false).qmax(), 15);
  EXPECT_THROW(QuantSpec::channel(1).validate(), InputError);
  EXPECT_THROW(QuantSpec::channel(9).validate(), InputError);
  EXPECT_THROW(QuantSpec::group(4, 0).validate(), InputError);
  EXPECT_EQ(QuantSpec::group(4, 64).groupsPerRow(256), 4);
  EXPECT_THROW(QuantSpec::group(4, 48).groupsPerRow(256), InputError);
}

TEST(Rtn, EveryGridIsWithinHalfAStepAndInRange) {
  at::manual_seed(1);
  // Rows and groups of very different magnitudes, one outlier.
  at::Tensor w = at::randn({24, 256}) * at::exp(at::randn({24, 1})) * at::exp(0.5 * at::randn({1, 256}));
  w[3][17] = 40.0;
  for (int bits : {2, 3, 4, 8}) {
    for (const QuantSpec& spec : allGrids(bits)) {
      SCOPED_TRACE(spec.label());
      expectOnGridWithinHalfStep(w, rtnQuantize(w, spec, "test.proj"), spec);
    }
  }
}

TEST(Rtn, AllZeroGroupsGetUnitScaleAndZeroCodes) {
  at::Tensor w = at::randn({8, 128});
  w.narrow(1, 32, 32).zero_();
  for (bool symmetric : {true, false}) {
    const QuantResult r = rtnQuantize(w, QuantSpec::group(4, 32, symmetric));
    EXPECT_TRUE((r.scales.select(1, 1) == 1).all().item<bool>());
    EXPECT_TRUE((r.codes.narrow(1, 32, 32).to(at::kInt) == 0).all().item<bool>());
    EXPECT_TRUE((r.dequantized.narrow(1, 32, 32) == 0).all().item<bool>());
    const QuantResult zero = rtnQuantize(at::zeros({4, 64}), QuantSpec::tensor(3, symmetric));
    EXPECT_EQ(zero.scales.item<float>(), 1.0f);
    EXPECT_TRUE((zero.dequantized == 0).all().item<bool>());
    EXPECT_TRUE(at::isfinite(zero.dequantized).all().item<bool>());
  }
}

TEST(Rtn, KeepsDtypeAndRejectsBadInput) {
  const at::Tensor w = at::randn({16, 64}).to(at::kBFloat16);
  EXPECT_EQ(rtnQuantize(w, QuantSpec::channel(4)).dequantized.scalar_type(), at::kBFloat16);
  EXPECT_THAT([&] { rtnQuantize(at::randn({16, 96}), QuantSpec::group(4, 64), "model.q_proj"); },
              testing::ThrowsMessage<InputError>(AllOf(HasSubstr("model.q_proj"), HasSubstr("group size 64"))));
  EXPECT_THROW(rtnQuantize(at::randn({16}), QuantSpec::channel(4)), InputError);
  EXPECT_THROW(rtnQuantize(at::randn({4, 8}), QuantSpec::channel(9)), InputError);
  at::Tensor nan = at::randn({4, 8});
  nan[1][1] = NAN;
  EXPECT_THROW(rtnQuantize(nan, QuantSpec::channel(4)), InputError);
  EXPECT_THROW(rtnQuantize(at::randint(0, 4, {4, 8}), QuantSpec::channel(4)), InputError);
}

TEST(Rtn, RunsOnCuda) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this build or machine";
  const Problem p = correlatedProblem(32, 256, 16, 2);
  for (const QuantSpec& spec : allGrids(4)) {
    SCOPED_TRACE(spec.label());
    const QuantResult r = rtnQuantize(p.weight.to(at::kCUDA), spec);
    ASSERT_EQ(r.dequantized.device().type(), at::kCUDA);
    expectOnGridWithinHalfStep(p.weight, r, spec);
    const QuantResult cpu = rtnQuantize(p.weight, spec);
    EXPECT_LT(relativeDifference(r.dequantized, cpu.dequantized), 1e-6);
  }
}

// GPTQ without lazy blocks, in float64: for each column in order (or in `order`), quantize it on its grid and
// spread the error over all later columns through row i of the upper Cholesky factor of H⁻¹. Fixed grids
// (channel, tensor, static groups) are given; dynamic groups are found with RTN on the current columns when the
// sweep reaches a group's first column.
struct Reference {
  at::Tensor weight;  // float64, original column order
  double lambda = 0;
};

// With `keep` (after pruning) a pruned weight is fixed at 0 instead of being quantized, and dynamic grids read
// pruned weights as 0.
Reference referenceGptq(const at::Tensor& weight, const at::Tensor& hessian, const QuantSpec& spec, double damp,
                        const at::Tensor& fixedScales, const at::Tensor& fixedZeros,
                        const at::Tensor& permutation = {}, const at::Tensor& keep = {}) {
  at::Tensor w = weight.to(at::kDouble).cpu().clone();
  at::Tensor h = hessian.to(at::kDouble).cpu().clone();
  const int64_t rows = w.size(0), cols = w.size(1);
  const at::Tensor dead = h.diagonal() == 0;
  h.diagonal().masked_fill_(dead, 1);
  w.masked_fill_(dead.unsqueeze(0), 0);
  at::Tensor perm = permutation.defined() ? permutation.cpu() : at::arange(cols, at::kLong);
  at::Tensor kept = keep.defined() ? keep.cpu() : at::ones({rows, cols}, at::kBool);
  w = w.masked_fill(kept.logical_not(), 0).index_select(1, perm);
  kept = kept.index_select(1, perm);
  h = h.index_select(0, perm).index_select(1, perm);
  Reference ref;
  ref.lambda = damp * h.diagonal().mean().item<double>();
  h.diagonal().add_(ref.lambda);
  const at::Tensor u = at::linalg_cholesky(at::cholesky_inverse(at::linalg_cholesky(h)), /*upper=*/true);

  const int64_t g = spec.columnsPerGroup(cols);
  const bool dynamic = !fixedScales.defined();
  at::Tensor scale, zero;
  for (int64_t i = 0; i < cols; ++i) {
    const int64_t group = perm[i].item<int64_t>() / g;
    if (dynamic) {
      if (i % g == 0) {
        const QuantResult grid = rtnQuantize(w.narrow(1, i, g).masked_fill(kept.narrow(1, i, g).logical_not(), 0),
                                             QuantSpec::channel(spec.bits, spec.symmetric));
        scale = grid.scales.select(1, 0).to(at::kDouble);
        zero = spec.symmetric ? at::zeros_like(scale) : grid.zeros.select(1, 0).to(at::kDouble);
      }
    } else {
      scale = fixedScales.select(1, group).to(at::kDouble).cpu();
      zero = spec.symmetric ? at::zeros_like(scale) : fixedZeros.select(1, group).to(at::kDouble).cpu();
    }
    const at::Tensor column = w.select(1, i).clone();
    const at::Tensor q = at::where(
        kept.select(1, i),
        (at::clamp(at::round(column / scale) + zero, double(spec.qmin()), double(spec.qmax())) - zero) * scale,
        at::zeros_like(column));
    const at::Tensor error = (column - q) / u[i][i].item<double>();
    w.narrow(1, i, cols - i) -= at::outer(error, u[i].narrow(0, i, cols - i));
    w.select(1, i).copy_(q);
  }
  ref.weight = w.index_select(1, at::argsort(perm));
  return ref;
}

void expectMatchesReference(const Problem& p, const QuantSpec& spec, const GptqOptions& options,
                            c10::Device device, at::ScalarType dtype, double tolerance) {
  SCOPED_TRACE(spec.label() + " block " + std::to_string(options.blockSize) + (options.actOrder ? " act-order" : "") +
               (options.staticGroups ? " static" : "") + " " + c10::toString(dtype));
  const at::Tensor w = p.weight.to(device, dtype);
  const GptqResult r = gptqQuantize(w, p.hessian.to(device), spec, options, "test.proj");
  ASSERT_EQ(r.quant.dequantized.device().type(), device.type());
  ASSERT_EQ(r.quant.dequantized.scalar_type(), dtype);
  EXPECT_EQ(r.report.dampRetries, 0);
  const bool dynamic = spec.granularity == QuantSpec::Granularity::Group && !options.staticGroups;
  if (!dynamic) {
    // Fixed grids are RTN's grids of the original weight.
    const QuantResult rtn = rtnQuantize(p.weight.to(dtype), spec);
    EXPECT_TRUE(at::equal(r.quant.scales.cpu(), rtn.scales));
  }
  const Reference ref = referenceGptq(p.weight.to(dtype), p.hessian, spec, options.damp,
                                      dynamic ? at::Tensor() : r.quant.scales,
                                      dynamic || spec.symmetric ? at::Tensor() : r.quant.zeros, r.permutation);
  EXPECT_LT(relativeDifference(r.quant.dequantized, ref.weight), tolerance);

  // Codes, scales and zeros describe the dequantized weight.
  const int64_t rows = w.size(0), cols = w.size(1);
  const at::Tensor s = perWeight(r.quant.scales, rows, cols);
  const at::Tensor z = spec.symmetric ? at::zeros_like(s) : perWeight(r.quant.zeros, rows, cols);
  EXPECT_TRUE(at::equal((r.quant.codes.to(at::kDouble).cpu() - z) * s, r.quant.dequantized.to(at::kDouble).cpu()));

  // The reported loss is ½ tr(ΔW (H + λI) ΔWᵀ).
  at::Tensor damped = p.hessian.to(at::kDouble).clone();
  damped.diagonal().add_(r.report.lambda);
  const at::Tensor delta = p.weight.to(dtype).to(at::kDouble) - ref.weight;
  const double objective = 0.5 * (at::matmul(delta, damped) * delta).sum().item<double>();
  EXPECT_NEAR(r.report.loss, objective, 1e-3 * objective);
}

TEST(Gptq, MatchesTheDirectFloat64AlgorithmOnCpu) {
  const Problem p = correlatedProblem(64, 256, 2048, 11);
  for (int64_t block : {128, 64, 48}) {
    GptqOptions options;
    options.blockSize = block;
    for (const QuantSpec& spec : {QuantSpec::channel(4), QuantSpec::channel(3, false), QuantSpec::tensor(4)})
      expectMatchesReference(p, spec, options, at::kCPU, at::kFloat, 1e-4);
    GptqOptions staticGroups = options;
    staticGroups.staticGroups = true;
    for (const QuantSpec& spec : {QuantSpec::group(4, 64), QuantSpec::group(4, 32, false)})
      expectMatchesReference(p, spec, staticGroups, at::kCPU, at::kFloat, 1e-4);
    // Dynamic groups depend on the current weights, so they are compared in float64 where no rounding tie can
    // flip between the two computations.
    for (const QuantSpec& spec : {QuantSpec::group(4, 64), QuantSpec::group(3, 32, false), QuantSpec::group(4, 128)})
      expectMatchesReference(p, spec, options, at::kCPU, at::kDouble, 1e-9);
  }
}

TEST(Gptq, ActOrderMatchesTheReferenceAndReturnsAPermutation) {
  const Problem p = correlatedProblem(64, 256, 2048, 12);
  GptqOptions options;
  options.actOrder = true;
  options.staticGroups = true;
  for (const QuantSpec& spec : {QuantSpec::channel(4), QuantSpec::group(4, 64), QuantSpec::group(3, 32, false)}) {
    const GptqResult r = gptqQuantize(p.weight, p.hessian, spec, options);
    ASSERT_TRUE(r.permutation.defined());
    ASSERT_EQ(r.permutation.scalar_type(), at::kLong);
    EXPECT_TRUE(at::equal(std::get<0>(r.permutation.sort()), at::arange(256, at::kLong)));
    const at::Tensor diag = p.hessian.diagonal().index_select(0, r.permutation);
    EXPECT_TRUE((diag.narrow(0, 0, 255) >= diag.narrow(0, 1, 255)).all().item<bool>());
    expectMatchesReference(p, spec, options, at::kCPU, at::kFloat, 1e-4);
  }
  GptqOptions dynamicActOrder;
  dynamicActOrder.actOrder = true;
  EXPECT_THAT([&] { gptqQuantize(p.weight, p.hessian, QuantSpec::group(4, 64), dynamicActOrder, "x.proj"); },
              testing::ThrowsMessage<InputError>(AllOf(HasSubstr("x.proj"), HasSubstr("static groups"))));
}

TEST(Gptq, MatchesTheDirectFloat64AlgorithmOnCuda) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this build or machine";
  const Problem p = correlatedProblem(64, 256, 2048, 13);
  GptqOptions staticGroups;
  staticGroups.staticGroups = true;
  expectMatchesReference(p, QuantSpec::channel(4), {}, at::kCUDA, at::kFloat, 1e-4);
  expectMatchesReference(p, QuantSpec::group(4, 64, false), staticGroups, at::kCUDA, at::kFloat, 1e-4);
  expectMatchesReference(p, QuantSpec::group(4, 64), {}, at::kCUDA, at::kDouble, 1e-9);
  staticGroups.actOrder = true;
  expectMatchesReference(p, QuantSpec::group(4, 32), staticGroups, at::kCUDA, at::kFloat, 1e-4);
}

TEST(Gptq, BeatsRtnOnReconstructionError) {
  GptqOptions actOrder;
  actOrder.actOrder = true;
  actOrder.staticGroups = true;
  // Mildly correlated inputs leave GPTQ little to redistribute; low-rank ones a lot.
  for (const auto& [name, p, bound] : {std::make_tuple("correlated", correlatedProblem(64, 256, 2048, 14), 0.95),
                                       std::make_tuple("low-rank", lowRankProblem(64, 256, 2048, 64, 0.1, 19), 0.6)}) {
    for (const QuantSpec& spec : {QuantSpec::group(4, 128), QuantSpec::channel(3), QuantSpec::group(4, 128, false)}) {
      SCOPED_TRACE(std::string(name) + " " + spec.label());
      const double rtn = reconstructionError(p, rtnQuantize(p.weight, spec).dequantized);
      const double gptq = reconstructionError(p, gptqQuantize(p.weight, p.hessian, spec).quant.dequantized);
      const double ordered =
          reconstructionError(p, gptqQuantize(p.weight, p.hessian, spec, actOrder).quant.dequantized);
      std::printf("%s %s: rtn %.4f gptq %.4f act-order %.4f\n", name, spec.label().c_str(), rtn, gptq, ordered);
      EXPECT_LT(gptq, bound * rtn);
      EXPECT_LT(ordered, bound * rtn);
    }
  }
}

// GPTQ after pruning quantizes only the kept weights: the mask survives exactly, the result matches the float64
// reference with pruned weights fixed at 0, and it beats RTN of the kept values (today's 2:4 + int4 path).
TEST(Gptq, AfterPruningMatchesTheReferenceAndKeepsTheMask) {
  const Problem p = correlatedProblem(64, 256, 2048, 31);
  for (const char* text : {"2:4", "50%"}) {
    const SparseGptResult pruned = sparseGptPrune(p.weight, p.hessian, SparsityPattern::parse(text));
    const at::Tensor keep = pruned.pruned.mask;
    GptqOptions options;
    options.keep = keep;
    GptqOptions ordered = options;
    ordered.actOrder = true;
    ordered.staticGroups = true;
    struct Case {
      QuantSpec spec;
      GptqOptions options;
      at::ScalarType dtype;
    };
    for (const Case& c : {Case{QuantSpec::channel(4), options, at::kFloat},
                          Case{QuantSpec::group(4, 64, false), options, at::kDouble},
                          Case{QuantSpec::group(3, 32), options, at::kDouble},
                          Case{QuantSpec::group(4, 64), ordered, at::kFloat}}) {
      SCOPED_TRACE(std::string(text) + " " + c.spec.label() + (c.options.actOrder ? " act-order" : ""));
      const at::Tensor w = pruned.pruned.weight.to(c.dtype);
      const GptqResult r = gptqQuantize(w, p.hessian, c.spec, c.options, "pruned.proj");
      const at::Tensor removed = keep.logical_not();
      EXPECT_TRUE((r.quant.dequantized.masked_select(removed) == 0).all().item<bool>()) << "a pruned weight moved";
      const int64_t g = c.spec.columnsPerGroup(256);
      const at::Tensor zeroCode = c.spec.symmetric ? at::zeros({64, 256}, at::kChar)
                                                   : r.quant.zeros.repeat_interleave(g, 1).expand({64, 256});
      EXPECT_TRUE(at::equal(r.quant.codes.masked_select(removed), zeroCode.masked_select(removed)));
      const bool dynamic = c.spec.granularity == QuantSpec::Granularity::Group && !c.options.staticGroups;
      const Reference ref = referenceGptq(w, p.hessian, c.spec, 0.01, dynamic ? at::Tensor() : r.quant.scales,
                                          dynamic || c.spec.symmetric ? at::Tensor() : r.quant.zeros,
                                          r.permutation, keep);
      EXPECT_LT(relativeDifference(r.quant.dequantized, ref.weight), c.dtype == at::kDouble ? 1e-9 : 1e-4);
    }
  }
}

TEST(Gptq, After24BeatsRtnOfTheKeptValues) {
  for (const auto& [name, p] : {std::make_pair("correlated", correlatedProblem(64, 256, 2048, 32)),
                                std::make_pair("low-rank", lowRankProblem(64, 256, 2048, 64, 0.1, 33))}) {
    const SparseGptResult pruned = sparseGptPrune(p.weight, p.hessian, SparsityPattern::nm(2, 4));
    const at::Tensor keep = pruned.pruned.mask;
    // Groups of g kept values are 2g original columns at 2:4.
    for (const QuantSpec& kept : {QuantSpec::group(4, 64), QuantSpec::group(4, 32, false), QuantSpec::group(3, 64),
                                  QuantSpec::channel(4)}) {
      SCOPED_TRACE(std::string(name) + " " + kept.label());
      QuantSpec original = kept;
      if (original.granularity == QuantSpec::Granularity::Group) original.groupSize *= 2;
      GptqOptions options;
      options.keep = keep;
      const GptqResult r = gptqQuantize(pruned.pruned.weight, p.hessian, original, options);
      // The packed form: the bitmask and the kept values' codes, with the solver's weight bit for bit.
      const QuantResult values = quantKeptColumns(r.quant, keep);
      ASSERT_EQ(values.codes.sizes(), (at::IntArrayRef{64, 128}));
      BitmaskNMWeight packed = BitmaskNMWeight::pack(pruned.pruned.weight, keep, 2, 4);
      packed.values = QuantGroupWeight::pack(values, kept).unpack();
      EXPECT_TRUE(at::equal(packed.unpack(), r.quant.dequantized));
      EXPECT_TRUE(at::equal(packed.unpackMask(), keep));

      BitmaskNMWeight rtn = BitmaskNMWeight::pack(pruned.pruned.weight, keep, 2, 4);
      rtn.values = rtnQuantize(rtn.values, kept).dequantized;
      const double eGptq = reconstructionError(p, r.quant.dequantized);
      const double eRtn = reconstructionError(p, rtn.unpack());
      const double ePruned = reconstructionError(p, pruned.pruned.weight);
      std::printf("%s 2:4 + %s: pruned only %.4f, + rtn %.4f, + gptq %.4f\n", name, kept.label().c_str(), ePruned,
                  eRtn, eGptq);
      EXPECT_LT(eGptq, eRtn);
      // Measured against the pruned weight too (the quantization error alone).
      Problem afterPruning = p;
      afterPruning.weight = pruned.pruned.weight;
      EXPECT_LT(reconstructionError(afterPruning, r.quant.dequantized),
                reconstructionError(afterPruning, rtn.unpack()));
    }
  }
  // Rows keeping different counts cannot be compacted.
  const QuantResult r = rtnQuantize(at::randn({4, 64}), QuantSpec::channel(4));
  at::Tensor uneven = at::ones({4, 64}, at::kBool);
  uneven[1][3] = false;
  EXPECT_THROW(quantKeptColumns(r, uneven), InputError);
  GptqOptions badMask;
  badMask.keep = at::ones({4, 32}, at::kBool);
  EXPECT_THAT([&] { gptqQuantize(at::randn({4, 64}), at::eye(64), QuantSpec::channel(4), badMask, "x.proj"); },
              testing::ThrowsMessage<InputError>(AllOf(HasSubstr("x.proj"), HasSubstr("keep mask"))));
}

TEST(Gptq, DeadInputsGetZeroWeightsAndNoNaN) {
  Problem p = correlatedProblem(32, 128, 512, 15);
  for (int64_t c : {0, 5, 77, 127}) p.inputs.select(1, c).zero_();
  p.hessian = at::matmul(p.inputs.t(), p.inputs);
  GptqOptions actOrder;
  actOrder.actOrder = true;
  actOrder.staticGroups = true;
  for (const QuantSpec& spec : {QuantSpec::group(4, 32), QuantSpec::channel(3, false)}) {
    for (const GptqOptions& options : {GptqOptions{}, actOrder}) {
      SCOPED_TRACE(spec.label());
      const GptqResult r = gptqQuantize(p.weight, p.hessian, spec, options, "dead.proj");
      EXPECT_EQ(r.report.deadInputs, 4);
      EXPECT_TRUE(at::isfinite(r.quant.dequantized).all().item<bool>());
      for (int64_t c : {0, 5, 77, 127}) EXPECT_TRUE((r.quant.dequantized.select(1, c) == 0).all().item<bool>());
    }
  }
  // A Hessian of all zeros: every input dead, the result is all zero.
  const GptqResult none = gptqQuantize(p.weight, at::zeros({128, 128}), QuantSpec::group(4, 32));
  EXPECT_TRUE((none.quant.dequantized == 0).all().item<bool>());
}

TEST(Gptq, LeavesItsInputsAloneAndRejectsBadInput) {
  const Problem p = correlatedProblem(16, 64, 256, 16);
  const at::Tensor w = p.weight.clone(), h = p.hessian.clone();
  const GptqResult r = gptqQuantize(w, h, QuantSpec::channel(4));
  EXPECT_TRUE(at::equal(w, p.weight));
  EXPECT_TRUE(at::equal(h, p.hessian));
  EXPECT_EQ(gptqQuantize(w.to(at::kBFloat16), h, QuantSpec::channel(4)).quant.dequantized.scalar_type(),
            at::kBFloat16);
  EXPECT_THROW(gptqQuantize(w, at::zeros({32, 32}), QuantSpec::channel(4)), InputError);
  GptqOptions bad;
  bad.damp = 0;
  EXPECT_THROW(gptqQuantize(w, h, QuantSpec::channel(4), bad), InputError);
  bad = {};
  bad.blockSize = 0;
  EXPECT_THROW(gptqQuantize(w, h, QuantSpec::channel(4), bad), InputError);
  EXPECT_THROW(gptqQuantize(w, h, QuantSpec::group(4, 48)), InputError);
}

TEST(QuantGroupWeight, RoundTripsExactlyToTheSolversWeight) {
  const Problem p = correlatedProblem(32, 256, 512, 17);
  for (int bits : {2, 3, 4, 5, 8}) {
    for (bool symmetric : {true, false}) {
      std::vector<QuantSpec> specs = {QuantSpec::group(bits, 32, symmetric), QuantSpec::group(bits, 64, symmetric),
                                      QuantSpec::group(bits, 128, symmetric), QuantSpec::channel(bits, symmetric),
                                      QuantSpec::tensor(bits, symmetric)};
      for (const QuantSpec& spec : specs) {
        SCOPED_TRACE(spec.label());
        for (const QuantResult& r : {rtnQuantize(p.weight, spec), gptqQuantize(p.weight, p.hessian, spec).quant}) {
          const QuantGroupWeight packed = QuantGroupWeight::pack(r, spec);
          EXPECT_TRUE(at::equal(packed.unpack(), r.dequantized));
          int64_t bytes = 0;
          for (const at::Tensor* t : {&packed.codes, &packed.scales, &packed.zeros})
            if (t->defined()) bytes += t->numel() * int64_t(t->element_size());
          EXPECT_EQ(packed.storedBytes(), bytes);
          EXPECT_TRUE(at::equal(packed.unpackCodes(), r.codes));
          EXPECT_EQ(packed.unpack(at::kHalf).scalar_type(), at::kHalf);
          const int64_t g = spec.columnsPerGroup(256);
          const double scaleRows = spec.granularity == QuantSpec::Granularity::Tensor ? 1.0 / 32 : 1.0;
          EXPECT_DOUBLE_EQ(packed.bitsPerWeight(), bits + scaleRows * (16.0 + (symmetric ? 0 : 8)) / g);
        }
      }
    }
  }
  EXPECT_DOUBLE_EQ(QuantGroupWeight::pack(rtnQuantize(p.weight, QuantSpec::group(4, 128)), QuantSpec::group(4, 128))
                       .bitsPerWeight(),
                   4.125);
}

TEST(QuantGroupWeight, ThreeBitCodesAreALittleEndianBitStream) {
  QuantResult r;
  r.codes = at::tensor({-3, 3, 0, 1, 2, -1, -2, 0}, at::kChar).reshape({1, 8});   // biased: 1 7 4 5 6 3 2 4
  r.scales = at::ones({1, 1});
  const QuantGroupWeight packed = QuantGroupWeight::pack(r, QuantSpec::channel(3));
  ASSERT_EQ(packed.codes.sizes(), at::IntArrayRef({1, 3}));   // 8 codes × 3 bits = 3 bytes
  // stream bits: 1=100 7=111 4=001 5=101 6=011 3=110 2=010 4=001 (LSB first per code)
  uint32_t stream = 0;
  const int biased[8] = {1, 7, 4, 5, 6, 3, 2, 4};
  for (int c = 0; c < 8; ++c) stream |= uint32_t(biased[c]) << (3 * c);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(packed.codes[0][b].item<int>(), int((stream >> (8 * b)) & 0xFF)) << b;
  EXPECT_TRUE(at::equal(packed.unpackCodes(), r.codes));
  EXPECT_EQ(packed.storedBytes(), 3 + 2);
}

TEST(QuantGroupWeight, PacksTwoNibblesPerByteLowNibbleEvenColumn) {
  QuantResult r;
  r.codes = at::tensor({-7, 7, 0, 1}, at::kChar).reshape({1, 4});
  r.scales = at::ones({1, 1});
  const QuantGroupWeight packed = QuantGroupWeight::pack(r, QuantSpec::channel(4));
  ASSERT_EQ(packed.codes.scalar_type(), at::kByte);
  ASSERT_EQ(packed.codes.sizes(), at::IntArrayRef({1, 2}));
  EXPECT_EQ(packed.codes[0][0].item<int>(), 1 + 15 * 16);
  EXPECT_EQ(packed.codes[0][1].item<int>(), 8 + 9 * 16);
  EXPECT_EQ(packed.storedBytes(), 2 + 2);
}

TEST(QuantGroupWeight, RejectsWhatItCannotPack) {
  const at::Tensor w = at::randn({8, 64});
  QuantResult threeBits = rtnQuantize(at::randn({8, 60}), QuantSpec::channel(3));   // 180 bits: not whole bytes
  EXPECT_THAT([&] { QuantGroupWeight::pack(threeBits, QuantSpec::channel(3)); },
              testing::ThrowsMessage<InputError>(HasSubstr("do not fill whole bytes")));
  const QuantSpec spec = QuantSpec::group(4, 32);
  QuantResult r = rtnQuantize(w, spec);
  EXPECT_THROW(QuantGroupWeight::pack(r, QuantSpec::group(4, 16)), InputError);  // scales do not match
  EXPECT_THROW(QuantGroupWeight::pack(r, QuantSpec::group(4, 32, false)), InputError);  // int8 codes, no zeros
  QuantResult odd = rtnQuantize(at::randn({8, 63}), QuantSpec::channel(4));
  EXPECT_THROW(QuantGroupWeight::pack(odd, QuantSpec::channel(4)), InputError);
  QuantResult inexact = r;
  inexact.scales = r.scales * 1.0001f;
  EXPECT_THROW(QuantGroupWeight::pack(inexact, spec), InputError);
  QuantGroupWeight packed = QuantGroupWeight::pack(r, spec);
  packed.codes = packed.codes.narrow(1, 0, 16);
  EXPECT_THROW(packed.unpack(), InputError);
}

// The block structs of formats/PackedBlocks.h are what the formats count: one block's worth of weight packs to
// exactly sizeof(block) bytes.
TEST(PackedBlocks, FormatsStoreExactlyTheirBlocks) {
  at::manual_seed(34);
  const QuantSpec g128 = QuantSpec::group(4, 128);
  const QuantGroupWeight q4 = QuantGroupWeight::pack(rtnQuantize(at::randn({1, 128}), g128), g128);
  EXPECT_EQ(q4.storedBytes(), int64_t(sizeof(packed::block_int4_g128)));
  EXPECT_DOUBLE_EQ(q4.bitsPerWeight(), 4.125);
  EXPECT_EQ(q4.codes.numel(), int64_t(sizeof(packed::block_int4x32)) * 4);

  at::Tensor keep = at::zeros({1, 32}, at::kBool);
  for (int64_t c = 0; c < 32; c += 4) keep[0][c] = keep[0][c + 3] = true;
  const BitmaskNMWeight b = BitmaskNMWeight::pack(at::randn({1, 32}).to(at::kHalf), keep, 2, 4);
  EXPECT_EQ(b.storedBytes(), int64_t(sizeof(packed::block_bitmask24_f16)));
  EXPECT_DOUBLE_EQ(b.bitsPerWeight(), 9.0);

  // 2:4 + int4: the mask word + the 16 kept values' nibbles, plus the kept values' one fp16 scale.
  const QuantSpec channel = QuantSpec::channel(4);
  const QuantGroupWeight kept = QuantGroupWeight::pack(rtnQuantize(b.values.to(at::kFloat), channel), channel);
  EXPECT_EQ(b.masks.numel() * 4 + kept.storedBytes(), int64_t(sizeof(packed::block_bitmask24_int4)) + 2);
}

TEST(QuantGroupWeight, ColumnPermutationsAreChecked) {
  EXPECT_NO_THROW(checkColumnPermutation(at::randperm(40, at::kLong).to(at::kInt), 40));
  EXPECT_THAT([] { checkColumnPermutation(at::arange(39, at::kInt), 40); },
              testing::ThrowsMessage<InputError>(HasSubstr("[40]")));
  at::Tensor repeated = at::arange(40, at::kInt);
  repeated[7] = 3;
  EXPECT_THAT([&] { checkColumnPermutation(repeated, 40); },
              testing::ThrowsMessage<InputError>(HasSubstr("column 7 is missing")));
  at::Tensor outside = at::arange(40, at::kInt);
  outside[0] = 40;
  EXPECT_THAT([&] { checkColumnPermutation(outside, 40); },
              testing::ThrowsMessage<InputError>(HasSubstr("outside 0..39")));
  EXPECT_THROW(checkColumnPermutation(at::arange(40, at::kFloat), 40), InputError);
  EXPECT_THROW(checkColumnPermutation(at::Tensor(), 40), InputError);
}

}  // namespace
}  // namespace pareto
