// SpQR: options, the two-level grid against a direct scalar implementation (H = I, no outliers), outlier
// selection (ratio and threshold) and CSR, reconstruction error against RTN g16 and GPTQ g128 with planted
// large weights, the bit packer, and the packed SpqrWeight format (exact round trip, bits per weight).
#include <ATen/ATen.h>
#include <c10/util/Half.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "compress/Gptq.h"
#include "compress/QuantGrid.h"
#include "compress/Spqr.h"
#include "formats/BitPacking.h"
#include "formats/SpqrWeight.h"
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

SpqrOptions ratioOptions(double ratio, int bits = 3) {
  SpqrOptions o;
  o.bits = bits;
  o.outlierRatio = ratio;
  return o;
}

// Saliency w² / [(H + λI)⁻¹]_jj in float64, λ = damp · mean diag H.
at::Tensor saliencyOf(const at::Tensor& weight, const at::Tensor& hessian, double damp) {
  at::Tensor h = hessian.to(at::kDouble).clone();
  h.diagonal().add_(damp * h.diagonal().mean().item<double>());
  return weight.to(at::kDouble).square() / at::inverse(h).diagonal().unsqueeze(0);
}

// ---- a direct scalar two-level quantizer (H = I: no error propagation, no outliers) ----

float halfUpScalar(float x) {
  const c10::Half h(x);
  const float back = h;
  if (!(back < x)) return back;
  uint16_t bits = h.x;
  if (back > 0) bits += 1;
  else if (back < 0) bits -= 1;
  else bits = 1;
  return float(c10::Half(bits, c10::Half::from_bits()));
}
float halfDownScalar(float x) { return -halfUpScalar(-x); }

struct TwoLevel {
  std::vector<float> weight;  // ŵ
  std::vector<int> codes;
};

TwoLevel directTwoLevel(const at::Tensor& weight, int bits, int64_t g, int scaleBits, int64_t sg) {
  const at::Tensor w = weight.to(at::kFloat).contiguous();
  const int64_t rows = w.size(0), cols = w.size(1), groups = cols / g;
  const float* data = w.data_ptr<float>();
  const float maxq = float((1 << bits) - 1), maxq2 = float((1 << scaleBits) - 1);
  TwoLevel out;
  out.weight.assign(rows * cols, 0);
  out.codes.assign(rows * cols, 0);
  std::vector<float> s(rows), z(rows), sq(rows), zq(rows);
  auto second = [&](const std::vector<float>& x, std::vector<float>& xq) {
    for (int64_t b = 0; b < rows; b += sg) {
      float lo = x[b], hi = x[b];
      for (int64_t r = b; r < b + sg; ++r) lo = std::min(lo, x[r]), hi = std::max(hi, x[r]);
      const float base = halfDownScalar(lo);
      const float range = hi - base;
      const float step = halfUpScalar(range > 0 ? range / maxq2 : 1.0f);
      for (int64_t r = b; r < b + sg; ++r) {
        const float code = std::min(std::max(std::nearbyint((x[r] - base) / step), 0.0f), maxq2);
        const float product = code * step;
        xq[r] = base + product;
      }
    }
  };
  for (int64_t gi = 0; gi < groups; ++gi) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* v = data + r * cols + gi * g;
      float lo = v[0], hi = v[0];
      for (int64_t k = 0; k < g; ++k) lo = std::min(lo, v[k]), hi = std::max(hi, v[k]);
      s[r] = std::max((hi - lo) / maxq, 5.9604644775390625e-08f);
      z[r] = -lo / s[r];
    }
    second(s, sq);
    second(z, zq);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < g; ++k) {
        const int64_t at = r * cols + gi * g + k;
        const float scaled = data[at] / sq[r];
        const float q = std::min(std::max(std::nearbyint(scaled + zq[r]), 0.0f), maxq);
        out.codes[at] = int(q);
        out.weight[at] = (q - zq[r]) * sq[r];
      }
  }
  return out;
}

// ---- tests ----

