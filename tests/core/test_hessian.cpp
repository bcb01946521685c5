// The streamed input Hessian and the Hessian discrepancy δ, checked against direct dense computations.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "analysis/HessianDiscrepancy.h"
#include "calib/HessianAccumulator.h"
#include "util/Error.h"

namespace pareto {
namespace {

using ::testing::HasSubstr;

double relativeError(const at::Tensor& actual, const at::Tensor& expected) {
  const at::Tensor a = actual.to(at::kDouble).cpu(), e = expected.to(at::kDouble).cpu();
  return (a - e).abs().max().item<double>() / e.abs().max().item<double>();
}

// Σ w x xᵀ straight from the definition, in float64.
at::Tensor directWeightedHessian(const at::Tensor& x, const at::Tensor& w) {
  const at::Tensor rows = x.to(at::kDouble).cpu().reshape({-1, x.size(-1)});
  const at::Tensor weights = w.to(at::kDouble).cpu().reshape({-1, 1});
  return at::matmul(rows.t(), rows * weights);
}

// δ from the definition with an absolute damping λ: L⁻¹ D L⁻ᵀ formed explicitly in float64 and fully
// diagonalised, on the target's device.
double denseDeltaWithLambda(const at::Tensor& calibration, const at::Tensor& target, double lambda) {
  const at::Tensor t = target.to(at::kDouble), c = calibration.to(t.options());
  at::Tensor damped = t.clone();
  damped.diagonal().add_(lambda);
  const at::Tensor lower = at::linalg_cholesky(damped);
  const at::Tensor left = at::linalg_solve_triangular(lower, c - t, /*upper=*/false);      // L⁻¹ D
  const at::Tensor whitened = at::linalg_solve_triangular(lower, left.t(), /*upper=*/false);  // L⁻¹ D L⁻ᵀ
  return at::linalg_eigvalsh(whitened).abs().max().item<double>();
}

// λ = damp · mean(diag H_t), as the library damps.
double denseDelta(const at::Tensor& calibration, const at::Tensor& target, double damp) {
  return denseDeltaWithLambda(calibration, target, damp * target.to(at::kDouble).diagonal().mean().item<double>());
}

// Per-input activation scales, log-normal like real hidden states; modules compared share them.
at::Tensor randomScales(int64_t n, const at::TensorOptions& options = at::kDouble) {
  return at::exp(at::randn({n}, options));
}

// A population of activations x = z A with z standard normal: A = diag(scales)(I + mixing·G/√n), so that inputs
// correlate. Two populations with the same scales differ like text and decode activations do.
at::Tensor randomPopulation(const at::Tensor& scales, double mixing) {
  const int64_t n = scales.size(0);
  return scales.unsqueeze(1) * (at::eye(n, scales.options()) + mixing * at::randn({n, n}, scales.options()) /
                                                                  std::sqrt(double(n)));
}

// The normalised Hessian XᵀX/m of m rows drawn from a population.
at::Tensor sampleHessian(const at::Tensor& population, int64_t rows) {
  const at::Tensor x = at::matmul(at::randn({rows, population.size(0)}, population.options()), population);
  return at::matmul(x.t(), x) / double(rows);
}

at::Tensor randomHessian(const at::Tensor& scales, int64_t rows, double mixing) {
  return sampleHessian(randomPopulation(scales, mixing), rows);
}

// --- HessianAccumulator -----------------------------------------------------------------------------------

void checkAccumulatorMatchesDirect(c10::Device device) {
  at::manual_seed(1);
  const int64_t n = 48;
  HessianAccumulator accumulator(n, device, "model.layers.0.mlp.down_proj");
  accumulator.setChunkRows(7);   // several chunks per batch, zero-weight rows on both sides of the boundaries
  at::Tensor expected = at::zeros({n, n}, at::kDouble);
  double weightSum = 0;
  int64_t positive = 0;
  for (int batch = 0; batch < 4; ++batch) {
    const at::Tensor x = at::randn({3, 11, n}).to(device);
    at::Tensor w = at::rand({3, 11}, at::kDouble);
    w.masked_fill_(at::rand({3, 11}) < 0.3, 0.0);
    accumulator.add(x, w.to(device));
    expected += directWeightedHessian(x, w);
    weightSum += w.sum().item<double>();
    positive += (w > 0).sum().item<int64_t>();
  }
  const at::Tensor unweighted = at::randn({5, n}).to(device);
  accumulator.add(unweighted);
  expected += directWeightedHessian(unweighted, at::ones({5}));

  EXPECT_EQ(accumulator.sum().scalar_type(), at::kFloat);
  EXPECT_EQ(accumulator.sum().device(), device);
  EXPECT_LT(relativeError(accumulator.sum(), expected), 1e-5);
  EXPECT_EQ(accumulator.samples(), positive + 5);
  EXPECT_NEAR(accumulator.weightSum(), weightSum + 5, 1e-9);
  EXPECT_LT(relativeError(accumulator.mean(), expected / (weightSum + 5)), 1e-5);
}

void checkAccumulatorAcceptsBfloat16(c10::Device device) {
  at::manual_seed(2);
  const at::Tensor x = at::randn({2, 9, 32}).to(device, at::kBFloat16);
  HessianAccumulator accumulator(32, device, "q_proj");
  accumulator.add(x);
  EXPECT_LT(relativeError(accumulator.sum(), directWeightedHessian(x, at::ones({18}))), 1e-5);
  EXPECT_EQ(accumulator.samples(), 18);
}

TEST(HessianAccumulator, MatchesWeightedProductCpu) { checkAccumulatorMatchesDirect(at::kCPU); }
TEST(HessianAccumulator, AcceptsBfloat16Cpu) { checkAccumulatorAcceptsBfloat16(at::kCPU); }

TEST(HessianAccumulator, MatchesWeightedProductCuda) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this build or machine";
  checkAccumulatorMatchesDirect(c10::Device(at::kCUDA, 0));
  checkAccumulatorAcceptsBfloat16(c10::Device(at::kCUDA, 0));
  // CPU activations into a CUDA Hessian are moved chunk by chunk.
  HessianAccumulator accumulator(16, c10::Device(at::kCUDA, 0));
  const at::Tensor x = at::randn({40, 16});
  accumulator.add(x);
  EXPECT_LT(relativeError(accumulator.sum(), directWeightedHessian(x, at::ones({40}))), 1e-5);
}

TEST(HessianAccumulator, ZeroWeightRowsAreNotSamples) {
  HessianAccumulator accumulator(4, at::kCPU, "o_proj");
  accumulator.add(at::ones({6, 4}), at::zeros({6}));
  EXPECT_EQ(accumulator.samples(), 0);
  EXPECT_EQ(accumulator.weightSum(), 0);
  EXPECT_EQ(accumulator.sum().abs().max().item<float>(), 0.0f);
  try {
    accumulator.mean();
    FAIL() << "mean of an empty accumulator must throw";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("o_proj"));
  }
}

