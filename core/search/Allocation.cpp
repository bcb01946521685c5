#include "search/Allocation.h"

#include <algorithm>
#include <limits>

#include "util/Error.h"

namespace pareto {

const FrontPoint* KnapsackFront::best(uint64_t budget) const {
  const FrontPoint* found = nullptr;
  for (const FrontPoint& p : points) {
    if (p.cost > budget) break;
    found = &p;   // later points cost more and lose less
  }
  return found;
}

KnapsackFront solveKnapsackFront(const std::vector<std::vector<KnapsackItem>>& modules, int64_t gridSteps) {
  KnapsackFront front;
  if (modules.empty()) {
    front.points.push_back({});
    return front;
  }
  const size_t n = modules.size();
  std::vector<uint64_t> base(n);
  uint64_t range = 0;
  for (size_t m = 0; m < n; ++m) {
    const auto& items = modules[m];
    if (items.empty()) throw InputError("knapsack: module " + std::to_string(m) + " has no candidate that applies");
    if (items.size() > 255) throw InputError("knapsack: module " + std::to_string(m) + " has more than 255 candidates");
    uint64_t lo = items[0].cost, hi = items[0].cost;
    for (const KnapsackItem& it : items) {
      lo = std::min(lo, it.cost);
      hi = std::max(hi, it.cost);
    }
    base[m] = lo;
    range += hi - lo;
    front.minCost += lo;
    front.maxCost += hi;
  }
  const uint64_t steps = uint64_t(std::max<int64_t>(1, gridSteps));
  front.unit = std::max<uint64_t>(1, (range + steps - 1) / steps);
  const uint64_t unit = front.unit;

  // Grid cost of each item (rounded up), and the largest grid total.
  std::vector<std::vector<uint64_t>> units(n);
  uint64_t total = 0;
  for (size_t m = 0; m < n; ++m) {
    uint64_t hi = 0;
    for (const KnapsackItem& it : modules[m]) {
      units[m].push_back((it.cost - base[m] + unit - 1) / unit);
      hi = std::max(hi, units[m].back());
    }
    total += hi;
  }
  const size_t width = size_t(total) + 1;
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<double> row(width, inf), next(width);
  row[0] = 0;
  // choice[m * width + g]: the item module m took on the best way to grid total g after module m.
  std::vector<uint8_t> choice(n * width, 0);
  uint64_t reach = 0;   // the largest total reachable so far
  for (size_t m = 0; m < n; ++m) {
    std::fill(next.begin(), next.end(), inf);
    uint8_t* pick = choice.data() + m * width;
    uint64_t hi = 0;
    for (size_t k = 0; k < modules[m].size(); ++k) {
      const uint64_t w = units[m][k];
      const double loss = modules[m][k].loss;
      hi = std::max(hi, w);
      for (uint64_t g = 0; g <= reach; ++g) {
        if (row[g] == inf) continue;
        const double v = row[g] + loss;
        if (v < next[g + w]) {
          next[g + w] = v;
          pick[g + w] = uint8_t(k);
        }
      }
    }
    reach += hi;
    row.swap(next);
  }

  // Every reachable grid total, costed exactly; the choices are read back only for the non-dominated ones.
  auto walk = [&](uint64_t g, FrontPoint& p, bool withChoice) {
    if (withChoice) p.choice.assign(n, 0);
    p.cost = 0;
    double loss = 0;
    for (size_t m = n; m-- > 0;) {
      const size_t k = choice[m * width + g];
      const KnapsackItem& it = modules[m][k];
      if (withChoice) p.choice[m] = it.candidate;
      p.cost += it.cost;
      loss += it.loss;
      g -= units[m][k];
    }
    p.loss = loss;
  };
  struct Costed {
    uint64_t grid, cost;
    double loss;
  };
  std::vector<Costed> all;
  for (uint64_t g = 0; g <= reach; ++g) {
    if (row[g] == inf) continue;
    FrontPoint p;
    walk(g, p, false);
    all.push_back({g, p.cost, p.loss});
  }
  std::stable_sort(all.begin(), all.end(), [](const Costed& a, const Costed& b) {
    return a.cost != b.cost ? a.cost < b.cost : a.loss < b.loss;
  });
  for (const Costed& c : all) {
    if (!front.points.empty() && c.loss >= front.points.back().loss) continue;
    FrontPoint p;
    walk(c.grid, p, true);
    front.points.push_back(std::move(p));
  }
  return front;
}

}  // namespace pareto
