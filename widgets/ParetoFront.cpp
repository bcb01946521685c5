#include "widgets/ParetoFront.h"

#include <algorithm>
#include <cmath>

namespace pareto {

std::vector<size_t> paretoFront(const std::vector<TradeoffPoint>& points, bool higherCostIsBetter) {
  // Sweep from the best cost to the worst; a point is on the front when its quality beats every point with a
  // better (or equal) cost seen so far. Ties in cost: the better quality first, so the worse one is dominated.
  std::vector<size_t> order;
  for (size_t i = 0; i < points.size(); ++i)
    if (!std::isnan(points[i].cost) && !std::isnan(points[i].quality)) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const double ca = points[a].cost, cb = points[b].cost;
    if (ca != cb) return higherCostIsBetter ? ca > cb : ca < cb;
    return points[a].quality < points[b].quality;
  });
  std::vector<size_t> front;
  double bestQuality = INFINITY;
  for (size_t i : order) {
    if (points[i].quality < bestQuality) {
      front.push_back(i);
      bestQuality = points[i].quality;
    }
  }
  std::sort(front.begin(), front.end(), [&](size_t a, size_t b) { return points[a].cost < points[b].cost; });
  return front;
}

}  // namespace pareto