TEST(Spqr, RejectsBadOptionsNamingTheModule) {
  const at::Tensor w = at::randn({32, 64}), h = at::eye(64);
  auto expectInputError = [&](const SpqrOptions& o, const std::string& text, const at::Tensor& weight) {
    EXPECT_THAT([&] { spqrQuantize(weight, at::eye(weight.size(1)), o, "model.layers.0.q_proj"); },
                testing::ThrowsMessage<InputError>(AllOf(HasSubstr("model.layers.0.q_proj"), HasSubstr(text))));
  };
  expectInputError(SpqrOptions{}, "neither", w);
  SpqrOptions both = ratioOptions(0.01);
  both.outlierThreshold = 1;
  expectInputError(both, "both", w);
  expectInputError(ratioOptions(1.5), "outlier ratio", w);
  expectInputError(ratioOptions(0.01, 9), "bits", w);
  SpqrOptions o = ratioOptions(0.01);
  o.scaleBits = 1;
  expectInputError(o, "scale bits", w);
  o = ratioOptions(0.01);
  o.damp = 0;
  expectInputError(o, "damp", w);
  expectInputError(ratioOptions(0.01), "scale group", at::randn({24, 64}));
  expectInputError(ratioOptions(0.01), "group size", at::randn({32, 40}));
  EXPECT_THROW(spqrQuantize(w, at::eye(32), ratioOptions(0.01)), InputError);
  EXPECT_NO_THROW(spqrQuantize(w, h, ratioOptions(0)));
}

TEST(Spqr, RatioZeroWithIdentityHessianIsTheDirectTwoLevelQuantizer) {
  at::manual_seed(3);
  const at::Tensor w = at::randn({48, 128}) * at::exp(at::randn({48, 1})) * at::exp(0.5 * at::randn({1, 128}));
  for (int bits : {2, 3, 4}) {
    SCOPED_TRACE(bits);
    const SpqrResult r = spqrQuantize(w, at::eye(128), ratioOptions(0, bits));
    EXPECT_EQ(r.report.outliers, 0);
    EXPECT_EQ(r.outlierValues.numel(), 0);
    const TwoLevel ref = directTwoLevel(w, bits, 16, 3, 16);
    const at::Tensor codes = r.codes.to(at::kInt).contiguous();
    const at::Tensor dq = r.dequantized.contiguous();
    int64_t mismatched = 0;
    double worst = 0;
    for (int64_t k = 0; k < w.numel(); ++k) {
      if (codes.data_ptr<int>()[k] != ref.codes[k]) {
        ++mismatched;
        continue;
      }
      worst = std::max(worst, double(std::abs(dq.data_ptr<float>()[k] - ref.weight[k])));
    }
    EXPECT_LE(mismatched, w.numel() / 1000) << "codes differ from the direct two-level quantizer";
    EXPECT_LE(worst, 1e-6 * w.abs().max().item<double>());
    EXPECT_TRUE((r.codes.to(at::kInt) <= (1 << bits) - 1).all().item<bool>());
    EXPECT_TRUE((r.scaleCodes.to(at::kInt) <= 7).all().item<bool>());
  }
}

void expectValidCsr(const SpqrResult& r, int64_t rows, int64_t cols) {
  const at::Tensor offsets = r.outlierRowOffsets.cpu().to(at::kLong);
  const at::Tensor columns = r.outlierColumns.cpu().to(at::kLong);
  ASSERT_EQ(r.outlierRowOffsets.scalar_type(), at::kInt);
  ASSERT_EQ(r.outlierColumns.scalar_type(), cols <= 32767 ? at::kShort : at::kInt);
  ASSERT_EQ(r.outlierValues.scalar_type(), at::kHalf);
  ASSERT_EQ(offsets.numel(), rows + 1);
  EXPECT_EQ(offsets[0].item<int64_t>(), 0);
  EXPECT_EQ(offsets[rows].item<int64_t>(), columns.numel());
  EXPECT_EQ(r.outlierValues.numel(), columns.numel());
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t a = offsets[row].item<int64_t>(), b = offsets[row + 1].item<int64_t>();
    ASSERT_LE(a, b);
    for (int64_t k = a; k < b; ++k) {
      const int64_t c = columns[k].item<int64_t>();
      ASSERT_GE(c, 0);
      ASSERT_LT(c, cols);
      if (k > a) ASSERT_GT(c, columns[k - 1].item<int64_t>());
    }
  }
}

// The dense [rows, cols] mask of the CSR outliers.
at::Tensor csrMask(const SpqrResult& r, int64_t rows, int64_t cols) {
  const at::Tensor counts = r.outlierRowOffsets.cpu().to(at::kLong).diff();
  const at::Tensor rowIndex = at::repeat_interleave(at::arange(rows, at::kLong), counts);
  at::Tensor mask = at::zeros({rows * cols}, at::kBool);
  if (rowIndex.numel() > 0) mask.index_fill_(0, rowIndex * cols + r.outlierColumns.cpu().to(at::kLong), true);
  return mask.reshape({rows, cols});
}

