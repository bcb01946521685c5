// The bitmask N:M layout: exact round trips, the bit order the kernel relies on, the byte count, and rejection of
// masks that are not N:M.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "InputErrors.h"
#include "formats/BitmaskNMWeight.h"
#include "compress/MagnitudePrune.h"
#include "compress/SparsityPattern.h"
#include "util/Error.h"

namespace pareto {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A random N:M mask: in each group of M the N columns with the largest random key are kept.
at::Tensor randomNMMask(int64_t rows, int64_t cols, int n, int m, const at::TensorOptions& options = {}) {
  const at::Tensor keys = at::rand({rows, cols / m, m}, options);
  const at::Tensor kept = std::get<1>(keys.topk(n, -1));
  return at::zeros({rows, cols / m, m}, options.dtype(at::kBool)).scatter_(-1, kept, true).view({rows, cols});
}

std::string packError(const at::Tensor& weight, const at::Tensor& mask, int n, int m) {
  return test::inputErrorOf([&] { BitmaskNMWeight::pack(weight, mask, n, m); });
}

void expectRoundTrip(const at::Tensor& weight, const at::Tensor& mask, int n, int m) {
  const BitmaskNMWeight packed = BitmaskNMWeight::pack(weight, mask, n, m);
  const int64_t rows = weight.size(0), cols = weight.size(1);
  ASSERT_EQ(packed.masks.scalar_type(), at::kInt);
  ASSERT_EQ(packed.masks.sizes(), (at::IntArrayRef{rows, cols / 32}));
  ASSERT_EQ(packed.values.scalar_type(), weight.scalar_type());
  ASSERT_EQ(packed.values.sizes(), (at::IntArrayRef{rows, cols * n / m}));
  EXPECT_EQ(packed.values.device(), weight.device());
  EXPECT_EQ(packed.n, n);
  EXPECT_EQ(packed.m, m);
  EXPECT_EQ(packed.rows, rows);
  EXPECT_EQ(packed.cols, cols);
  EXPECT_TRUE(at::equal(packed.unpackMask(), mask));
  EXPECT_TRUE(at::equal(packed.unpack(), weight.masked_fill(mask.logical_not(), 0)));
  // Every word holds 32·N/M set bits: the kernel's compile-time trip count.
  EXPECT_TRUE((packed.unpackMask().reshape({rows, cols / 32, 32}).sum(-1) == 32 * n / m).all().item<bool>());
  const double valueBits = double(weight.element_size() * 8) * n / m;
  EXPECT_DOUBLE_EQ(packed.bitsPerWeight(), valueBits + 1.0);
  EXPECT_EQ(packed.storedBytes(), rows * cols * n / m * int64_t(weight.element_size()) + rows * cols / 32 * 4);
}

TEST(BitmaskNMWeight, RoundTripsEveryPatternAndDtype) {
  at::manual_seed(21);
  for (const char* text : {"1:2", "1:4", "2:4", "3:4", "2:8", "4:8", "8:16", "16:32", "31:32"}) {
    const SparsityPattern pattern = SparsityPattern::parse(text);
    for (at::ScalarType dtype : {at::kFloat, at::kHalf, at::kBFloat16}) {
      SCOPED_TRACE(std::string(text) + " " + c10::toString(dtype));
      const at::Tensor weight = at::randn({12, 160}).to(dtype);
      expectRoundTrip(weight, randomNMMask(12, 160, pattern.n(), pattern.m()), pattern.n(), pattern.m());
    }
  }
}

TEST(BitmaskNMWeight, RoundTripsOnCuda) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this build or machine";
  at::manual_seed(22);
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  for (at::ScalarType dtype : {at::kHalf, at::kBFloat16}) {
    const at::Tensor weight = at::randn({64, 256}, cuda).to(dtype);
    expectRoundTrip(weight, randomNMMask(64, 256, 2, 4, cuda), 2, 4);
  }
}