TEST(HessianAccumulator, RejectsBadInputNamingTheModule) {
  HessianAccumulator accumulator(8, at::kCPU, "model.layers.3.self_attn.k_proj");
  const auto expectRejected = [&](const at::Tensor& x, const at::Tensor& w, const char* what) {
    try {
      accumulator.add(x, w);
      ADD_FAILURE() << "accepted " << what;
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("model.layers.3.self_attn.k_proj")) << what;
    }
  };
  expectRejected(at::randn({4, 7}), {}, "a wrong last dimension");
  expectRejected(at::randn({2, 4, 8}), at::ones({2, 5}), "weights of the wrong shape");
  expectRejected(at::randn({2, 4, 8}), at::ones({8}), "weights of the wrong rank");
  expectRejected(at::randn({4, 8}), -at::ones({4}), "negative weights");
  expectRejected(at::randn({4, 8}), at::full({4}, std::numeric_limits<double>::quiet_NaN()), "NaN weights");
  expectRejected(at::ones({4, 8}, at::kLong), {}, "integer activations");
  EXPECT_EQ(accumulator.samples(), 0);
  EXPECT_THROW(HessianAccumulator(0, at::kCPU, "x"), InputError);
}

TEST(HessianAccumulator, MergeEqualsOneAccumulator) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({30, 24});
  const at::Tensor w = at::rand({30});
  HessianAccumulator whole(24, at::kCPU), first(24, at::kCPU), second(24, at::kCPU);
  whole.add(x, w);
  first.add(x.narrow(0, 0, 13), w.narrow(0, 0, 13));
  second.add(x.narrow(0, 13, 17), w.narrow(0, 13, 17));
  first.merge(second);
  EXPECT_LT(relativeError(first.sum(), whole.sum()), 1e-5);
  EXPECT_EQ(first.samples(), 30);
  EXPECT_NEAR(first.weightSum(), whole.weightSum(), 1e-9);
  HessianAccumulator other(25, at::kCPU, "gate_proj");
  try {
    first.merge(other);
    FAIL() << "merged different widths";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("gate_proj"));
  }
}

