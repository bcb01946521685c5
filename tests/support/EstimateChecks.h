// The instant estimate against what compress wrote: the same bytes, and per module the same format and bits per
// weight (compress/RecipeEstimate.h, compress/ModulePlan.h).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>

#include "compress/CompressJob.h"
#include "compress/RecipeEstimate.h"

namespace pareto::test {

inline void expectEstimateIsWhatWasWritten(const RecipeEstimate& e, const CompressReport& r) {
  EXPECT_EQ(e.modelBytes, r.bytes);
  EXPECT_NEAR(e.linearBitsPerWeight, r.linearBitsPerWeight, 1e-12);
  EXPECT_NEAR(e.modelBitsPerWeight, r.modelBitsPerWeight, 1e-12);
  ASSERT_EQ(e.modules.size(), r.modules.size());
  for (const ModuleReport& m : r.modules) {
    const auto it = std::find_if(e.modules.begin(), e.modules.end(),
                                 [&](const ModuleEstimate& x) { return x.module == m.name; });
    ASSERT_NE(it, e.modules.end()) << m.name;
    EXPECT_EQ(it->format, m.format) << m.name;
    EXPECT_NEAR(it->bitsPerWeight(), m.bitsPerWeight, 1e-12) << m.name;
  }
}

}  // namespace pareto::test