TEST(BitmaskNMWeight, BitBOfWordKIsColumn32KPlusB) {
  // Row 0 keeps the first two of every 4 columns: bits 0,1,4,5,... = 0x33333333. Row 1 keeps the last two:
  // 0xCCCCCCCC, whose top bit makes it negative as int32.
  const at::Tensor weight = at::arange(2 * 64, at::kFloat).view({2, 64}) + 1;
  at::Tensor mask = at::zeros({2, 64}, at::kBool);
  mask[0].view({16, 4}).narrow(1, 0, 2).fill_(true);
  mask[1].view({16, 4}).narrow(1, 2, 2).fill_(true);
  const BitmaskNMWeight packed = BitmaskNMWeight::pack(weight, mask, 2, 4);
  EXPECT_EQ(packed.masks[0][0].item<int32_t>(), int32_t(0x33333333));
  EXPECT_EQ(packed.masks[0][1].item<int32_t>(), int32_t(0x33333333));
  EXPECT_EQ(uint32_t(packed.masks[1][0].item<int32_t>()), 0xCCCCCCCCu);
  EXPECT_EQ(uint32_t(packed.masks[1][1].item<int32_t>()), 0xCCCCCCCCu);
  // Values in column order: row 0 holds columns 0, 1, 4, 5, ...
  EXPECT_EQ(packed.values[0][0].item<float>(), 1.0f);
  EXPECT_EQ(packed.values[0][1].item<float>(), 2.0f);
  EXPECT_EQ(packed.values[0][2].item<float>(), 5.0f);
  EXPECT_EQ(packed.values[1][0].item<float>(), 64.0f + 3.0f);
  EXPECT_TRUE(at::equal(packed.unpack(), weight * mask));

  // Only column 31 kept in a 1:32 word: bit 31 alone, INT32_MIN.
  at::Tensor top = at::zeros({1, 32}, at::kBool);
  top[0][31] = true;
  const BitmaskNMWeight single = BitmaskNMWeight::pack(at::ones({1, 32}), top, 1, 32);
  EXPECT_EQ(uint32_t(single.masks[0][0].item<int32_t>()), 0x80000000u);
  EXPECT_TRUE(at::equal(single.unpackMask(), top));
}

TEST(BitmaskNMWeight, Fp16TwoFourIsNineBitsPerWeight) {
  const at::Tensor weight = at::randn({4096, 512}).to(at::kHalf);
  const BitmaskNMWeight packed = BitmaskNMWeight::pack(weight, randomNMMask(4096, 512, 2, 4), 2, 4);
  EXPECT_DOUBLE_EQ(packed.bitsPerWeight(), 9.0);
  EXPECT_EQ(packed.storedBytes(), int64_t(4096) * 512 * 9 / 8);
}

TEST(BitmaskNMWeight, PacksWhatThePrunersProduce) {
  at::manual_seed(23);
  const at::Tensor weight = at::randn({32, 256}).to(at::kHalf);
  const PruneResult pruned = magnitudePrune(weight, SparsityPattern::nm(4, 8));
  const BitmaskNMWeight packed = BitmaskNMWeight::pack(pruned.weight, pruned.mask, 4, 8);
  EXPECT_TRUE(at::equal(packed.unpack(), pruned.weight));
}

TEST(BitmaskNMWeight, RejectsMasksThatAreNotNM) {
  const at::Tensor weight = at::randn({4, 64});
  at::Tensor mask = randomNMMask(4, 64, 2, 4);
  mask[1].narrow(0, 4, 4).fill_(true);  // row 1, columns 4..7 keep 4
  EXPECT_THAT(packError(weight, mask, 2, 4),
              AllOf(HasSubstr("not 2:4"), HasSubstr("row 1"), HasSubstr("columns 4..7"), HasSubstr("keep 4")));
  // A valid 2:4 mask packed as 1:4.
  EXPECT_THAT(packError(weight, randomNMMask(4, 64, 2, 4), 1, 4), HasSubstr("not 1:4"));
}

TEST(BitmaskNMWeight, RejectsBadShapesAndPatterns) {
  EXPECT_THAT(packError(at::randn({4, 48}), randomNMMask(4, 48, 2, 4), 2, 4),
              AllOf(HasSubstr("48"), HasSubstr("multiple of 32")));
  EXPECT_THAT(packError(at::randn({4, 64}), randomNMMask(4, 64, 2, 4), 3, 6), HasSubstr("3:6"));
  EXPECT_THAT(packError(at::randn({4, 64}), randomNMMask(4, 64, 2, 4).to(at::kFloat), 2, 4), HasSubstr("bool"));
  EXPECT_THAT(packError(at::randn({4, 64}), randomNMMask(4, 32, 2, 4), 2, 4), HasSubstr("shape"));
  EXPECT_THAT(packError(at::randn({64}), at::ones({64}, at::kBool), 2, 4), HasSubstr("2-D"));
}

TEST(BitmaskNMWeight, UnpackRejectsInconsistentParts) {
  at::manual_seed(24);
  const BitmaskNMWeight good = BitmaskNMWeight::pack(at::randn({4, 64}), randomNMMask(4, 64, 2, 4), 2, 4);
  auto unpackError = [](const BitmaskNMWeight& packed) { return test::inputErrorOf([&] { packed.unpack(); }); };
  BitmaskNMWeight flipped = good;
  flipped.masks = good.masks.clone();
  flipped.masks[2][1] = flipped.masks[2][1].item<int32_t>() ^ 1;  // column 32 of row 2 toggled
  EXPECT_THAT(unpackError(flipped), AllOf(HasSubstr("row 2"), HasSubstr("columns 32..35")));
  BitmaskNMWeight shortValues = good;
  shortValues.values = good.values.narrow(1, 0, 16);
  EXPECT_THAT(unpackError(shortValues), HasSubstr("values"));
  BitmaskNMWeight wideMasks = good;
  wideMasks.masks = good.masks.to(at::kLong);
  EXPECT_THAT(unpackError(wideMasks), HasSubstr("int32"));
}

}  // namespace
}  // namespace pareto
