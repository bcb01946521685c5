// SpQR: options, the group quantizer (integer zero points, quantized scales) against a direct scalar
// implementation (H = I, no outliers: exactly equal), outlier selection up front and in the sweep (ratio and
// threshold) and CSR, reconstruction error against RTN g16 and GPTQ g128 with planted large weights, SpQR after
// pruning, the bit packer, and the packed SpqrWeight format (exact round trip, bits per weight = stored bytes).
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
#include "compress/SparseGpt.h"
#include "compress/Spqr.h"
#include "formats/BitPacking.h"
#include "formats/PackedBlocks.h"
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
  std::vector<int> zeroCodes;  // [rows, groups]
};

// The SpQR group quantizer on its own: per group of g columns of a row, min-max containing 0, s = (hi − lo)/maxq,
// s quantized on a second-level grid per sg rows, then the integer zero point z = round(−lo/ŝ) and
// q = round(w/ŝ + z), ŵ = (q − z)·ŝ; all in float32 scalars.
TwoLevel directTwoLevel(const at::Tensor& weight, int bits, int64_t g, int scaleBits, int64_t sg) {
  const at::Tensor w = weight.to(at::kFloat).contiguous();
  const int64_t rows = w.size(0), cols = w.size(1), groups = cols / g;
  const float* data = w.data_ptr<float>();
  const float maxq = float((1 << bits) - 1), maxq2 = float((1 << scaleBits) - 1);
  TwoLevel out;
  out.weight.assign(rows * cols, 0);
  out.codes.assign(rows * cols, 0);
  out.zeroCodes.assign(rows * groups, 0);
  std::vector<float> s(rows), lo(rows), sq(rows);
  for (int64_t gi = 0; gi < groups; ++gi) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* v = data + r * cols + gi * g;
      float low = 0, high = 0;
      for (int64_t k = 0; k < g; ++k) low = std::min(low, v[k]), high = std::max(high, v[k]);
      lo[r] = low;
      s[r] = std::max((high - low) / maxq, 5.9604644775390625e-08f);
    }
    for (int64_t b = 0; b < rows; b += sg) {
      float smin = s[b], smax = s[b];
      for (int64_t r = b; r < b + sg; ++r) smin = std::min(smin, s[r]), smax = std::max(smax, s[r]);
      const float base = halfDownScalar(smin);
      const float range = smax - base;
      const float step = halfUpScalar(range > 0 ? range / maxq2 : 1.0f);
      for (int64_t r = b; r < b + sg; ++r) {
        const float code = std::min(std::max(std::nearbyint((s[r] - base) / step), 0.0f), maxq2);
        const float product = code * step;
        sq[r] = base + product;
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float z = std::min(std::max(std::nearbyint(-lo[r] / sq[r]), 0.0f), maxq);
      out.zeroCodes[r * groups + gi] = int(z);
      for (int64_t k = 0; k < g; ++k) {
        const int64_t at = r * cols + gi * g + k;
        const float scaled = data[at] / sq[r];
        const float q = std::min(std::max(std::nearbyint(scaled + z), 0.0f), maxq);
        out.codes[at] = int(q);
        out.weight[at] = (q - z) * sq[r];
      }
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

// "SpQR with outlier ratio 0 equals its group quantizer": with H = I nothing is propagated, so the sweep must
// reproduce the group quantizer exactly, code for code and bit for bit.
TEST(Spqr, RatioZeroWithIdentityHessianIsExactlyItsGroupQuantizer) {
  at::manual_seed(3);
  const at::Tensor w = at::randn({48, 128}) * at::exp(at::randn({48, 1})) * at::exp(0.5 * at::randn({1, 128}));
  for (int bits : {2, 3, 4}) {
    for (OutlierSelection selection : {OutlierSelection::InSweep, OutlierSelection::UpFront}) {
      SCOPED_TRACE(bits);
      SpqrOptions o = ratioOptions(0, bits);
      o.selection = selection;
      const SpqrResult r = spqrQuantize(w, at::eye(128), o);
      EXPECT_EQ(r.report.outliers, 0);
      EXPECT_EQ(r.outlierValues.numel(), 0);
      const TwoLevel ref = directTwoLevel(w, bits, 16, 3, 16);
      const at::Tensor codes = r.codes.to(at::kInt).contiguous();
      const at::Tensor dq = r.dequantized.contiguous();
      const at::Tensor zeros = r.zeroCodes.to(at::kInt).contiguous();
      int64_t mismatched = 0, differentWeights = 0;
      for (int64_t k = 0; k < w.numel(); ++k) {
        mismatched += codes.data_ptr<int>()[k] != ref.codes[k];
        differentWeights += dq.data_ptr<float>()[k] != ref.weight[k];
      }
      EXPECT_EQ(mismatched, 0) << "codes differ from the group quantizer";
      EXPECT_EQ(differentWeights, 0) << "dequantized weights differ from the group quantizer";
      EXPECT_TRUE(std::equal(ref.zeroCodes.begin(), ref.zeroCodes.end(), zeros.data_ptr<int>()));
      EXPECT_TRUE((r.codes.to(at::kInt) <= (1 << bits) - 1).all().item<bool>());
      EXPECT_TRUE((r.zeroCodes.to(at::kInt) <= (1 << bits) - 1).all().item<bool>());
      EXPECT_TRUE((r.scaleCodes.to(at::kInt) <= 7).all().item<bool>());
      // The zero code dequantizes to exactly 0, and the float zeros are those codes.
      EXPECT_TRUE(at::equal(r.zeros, r.zeroCodes.to(at::kFloat)));
    }
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

SpqrOptions selecting(OutlierSelection selection, SpqrOptions o) {
  o.selection = selection;
  return o;
}

// Outliers per first-level group of 16 columns (summed over rows).
at::Tensor perGroup(const at::Tensor& mask) {
  return mask.reshape({mask.size(0), mask.size(1) / 16, 16}).sum(at::IntArrayRef{0, 2});
}

TEST(Spqr, UpFrontRatioPicksExactlyTheMostSalientWeightsKeptExact) {
  const Problem p = correlatedProblem(64, 256, 512, 5, 0.01, 8);
  const int64_t rows = 64, cols = 256;
  for (double ratio : {0.01, 0.0037, 0.05}) {
    SCOPED_TRACE(ratio);
    const SpqrResult r = spqrQuantize(p.weight, p.hessian, selecting(OutlierSelection::UpFront, ratioOptions(ratio)));
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

// In the sweep each group keeps the up-front number of outliers but re-picks them from its error-updated
// weights: the total is exact and the spread over groups is the up-front one.
TEST(Spqr, InSweepRatioKeepsEachGroupsShareAndRepicksFromCurrentWeights) {
  const Problem p = correlatedProblem(64, 256, 512, 5, 0.01, 8);
  const int64_t rows = 64, cols = 256;
  for (double ratio : {0.01, 0.0037, 0.05}) {
    SCOPED_TRACE(ratio);
    const SpqrResult upFront =
        spqrQuantize(p.weight, p.hessian, selecting(OutlierSelection::UpFront, ratioOptions(ratio)));
    const SpqrResult inSweep = spqrQuantize(p.weight, p.hessian, ratioOptions(ratio));
    EXPECT_EQ(inSweep.report.outliers, std::llround(ratio * rows * cols));
    expectValidCsr(inSweep, rows, cols);
    const at::Tensor mask = csrMask(inSweep, rows, cols);
    EXPECT_TRUE(at::equal(perGroup(mask), perGroup(csrMask(upFront, rows, cols))));
    EXPECT_TRUE(at::equal(inSweep.dequantized.masked_select(mask), inSweep.outlierValues.to(at::kFloat)));
    if (ratio == 0.05) EXPECT_FALSE(at::equal(mask, csrMask(upFront, rows, cols))) << "no outlier moved";
  }
}

// Within a group the sweep keeps exact the weight whose removal from the grid saves the most error (the paper's
// leave-one-out criterion), not simply the largest: among values in [1, 1.2], a 3.0 stretches its grid 2.5-fold,
// while a 5.0 next to a 4.9 costs almost nothing.
TEST(Spqr, InSweepKeepsTheWeightWhoseRemovalSavesMost) {
  at::manual_seed(35);
  at::Tensor w = 1.0 + 0.2 * at::rand({16, 16});
  w[0][0] = 5.0;
  w[0][1] = 4.9;
  w[1][5] = 3.0;
  SpqrOptions o = ratioOptions(1.0 / 256);   // one outlier
  const SpqrResult inSweep = spqrQuantize(w, at::eye(16), o);
  const SpqrResult upFront = spqrQuantize(w, at::eye(16), selecting(OutlierSelection::UpFront, o));
  ASSERT_EQ(inSweep.report.outliers, 1);
  ASSERT_EQ(upFront.report.outliers, 1);
  EXPECT_TRUE(csrMask(upFront, 16, 16)[0][0].item<bool>());
  EXPECT_TRUE(csrMask(inSweep, 16, 16)[1][5].item<bool>());
  const Problem identity{w, at::eye(16), at::eye(16)};
  EXPECT_LT(reconstructionError(identity, inSweep.dequantized), reconstructionError(identity, upFront.dequantized));
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
  o.selection = OutlierSelection::UpFront;
  const SpqrResult r = spqrQuantize(p.weight, p.hessian, o);
  expectValidCsr(r, 32, 128);
  EXPECT_EQ(r.report.outliers, k);
  EXPECT_TRUE(at::equal(csrMask(r, 32, 128), saliency > threshold));
  // In the sweep, with H = I the current saliency is the original one.
  o.selection = OutlierSelection::InSweep;
  const at::Tensor identitySaliency = saliencyOf(p.weight, at::eye(128), 0.01);
  const double t = std::get<0>(identitySaliency.reshape({-1}).kthvalue(identitySaliency.numel() - 40)).item<double>();
  o.outlierThreshold = t;
  const SpqrResult swept = spqrQuantize(p.weight, at::eye(128), o);
  expectValidCsr(swept, 32, 128);
  EXPECT_TRUE(at::equal(csrMask(swept, 32, 128), identitySaliency > t));
  EXPECT_EQ(swept.report.outliers, 40);
}

TEST(Spqr, BeatsRtnG16AndGptqG128WithPlantedLargeWeights) {
  const Problem p = correlatedProblem(128, 512, 1024, 7, 0.01, 10);
  const SpqrResult spqr = spqrQuantize(p.weight, p.hessian, ratioOptions(0.01));
  const QuantResult rtn = rtnQuantize(p.weight, QuantSpec::group(3, 16, false));
  const GptqResult gptq = gptqQuantize(p.weight, p.hessian, QuantSpec::group(3, 128, false));
  const double eSpqr = reconstructionError(p, spqr.dequantized);
  const double eRtn = reconstructionError(p, rtn.dequantized);
  const double eGptq = reconstructionError(p, gptq.quant.dequantized);
  const double eUpFront = reconstructionError(
      p, spqrQuantize(p.weight, p.hessian, selecting(OutlierSelection::UpFront, ratioOptions(0.01))).dequantized);
  std::printf("relative ||(W - Q) X^T||: SpQR 3-bit g16 1%% %.4f (up-front outliers %.4f; %.3f bpw), RTN 3-bit g16 "
              "%.4f, GPTQ 3-bit g128 %.4f\n", eSpqr, eUpFront, spqr.bitsPerWeight(), eRtn, eGptq);
  EXPECT_LT(eSpqr, eRtn);
  EXPECT_LT(eSpqr, eGptq);
  EXPECT_LT(eSpqr, eUpFront);
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

int64_t tensorBytes(const SpqrWeight& w) {
  int64_t bytes = 0;
  for (const at::Tensor* t : {&w.codes, &w.scaleCodes, &w.zeroCodes, &w.scaleBase, &w.scaleStep, &w.outlierRowOffsets,
                              &w.outlierColumns, &w.outlierValues})
    bytes += t->numel() * int64_t(t->element_size());
  return bytes;
}

TEST(SpqrWeight, PackUnpackIsExactAndBitsPerWeightIsCounted) {
  const Problem p = correlatedProblem(64, 1024, 256, 9, 0.01, 8);
  for (double ratio : {0.0, 0.003, 0.01}) {
    SCOPED_TRACE(ratio);
    const SpqrResult r = spqrQuantize(p.weight, p.hessian, ratioOptions(ratio));
    const SpqrWeight packed = SpqrWeight::pack(r);
    EXPECT_TRUE(at::equal(packed.unpack(), r.dequantized));
    EXPECT_TRUE(at::equal(packed.unpackCodes(), r.codes));
    // The integer zero points are b-bit codes: 3 bits each, no second-level statistics.
    EXPECT_EQ(packed.zeroCodes.numel(), 64 * 1024 / 16 / 8 * 3);
    EXPECT_EQ(unpackCodeBits(packed.zeroCodes, 3, 64 * 64).reshape({64, 64}).to(at::kByte).equal(r.zeroCodes), true);
    const double bpw = packed.bitsPerWeight();
    EXPECT_EQ(packed.storedBytes(), tensorBytes(packed)) << "accounting differs from the bytes of the tensors";
    EXPECT_DOUBLE_EQ(bpw, double(packed.storedBytes()) * 8 / double(64 * 1024));
    EXPECT_DOUBLE_EQ(bpw, r.bitsPerWeight());
    // 3 + 3/16 + 3/16 + 32/256 = 3.5, + 32·65/65536 for the row offsets, + 32 bits per outlier.
    const double expected = 3.5 + 32.0 * 65 / 65536 + 32.0 * r.report.outliers / 65536;
    EXPECT_NEAR(bpw, expected, 1e-12);
    std::printf("ratio %.3f: %.4f bits per weight\n", ratio, bpw);
    if (ratio == 0.003) {
      EXPECT_GT(bpw, 3.59);
      EXPECT_LT(bpw, 3.65);
    }
  }
  // The block structs of formats/PackedBlocks.h: one 16 x 16 tile is 112 bytes, + the CSR.
  const at::Tensor tile = at::randn({16, 16});
  const SpqrWeight one = SpqrWeight::pack(spqrQuantize(tile, at::eye(16), ratioOptions(0)));
  EXPECT_EQ(one.storedBytes(), int64_t(sizeof(packed::block_spqr3_tile16x16)) + 17 * 4);
  EXPECT_EQ(tensorBytes(one), one.storedBytes());
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
  EXPECT_THROW(shortCodes.storedBytes(), InputError);
  SpqrWeight wideZeros = SpqrWeight::pack(spqrQuantize(p.weight, p.hessian, ratioOptions(0.01)));
  wideZeros.zeroCodes = at::zeros({64 * 64}, at::kByte);   // one byte per zero point instead of 3 bits
  EXPECT_THAT([&] { wideZeros.unpack(); }, testing::ThrowsMessage<InputError>(HasSubstr("zero codes")));
}

// After pruning: pruned weights stay exactly 0 (their code is the zero code), are never outliers and do not
// widen any grid; the kept values of an N:M weight compact into an SpQR weight of their own.
TEST(Spqr, AfterPruningKeepsTheMaskAndCompactsTheKeptValues) {
  const Problem p = correlatedProblem(32, 256, 512, 23, 0.01, 8);
  const SparseGptResult pruned = sparseGptPrune(p.weight, p.hessian, SparsityPattern::nm(2, 4));
  const at::Tensor keep = pruned.pruned.mask;
  SpqrOptions o = ratioOptions(0.01);
  o.keep = keep;
  o.groupSize = 32;   // 16 kept values per group
  const SpqrResult r = spqrQuantize(pruned.pruned.weight, p.hessian, o);
  EXPECT_TRUE((r.dequantized.masked_select(keep.logical_not()) == 0).all().item<bool>());
  const at::Tensor zeroPerWeight = r.zeroCodes.repeat_interleave(32, 1);
  EXPECT_TRUE(at::equal(r.codes.masked_select(keep.logical_not()), zeroPerWeight.masked_select(keep.logical_not())));
  EXPECT_EQ(r.report.outliers, std::llround(0.01 * 32 * 128));   // a share of the kept weights
  EXPECT_TRUE(csrMask(r, 32, 256).logical_and(keep.logical_not()).any().item<bool>() == false);
  // Better than quantizing the pruned weight without the mask (with as many outliers) and zeroing afterwards.
  for (double ratio : {0.0, 0.01}) {
    SpqrOptions masked = o, unmasked = o;
    masked.outlierRatio = ratio;
    unmasked.outlierRatio = ratio / 2;
    unmasked.keep = at::Tensor();
    const double eMasked = reconstructionError(p, spqrQuantize(pruned.pruned.weight, p.hessian, masked).dequantized);
    const double eZeroed =
        reconstructionError(p, spqrQuantize(pruned.pruned.weight, p.hessian, unmasked).dequantized * keep);
    std::printf("2:4 then SpQR, %.0f%% outliers: with the mask %.4f, masked afterwards %.4f\n", 100 * ratio, eMasked,
                eZeroed);
    EXPECT_LT(eMasked, eZeroed) << ratio;
  }

  const SpqrResult kept = spqrKeptColumns(r, keep);
  ASSERT_EQ(kept.codes.sizes(), (at::IntArrayRef{32, 128}));
  EXPECT_EQ(kept.groupSize, 16);
  const SpqrWeight packed = SpqrWeight::pack(kept);
  EXPECT_TRUE(at::equal(packed.unpack(), r.dequantized.masked_select(keep).view({32, 128})));
  EXPECT_EQ(packed.storedBytes(), tensorBytes(packed));
  // Rows that keep different counts cannot be compacted.
  at::Tensor uneven = keep.clone();
  uneven[0][0] = !uneven[0][0].item<bool>();
  EXPECT_THROW(spqrKeptColumns(r, uneven), InputError);
  // A bad mask is refused, naming the module.
  o.keep = keep.narrow(1, 0, 128);
  EXPECT_THAT([&] { spqrQuantize(pruned.pruned.weight, p.hessian, o, "m.proj"); },
              testing::ThrowsMessage<InputError>(AllOf(HasSubstr("m.proj"), HasSubstr("keep mask"))));
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