// --- Hessian discrepancy ----------------------------------------------------------------------------------

void checkDiscrepancyIdentities(c10::Device device) {
  at::manual_seed(4);
  const at::Tensor h = randomHessian(randomScales(96), 400, 0.3).to(device);
  const DiscrepancyResult self = hessianDiscrepancy(h, h);
  EXPECT_LT(self.delta, 1e-6);
  EXPECT_TRUE(self.converged);

  DiscrepancyOptions tiny;
  tiny.damp = 1e-8;
  const DiscrepancyResult half = hessianDiscrepancy(h, 2 * h, tiny, "up_proj");
  EXPECT_NEAR(half.delta, 0.5, 1e-3);
  EXPECT_NEAR(half.extremeEigenvalue, -0.5, 1e-3);
  EXPECT_TRUE(half.converged);
  EXPECT_EQ(half.dampUsed, 1e-8);
}

struct ModuleCase {
  const char* label;
  int64_t n;
  bool samePopulation;            // H_c and H_t differ only by sampling noise: a clustered spectrum, slow Lanczos
  bool rankDeficientCalibration;  // fewer calibration rows than inputs
  bool deadTargetInput;           // input 5 never active in the target
};

void checkDiscrepancyAgainstDense(c10::Device device, const ModuleCase& module) {
  at::manual_seed(uint64_t(module.n));
  const at::Tensor scales = randomScales(module.n);
  const at::Tensor targetPopulation = randomPopulation(scales, 0.3);
  const at::Tensor calibrationPopulation = module.samePopulation ? targetPopulation : randomPopulation(scales, 0.5);
  at::Tensor target = sampleHessian(targetPopulation, 3 * module.n);
  const at::Tensor calibration =
      sampleHessian(calibrationPopulation, module.rankDeficientCalibration ? module.n / 2 : 2 * module.n);
  if (module.deadTargetInput) {
    target.select(0, 5).zero_();
    target.select(1, 5).zero_();
  }
  const DiscrepancyResult result = hessianDiscrepancy(calibration.to(device), target.to(device), {}, module.label);
  const double expected = denseDelta(calibration, target, result.dampUsed);
  EXPECT_TRUE(result.converged) << module.label << " after " << result.iterations << " iterations";
  EXPECT_EQ(result.dampUsed, 0.01) << module.label;
  EXPECT_NEAR(result.delta, expected, 1e-3 * expected) << module.label << " (" << result.iterations << " iterations)";
  std::printf("  %-40s %-4s delta=%-10.6g dense=%-10.6g iterations=%d\n", module.label,
              device.is_cpu() ? "cpu" : "cuda", result.delta, expected, result.iterations);
}

const ModuleCase kModules[] = {
    {"n64", 64, false, false, false},
    {"n200", 200, false, false, false},
    {"n512", 512, false, false, false},
    {"n64 same population", 64, true, false, false},
    {"n200 same population", 200, true, false, false},
    {"n512 same population", 512, true, false, false},
    {"n200 rank-deficient calibration", 200, false, true, false},
    {"n512 same population, rank-deficient", 512, true, true, false},
    {"n200 dead target input", 200, false, false, true},
    {"n512 dead input, rank-deficient", 512, true, true, true},
};

TEST(HessianDiscrepancy, IdentitiesCpu) { checkDiscrepancyIdentities(at::kCPU); }

TEST(HessianDiscrepancy, MatchesDenseEigendecompositionCpu) {
  for (const ModuleCase& module : kModules) checkDiscrepancyAgainstDense(at::kCPU, module);
}

TEST(HessianDiscrepancy, MatchesDenseEigendecompositionCuda) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this build or machine";
  const c10::Device cuda(at::kCUDA, 0);
  checkDiscrepancyIdentities(cuda);
  for (const ModuleCase& module : kModules) checkDiscrepancyAgainstDense(cuda, module);
}

