// The non-dominated points of a two-objective comparison: a run is on the front when no other run is at least
// as good on both axes and better on one. Pure (no Qt), so the Pareto view's front is testable by itself.
#pragma once

#include <cstddef>
#include <vector>

namespace pareto {

struct TradeoffPoint {
  double cost = 0;      // x, e.g. bits per weight (lower better) or tokens/s (higher better)
  double quality = 0;   // y, e.g. perplexity (lower better)
};

// Indices of the non-dominated points, ordered by cost (ascending). Points with a NaN coordinate are never on the
// front. `higherCostIsBetter`: true for a throughput axis. Quality is always lower-is-better here.
std::vector<size_t> paretoFront(const std::vector<TradeoffPoint>& points, bool higherCostIsBetter);

}  // namespace pareto