TEST(Spqr, RatioPicksExactlyTheMostSalientWeightsKeptExact) {
  const Problem p = correlatedProblem(64, 256, 512, 5, 0.01, 8);
  const int64_t rows = 64, cols = 256;
  for (double ratio : {0.01, 0.0037, 0.05}) {
    SCOPED_TRACE(ratio);
    const SpqrResult r = spqrQuantize(p.weight, p.hessian, ratioOptions(ratio));
    const int64_t expected = std::llround(ratio * rows * cols);
    EXPECT_EQ(r.report.outliers, expected);
    EXPECT_EQ(r.outlierValues.numel(), expected);
    expectValidCsr(r, rows, cols);
    const at::Tensor mask = csrMask(r, rows, cols);
    // Values in the result are exactly the stored fp16 values.
    EXPECT_TRUE(at::equal(r.dequantized.masked_select(mask), r.outlierValues.to(at::kFloat)));
    // The chosen ones are the most salient (up to float32 rounding of the saliency).
    const at::Tensor saliency = saliencyOf(p.weight, p.hessian, 0.01);
    const double chosenMin = saliency.masked_select(mask).min().item<double>();
    const double restMax = saliency.masked_select(mask.logical_not()).max().item<double>();
    EXPECT_GE(chosenMin, restMax * (1 - 1e-4));
  }
  // With H = I nothing is propagated: the outliers are W itself in fp16.
  const SpqrResult identity = spqrQuantize(p.weight, at::eye(cols), ratioOptions(0.02));
  const at::Tensor mask = csrMask(identity, rows, cols);
  EXPECT_TRUE(at::equal(identity.dequantized.masked_select(mask),
                        p.weight.masked_select(mask).to(at::kHalf).to(at::kFloat)));
}

TEST(Spqr, ThresholdPicksExactlyTheEntriesAbove) {
  const Problem p = correlatedProblem(32, 128, 256, 6, 0.02, 6);
  const at::Tensor saliency = saliencyOf(p.weight, p.hessian, 0.01);
  const at::Tensor sorted = std::get<0>(saliency.reshape({-1}).sort(/*stable=*/false, 0, /*descending=*/true));
  // A threshold in a clear gap of the sorted saliencies near the top 2%.
  int64_t k = saliency.numel() / 50;
  while (sorted[k].item<double>() > sorted[k - 1].item<double>() * (1 - 1e-3)) ++k;
  const double threshold = 0.5 * (sorted[k].item<double>() + sorted[k - 1].item<double>());
  SpqrOptions o;
  o.outlierThreshold = threshold;
  const SpqrResult r = spqrQuantize(p.weight, p.hessian, o);
  expectValidCsr(r, 32, 128);
  EXPECT_EQ(r.report.outliers, k);
  EXPECT_TRUE(at::equal(csrMask(r, 32, 128), saliency > threshold));
}

TEST(Spqr, BeatsRtnG16AndGptqG128WithPlantedLargeWeights) {
  const Problem p = correlatedProblem(128, 512, 1024, 7, 0.01, 10);
  const SpqrResult spqr = spqrQuantize(p.weight, p.hessian, ratioOptions(0.01));
  const QuantResult rtn = rtnQuantize(p.weight, QuantSpec::group(3, 16, false));
  const GptqResult gptq = gptqQuantize(p.weight, p.hessian, QuantSpec::group(3, 128, false));
  const double eSpqr = reconstructionError(p, spqr.dequantized);
  const double eRtn = reconstructionError(p, rtn.dequantized);
  const double eGptq = reconstructionError(p, gptq.quant.dequantized);
  std::printf("relative ||(W - Q) X^T||: SpQR 3-bit g16 1%% %.4f (%.3f bpw), RTN 3-bit g16 %.4f, "
              "GPTQ 3-bit g128 %.4f\n", eSpqr, spqr.bitsPerWeight(), eRtn, eGptq);
  EXPECT_LT(eSpqr, eRtn);
  EXPECT_LT(eSpqr, eGptq);
  // Outliers help: the same without them is worse.
  const double eNone = reconstructionError(p, spqrQuantize(p.weight, p.hessian, ratioOptions(0)).dequantized);
  EXPECT_LT(eSpqr, eNone);
}