TEST(HessianDiscrepancy, Float32PathMatchesDense) {
  // Wider than the float64 limit the CPU computes in float32, as a GPU does. The target is block diagonal (a
  // dense 96-wide block, the rest diagonal) and the calibration differs only inside that block, so the dense
  // reference needs only the block, with the library's λ from the whole diagonal.
  at::manual_seed(7);
  const int64_t n = 4100, block = 96;
  const at::Tensor scales = randomScales(n, at::kFloat);
  at::Tensor target = at::diag(scales * scales);
  const at::Tensor blockScales = scales.narrow(0, 0, block);
  const at::Tensor targetBlock = randomHessian(blockScales, 3 * block, 0.3);
  target.narrow(0, 0, block).narrow(1, 0, block).copy_(targetBlock);
  const at::Tensor calibrationBlock = randomHessian(blockScales, block / 2, 0.5);
  at::Tensor calibration = target.clone();
  calibration.narrow(0, 0, block).narrow(1, 0, block).copy_(calibrationBlock);

  const DiscrepancyResult result = hessianDiscrepancy(calibration, target, {}, "wide");
  const double lambda = result.dampUsed * target.to(at::kDouble).diagonal().mean().item<double>();
  const double expected = denseDeltaWithLambda(calibrationBlock, targetBlock, lambda);
  EXPECT_TRUE(result.converged);
  EXPECT_NEAR(result.delta, expected, 1e-3 * expected) << result.iterations << " iterations";
}

TEST(HessianDiscrepancy, DeterministicForASeed) {
  at::manual_seed(8);
  const at::Tensor scales = randomScales(128);
  const at::Tensor target = randomHessian(scales, 300, 0.3), calibration = randomHessian(scales, 200, 0.3);
  const DiscrepancyResult a = hessianDiscrepancy(calibration, target);
  const DiscrepancyResult b = hessianDiscrepancy(calibration, target);
  EXPECT_EQ(a.delta, b.delta);
  EXPECT_EQ(a.iterations, b.iterations);
}

TEST(HessianDiscrepancy, IterationCapReportsNotConverged) {
  at::manual_seed(9);
  const at::Tensor scales = randomScales(300);
  const at::Tensor target = randomHessian(scales, 900, 0.3), calibration = randomHessian(scales, 150, 0.5);
  DiscrepancyOptions capped;
  capped.maxIterations = 3;
  const DiscrepancyResult result = hessianDiscrepancy(calibration, target, capped);
  EXPECT_FALSE(result.converged);
  EXPECT_EQ(result.iterations, 3);
  EXPECT_GT(result.delta, 0);
}

TEST(HessianDiscrepancy, RetriesWithLargerDamping) {
  // An indefinite target (a negative eigenvalue of −0.5, mean diagonal 1) cannot factorise with 1% damping;
  // 100% damping makes it positive definite.
  at::Tensor target = at::eye(4, at::kDouble);
  target[0][0] = 1.0;
  target[0][1] = target[1][0] = 1.5;
  const DiscrepancyResult result = hessianDiscrepancy(at::eye(4, at::kDouble), target, {}, "indefinite");
  EXPECT_NEAR(result.dampUsed, 1.0, 1e-12);
  EXPECT_TRUE(result.converged);
  EXPECT_NEAR(result.delta, denseDelta(at::eye(4, at::kDouble), target, result.dampUsed), 1e-6);
}

TEST(HessianDiscrepancy, RejectsBadInputNamingTheModule) {
  const auto expectRejected = [](const at::Tensor& c, const at::Tensor& t, const char* what) {
    try {
      hessianDiscrepancy(c, t, {}, "model.layers.9.mlp.up_proj");
      ADD_FAILURE() << "accepted " << what;
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("model.layers.9.mlp.up_proj")) << what;
    }
  };
  expectRejected(at::eye(4), at::eye(5), "different sizes");
  expectRejected(at::ones({4, 3}), at::ones({4, 3}), "non-square");
  expectRejected(at::eye(4), at::zeros({4, 4}), "a zero target");
  at::Tensor poisoned = at::eye(4);
  poisoned[1][2] = std::numeric_limits<float>::infinity();
  expectRejected(poisoned, at::eye(4), "a non-finite calibration");
}

