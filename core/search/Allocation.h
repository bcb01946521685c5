// The allocation of issue 24: one candidate per module, minimising the summed estimated loss under a budget on
// the summed cost (bytes, or seconds per decoded token), as a multiple-choice knapsack.
//
// Solved by dynamic programming over a discretised cost, not by a Lagrangian sweep: a sweep over λ only reaches
// the vertices of the front's lower convex hull, and a budget between two vertices would get the cheaper vertex
// (its loss can be far above the optimum there, since per-module choices are few and costs lumpy); the DP gives
// every point of the front in the same one pass.
//
// Discretisation: each module's cost above its cheapest choice is rounded UP to whole units of
//   unit = max(1, ceil(Σ_modules (max − min cost) / gridSteps)),
// and the DP finds, for every unit total g, the least loss whose rounded cost is exactly g; every such solution is
// then costed exactly (no rounding) and the dominated ones dropped. Rounding up keeps every point's true cost at
// or below its grid cost, so a point chosen for a budget never exceeds it. With integer costs whose summed range
// is at most gridSteps the unit is 1 and the front is exact. Otherwise, for any budget B the front holds a
// point of cost ≤ B whose loss is at most the exact optimum at budget B − modules · unit (for a 16-bit model
// with 56 linears of 12.6 M weights and the default grid, modules · unit is 56 × 78 bytes, 0.003 bits per weight).
#pragma once

#include <cstdint>
#include <vector>

namespace pareto {

// One candidate of one module: its cost (bytes, or picoseconds per decoded token) and its estimated loss.
struct KnapsackItem {
  int candidate = 0;   // the caller's index
  uint64_t cost = 0;
  double loss = 0;
};

struct FrontPoint {
  uint64_t cost = 0;          // exact: the sum of the chosen items' costs
  double loss = 0;            // the sum of the chosen items' losses
  std::vector<int> choice;    // per module: the chosen item's `candidate`
};

struct KnapsackFront {
  // Non-dominated points, cheapest first (cost strictly increasing, loss strictly decreasing).
  std::vector<FrontPoint> points;
  uint64_t minCost = 0, maxCost = 0;   // the cheapest and the dearest allocation
  uint64_t unit = 1;                   // the grid's cost unit (1: the front is exact)

  // The point of least loss with cost ≤ budget; nullptr when even the cheapest point costs more.
  const FrontPoint* best(uint64_t budget) const;
};

inline constexpr int64_t kDefaultGridSteps = int64_t(1) << 18;

// `modules[m]`: the items module m may take (at least one each, at most 255). Throws InputError for a module
// without items.
KnapsackFront solveKnapsackFront(const std::vector<std::vector<KnapsackItem>>& modules,
                                 int64_t gridSteps = kDefaultGridSteps);

}  // namespace pareto