TEST(SpqrBits, PackerRoundTripsEveryWidth) {
  at::manual_seed(8);
  for (int bits = 1; bits <= 8; ++bits) {
    for (int64_t n : {1, 7, 8, 9, 1000, 4099}) {
      const at::Tensor codes = at::randint(0, 1 << bits, {n}, at::kLong).to(at::kByte);
      const at::Tensor packed = packCodeBits(codes, bits);
      EXPECT_EQ(packed.numel(), (n + 7) / 8 * bits);
      EXPECT_TRUE(at::equal(unpackCodeBits(packed, bits, n), codes)) << bits << " bits, n = " << n;
    }
  }
  // Layout: 3-bit codes 1, 2 → bits 0..2 = 1, bits 3..5 = 2 → byte 0 = 1 + 16 = 17.
  const at::Tensor two = at::tensor(std::vector<int64_t>{1, 2}).to(at::kByte);
  EXPECT_EQ(packCodeBits(two, 3)[0].item<int>(), 17);
}

TEST(SpqrWeight, PackUnpackIsExactAndBitsPerWeightIsCounted) {
  const Problem p = correlatedProblem(64, 1024, 256, 9, 0.01, 8);
  for (double ratio : {0.0, 0.005, 0.01}) {
    SCOPED_TRACE(ratio);
    const SpqrResult r = spqrQuantize(p.weight, p.hessian, ratioOptions(ratio));
    const SpqrWeight packed = SpqrWeight::pack(r);
    EXPECT_TRUE(at::equal(packed.unpack(), r.dequantized));
    EXPECT_TRUE(at::equal(packed.unpackCodes(), r.codes));
    const double bpw = packed.bitsPerWeight();
    EXPECT_DOUBLE_EQ(bpw, double(packed.storedBytes()) * 8 / double(64 * 1024));
    EXPECT_DOUBLE_EQ(bpw, r.bitsPerWeight());
    // 3 + 2·3/16 + 64/256 = 3.625, + 32·65/65536 for the row offsets, + 32 bits per outlier.
    const double expected = 3.625 + 32.0 * 65 / 65536 + 32.0 * r.report.outliers / 65536;
    EXPECT_NEAR(bpw, expected, 1e-12);
    std::printf("ratio %.3f: %.4f bits per weight\n", ratio, bpw);
    if (ratio == 0.01) {
      EXPECT_GT(bpw, 3.6);
      EXPECT_LT(bpw, 4.0);
    }
  }
  // A bf16 weight keeps its dtype; unpack to bf16 matches.
  const at::Tensor w16 = p.weight.to(at::kBFloat16);
  const SpqrResult r16 = spqrQuantize(w16, p.hessian, ratioOptions(0.01));
  EXPECT_EQ(r16.dequantized.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(SpqrWeight::pack(r16).unpack(at::kBFloat16), r16.dequantized));
  // Corrupt parts are rejected.
  SpqrWeight bad = SpqrWeight::pack(spqrQuantize(p.weight, p.hessian, ratioOptions(0.01)));
  bad.outlierRowOffsets[3] = 1 << 20;
  EXPECT_THROW(bad.unpack(), InputError);
  SpqrWeight shortCodes = SpqrWeight::pack(spqrQuantize(p.weight, p.hessian, ratioOptions(0.01)));
  shortCodes.codes = shortCodes.codes.narrow(0, 0, 10);
  EXPECT_THROW(shortCodes.unpack(), InputError);
}

TEST(Spqr, RunsOnCuda) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this build or machine";
  const Problem p = correlatedProblem(64, 256, 512, 10, 0.01, 8);
  const SpqrResult gpu = spqrQuantize(p.weight.to(at::kCUDA), p.hessian.to(at::kCUDA), ratioOptions(0.01));
  ASSERT_EQ(gpu.dequantized.device().type(), at::kCUDA);
  EXPECT_EQ(gpu.report.outliers, std::llround(0.01 * 64 * 256));
  expectValidCsr(gpu, 64, 256);
  const SpqrWeight packed = SpqrWeight::pack(gpu);
  EXPECT_EQ(packed.codes.device().type(), at::kCUDA);
  EXPECT_TRUE(at::equal(packed.unpack(), gpu.dequantized));
  const SpqrResult cpu = spqrQuantize(p.weight, p.hessian, ratioOptions(0.01));
  EXPECT_NEAR(reconstructionError(p, gpu.dequantized), reconstructionError(p, cpu.dequantized),
              0.05 * reconstructionError(p, cpu.dequantized));
}

}  // namespace
}  // namespace pareto