TEST(HessianDiscrepancy, SummaryFractionAndMedian) {
  // ratios 2, 0.5, 3, 1 → sorted 0.5 1 2 3, median 1.5; decode smaller in modules 0 and 2.
  const DiscrepancySummary even = summarizeDiscrepancies({2, 1, 3, 4}, {1, 2, 1, 4});
  EXPECT_EQ(even.modules, 4);
  EXPECT_DOUBLE_EQ(even.fractionDecodeSmaller, 0.5);
  EXPECT_DOUBLE_EQ(even.medianRatio, 1.5);
  // ratios 2, 0.5, 3 → median 2; decode smaller in 2 of 3.
  const DiscrepancySummary odd = summarizeDiscrepancies({2, 1, 3}, {1, 2, 1});
  EXPECT_EQ(odd.modules, 3);
  EXPECT_DOUBLE_EQ(odd.fractionDecodeSmaller, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(odd.medianRatio, 2.0);
  // A zero decode δ gives an infinite ratio (or 1 when both are zero).
  const DiscrepancySummary zeros = summarizeDiscrepancies({1, 0, 5}, {0, 0, 10});
  EXPECT_DOUBLE_EQ(zeros.medianRatio, 1.0);
  EXPECT_DOUBLE_EQ(zeros.fractionDecodeSmaller, 1.0 / 3.0);
  const DiscrepancySummary empty = summarizeDiscrepancies({}, {});
  EXPECT_EQ(empty.modules, 0);
  EXPECT_TRUE(std::isnan(empty.medianRatio));
  EXPECT_THROW(summarizeDiscrepancies({1, 2}, {1}), InputError);
  EXPECT_THROW(summarizeDiscrepancies({-1}, {1}), InputError);
}

TEST(HessianDiscrepancy, TimingWidth4096Cpu) {
  at::manual_seed(10);
  const int64_t n = 4096;
  // Both Hessians from fewer rows than inputs, as with a few thousand calibration tokens: damping carries them.
  const at::Tensor scales = randomScales(n, at::kFloat);
  const at::Tensor target = randomHessian(scales, n / 8, 0).to(at::kDouble);
  const at::Tensor calibration = randomHessian(scales, n / 8, 0).to(at::kDouble);
  const auto begin = std::chrono::steady_clock::now();
  const DiscrepancyResult result = hessianDiscrepancy(calibration, target, {}, "timing");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::printf("  n=4096 CPU float64: delta=%.6g iterations=%d converged=%d in %.2f s (%d threads)\n", result.delta,
              result.iterations, int(result.converged), seconds, at::get_num_threads());
  EXPECT_TRUE(result.converged);
}

TEST(HessianDiscrepancy, Width14336Cuda) {
  // The widest module of the models studied (an MLP down projection): both Hessians accumulated on the GPU from
  // bf16 activations of one population (δ is sampling noise, a clustered spectrum), δ in float32 against the
  // dense float64 definition. Prints times.
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this build or machine";
  const c10::Device cuda(at::kCUDA, 0);
  const auto options = at::TensorOptions().device(cuda).dtype(at::kFloat);
  const int64_t n = 14336, batch = 8192, batches = 4, promptRows = 100;
  at::manual_seed(11);
  const at::Tensor population = randomPopulation(randomScales(n, options), 0.3);
  HessianAccumulator target(n, cuda, "wide.target"), calibration(n, cuda, "wide.calibration");
  target.sum()[0][0].item<float>();
  auto begin = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < batches; ++step) {
    at::Tensor weights = at::rand({2, batch / 2}, options) + 0.01;
    weights.narrow(1, 0, promptRows).zero_();
    target.add(at::matmul(at::randn({2, batch / 2, n}, options), population).to(at::kBFloat16), weights);
    calibration.add(at::matmul(at::randn({batch, n}, options), population).to(at::kBFloat16));
  }
  target.sum()[0][0].item<float>();
  const double accumulateSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_EQ(target.samples(), batches * (batch - 2 * promptRows));

  begin = std::chrono::steady_clock::now();
  const at::Tensor calibrationMean = calibration.mean(), targetMean = target.mean();
  const DiscrepancyResult result = hessianDiscrepancy(calibrationMean, targetMean, {}, "wide");
  const double deltaSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  begin = std::chrono::steady_clock::now();
  const double expected = denseDelta(calibrationMean, targetMean, result.dampUsed);
  const double denseSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  std::printf("  n=14336 CUDA: accumulating 2x%lld bf16 rows (with generating them) %.2f s; delta=%.6g "
              "iterations=%d converged=%d in %.2f s; dense float64 %.6g in %.2f s\n",
              (long long)(batches * batch), accumulateSeconds, result.delta, result.iterations,
              int(result.converged), deltaSeconds, expected, denseSeconds);
  EXPECT_TRUE(result.converged);
  EXPECT_NEAR(result.delta, expected, 1e-3 * expected);
}

}  // namespace
}  // namespace pareto
