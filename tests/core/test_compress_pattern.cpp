// Parsing, labels and validation of sparsity patterns.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "compress/SparsityPattern.h"
#include "util/Error.h"

namespace pareto {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string parseError(const std::string& text) {
  try {
    SparsityPattern::parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "'" << text << "' was accepted";
  return {};
}

TEST(SparsityPattern, ParsesNM) {
  const SparsityPattern p = SparsityPattern::parse("2:4");
  EXPECT_TRUE(p.isNM());
  EXPECT_FALSE(p.isUnstructured());
  EXPECT_EQ(p.n(), 2);
  EXPECT_EQ(p.m(), 4);
  EXPECT_DOUBLE_EQ(p.sparsity(), 0.5);
  EXPECT_EQ(p.label(), "2:4");
  EXPECT_EQ(p, SparsityPattern::nm(2, 4));
  EXPECT_NE(p, SparsityPattern::nm(4, 8));
}

TEST(SparsityPattern, AcceptsEveryMDividing32) {
  for (const char* text : {"1:2", "1:4", "2:4", "3:4", "2:8", "4:8", "8:16", "16:32", "31:32", " 4:8 "}) {
    const SparsityPattern p = SparsityPattern::parse(text);
    EXPECT_TRUE(p.isNM()) << text;
    EXPECT_EQ(32 % p.m(), 0) << text;
    EXPECT_DOUBLE_EQ(p.sparsity(), 1.0 - double(p.n()) / p.m()) << text;
  }
  EXPECT_EQ(SparsityPattern::parse("16:32").label(), "16:32");
}

TEST(SparsityPattern, ParsesUnstructured) {
  EXPECT_DOUBLE_EQ(SparsityPattern::parse("50%").sparsity(), 0.5);
  EXPECT_DOUBLE_EQ(SparsityPattern::parse("0.5").sparsity(), 0.5);
  EXPECT_DOUBLE_EQ(SparsityPattern::parse(" 62.5 % ").sparsity(), 0.625);
  EXPECT_DOUBLE_EQ(SparsityPattern::parse("0%").sparsity(), 0.0);
  EXPECT_TRUE(SparsityPattern::parse("50%").isUnstructured());
  EXPECT_EQ(SparsityPattern::parse("0.5"), SparsityPattern::unstructured(0.5));
}

TEST(SparsityPattern, LabelsUnstructuredAsShortPercentages) {
  EXPECT_EQ(SparsityPattern::unstructured(0.5).label(), "50%");
  EXPECT_EQ(SparsityPattern::unstructured(0.3).label(), "30%");
  EXPECT_EQ(SparsityPattern::unstructured(0.625).label(), "62.5%");
  EXPECT_EQ(SparsityPattern::unstructured(0).label(), "0%");
  EXPECT_EQ(SparsityPattern::unstructured(0.7).label(), "70%");
}

TEST(SparsityPattern, RejectsBadNMNamingTheValue) {
  EXPECT_THAT(parseError("3:6"), AllOf(HasSubstr("3:6"), HasSubstr("M must divide 32")));
  EXPECT_THAT(parseError("2:64"), AllOf(HasSubstr("2:64"), HasSubstr("M must divide 32")));
  EXPECT_THAT(parseError("4:4"), AllOf(HasSubstr("4:4"), HasSubstr("N (weights kept per group)")));
  EXPECT_THAT(parseError("0:4"), AllOf(HasSubstr("0:4"), HasSubstr("N (weights kept per group)")));
  EXPECT_THAT(parseError("2:1"), HasSubstr("2:1"));
  EXPECT_THAT(parseError("a:4"), HasSubstr("'a:4'"));
  EXPECT_THAT(parseError("2:"), HasSubstr("'2:'"));
  EXPECT_THAT(parseError("-1:4"), HasSubstr("'-1:4'"));
  EXPECT_THROW(SparsityPattern::nm(5, 12), InputError);
}

TEST(SparsityPattern, RejectsBadSparsityNamingTheValue) {
  EXPECT_THAT(parseError("100%"), HasSubstr("'100%'"));
  EXPECT_THAT(parseError("1"), HasSubstr("'1'"));
  EXPECT_THAT(parseError("-0.1"), HasSubstr("'-0.1'"));
  EXPECT_THAT(parseError("half"), HasSubstr("'half'"));
  EXPECT_THAT(parseError(""), HasSubstr("expected N:M"));
  EXPECT_THAT(parseError("nan"), HasSubstr("'nan'"));
  try {
    SparsityPattern::unstructured(1.5);
    ADD_FAILURE() << "1.5 accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("1.5"));
  }
  EXPECT_THROW(SparsityPattern::unstructured(std::numeric_limits<double>::quiet_NaN()), InputError);
  EXPECT_THROW(SparsityPattern::unstructured(-1e-9), InputError);
}

TEST(SparsityPattern, ChecksColumnsNamingTheModule) {
  EXPECT_NO_THROW(SparsityPattern::nm(2, 4).checkColumns(4096, "model.layers.0.mlp.down_proj"));
  EXPECT_NO_THROW(SparsityPattern::unstructured(0.5).checkColumns(30, "x"));
  try {
    SparsityPattern::nm(4, 8).checkColumns(60, "model.layers.3.self_attn.q_proj");
    ADD_FAILURE() << "60 columns accepted for 4:8";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("model.layers.3.self_attn.q_proj"), HasSubstr("60"), HasSubstr("4:8")));
  }
  EXPECT_THROW(SparsityPattern::nm(2, 4).checkColumns(6), InputError);
}

}  // namespace
}  // namespace pareto
