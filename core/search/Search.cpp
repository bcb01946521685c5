#include "search/Search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "search/DecodeTimeModel.h"
#include "util/Error.h"

namespace pareto {
namespace {

using nlohmann::json;

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

uint64_t picoseconds(double seconds) { return uint64_t(std::llround(seconds * 1e12)); }

// A decode group's allocations offered to a tokens/s knapsack: its own front, thinned to this many (the
// knapsack's time grows with it; 11 candidates give q, k, v 1331 allocations, of which a few dozen are on the
// group's front).
constexpr size_t kGroupOptions = 64;

// The modules of the table that the decode runtime runs as one GEMV when they share a format (decode/
// DecodeModel.h): q, k and v of a layer, gate and up; every other module alone. A group some of whose members are
// not in the table (skipped) is costed member by member.
std::vector<std::vector<size_t>> decodeGroups(const SensitivityTable& t) {
  static const std::map<std::string, std::string> kFused = {
      {"q_proj", "qkv"}, {"k_proj", "qkv"}, {"v_proj", "qkv"}, {"gate_proj", "gate_up"}, {"up_proj", "gate_up"}};
  std::vector<std::vector<size_t>> groups;
  std::map<std::string, size_t> byKey;
  std::map<std::string, size_t> members;
  for (const SensitivityModule& m : t.modules) {
    const size_t dot = m.name.rfind('.');
    const auto f = kFused.find(m.name.substr(dot + 1));
    if (dot != std::string::npos && f != kFused.end()) ++members[m.name.substr(0, dot) + "#" + f->second];
  }
  for (size_t i = 0; i < t.modules.size(); ++i) {
    const std::string& name = t.modules[i].name;
    const size_t dot = name.rfind('.');
    const auto f = dot == std::string::npos ? kFused.end() : kFused.find(name.substr(dot + 1));
    const std::string key = f == kFused.end() ? "" : name.substr(0, dot) + "#" + f->second;
    const size_t complete = f == kFused.end() ? 0 : (f->second == "qkv" ? 3 : 2);
    if (key.empty() || members[key] != complete) {
      groups.push_back({i});
      continue;
    }
    const auto [it, added] = byKey.emplace(key, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  return groups;
}

// The step's seconds for an allocation (search/DecodeTimeModel.h), group by group.
class StepCost {
 public:
  StepCost(const SensitivityTable& t, const DecodeBandwidth& b) : t_(t), model_(b), groups_(decodeGroups(t)) {
    const double bytesPerWeight = t.linearWeights ? double(t.denseLinearBytes) / double(t.linearWeights) : 2.0;
    double dense = 0;
    for (const std::vector<size_t>& g : groups_) {
      int64_t rows = 0;
      for (size_t m : g) rows += t.modules[m].rows;
      const int64_t cols = t.modules[g.front()].cols;
      dense += model_.gemvSeconds("dense", rows, cols, uint64_t(std::llround(double(rows * cols) * bytesPerWeight)));
    }
    other_ = model_.otherSeconds(dense, t.otherBytesPerToken);
  }
  bool known() const { return model_.known(); }
  std::string source() const { return model_.source(); }
  const std::vector<std::vector<size_t>>& groups() const { return groups_; }
  double other() const { return other_; }

  // One module's cell alone; NaN when unmeasured.
  double cellSeconds(size_t module, int cell) const {
    const SensitivityModule& m = t_.modules[module];
    const SensitivityCell& c = m.cells[size_t(cell)];
    return model_.gemvSeconds(c.kernel, m.rows, m.cols, c.bytes);
  }
  // A group with `cells[k]` the choice of its k-th member: one fused GEMV when the members share a format.
  double groupSeconds(const std::vector<size_t>& group, const std::vector<int>& cells) const {
    const SensitivityCell& first = t_.modules[group.front()].cells[size_t(cells.front())];
    bool same = group.size() > 1;
    int64_t rows = 0;
    uint64_t bytes = 0;
    for (size_t k = 0; k < group.size(); ++k) {
      const SensitivityCell& c = t_.modules[group[k]].cells[size_t(cells[k])];
      same = same && c.format == first.format;
      rows += t_.modules[group[k]].rows;
      bytes += c.bytes;
    }
    if (same) return model_.gemvSeconds(first.kernel, rows, t_.modules[group.front()].cols, bytes);
    double seconds = 0;
    for (size_t k = 0; k < group.size(); ++k) seconds += cellSeconds(group[k], cells[k]);
    return seconds;
  }
  // The whole step for a choice per module of the table.
  double stepSeconds(const std::vector<int>& choice) const {
    double seconds = other_;
    std::vector<int> cells;
    for (const std::vector<size_t>& g : groups_) {
      cells.clear();
      for (size_t m : g) cells.push_back(choice[m]);
      seconds += groupSeconds(g, cells);
    }
    return seconds;
  }

 private:
  const SensitivityTable& t_;
  DecodeTimeModel model_;
  std::vector<std::vector<size_t>> groups_;
  double other_ = 0;
};

// Whether a cell takes part in a search of `kind` (tokens/s: its seconds must be known).
bool eligible(const SensitivityTable& t, size_t module, int cell, BudgetKind kind, const StepCost& cost) {
  if (!t.modules[module].cells[size_t(cell)].applies) return false;
  return kind != BudgetKind::TokensPerSecond || !std::isnan(cost.cellSeconds(module, cell));
}

// One way a decode group can be allocated: a cell per member, their summed loss and the group's seconds.
struct GroupOption {
  std::vector<int> cells;
  double loss = 0;
  double seconds = 0;
};

// The group's allocations of the cells that take part in a tokens/s search, those on its own front (no other
// is both faster and of less loss), at most `limit` of them (evenly thinned, the fastest and the best kept).
std::vector<GroupOption> groupFront(const SensitivityTable& t, const std::vector<size_t>& group, const StepCost& cost,
                                    size_t limit) {
  std::vector<std::vector<int>> choices(group.size());
  for (size_t k = 0; k < group.size(); ++k)
    for (size_t c = 0; c < t.modules[group[k]].cells.size(); ++c)
      if (eligible(t, group[k], int(c), BudgetKind::TokensPerSecond, cost)) choices[k].push_back(int(c));
  std::vector<GroupOption> all;
  for (const auto& c : choices)
    if (c.empty()) return all;
  std::vector<size_t> pick(group.size(), 0);
  while (true) {
    GroupOption o;
    for (size_t k = 0; k < group.size(); ++k) {
      o.cells.push_back(choices[k][pick[k]]);
      o.loss += t.modules[group[k]].cells[size_t(o.cells.back())].loss;
    }
    o.seconds = cost.groupSeconds(group, o.cells);
    all.push_back(std::move(o));
    size_t k = 0;
    while (k < group.size() && ++pick[k] == choices[k].size()) pick[k++] = 0;
    if (k == group.size()) break;
  }
  std::sort(all.begin(), all.end(), [](const GroupOption& a, const GroupOption& b) {
    return a.seconds != b.seconds ? a.seconds < b.seconds : a.loss < b.loss;
  });
  std::vector<GroupOption> front;
  for (GroupOption& o : all)
    if (front.empty() || o.loss < front.back().loss) front.push_back(std::move(o));
  if (front.size() <= limit) return front;
  std::vector<GroupOption> thinned;
  for (size_t k = 0; k < limit; ++k) thinned.push_back(front[k * (front.size() - 1) / (limit - 1)]);
  return thinned;
}

struct Ranges {
  uint64_t minBytes = 0, maxBytes = 0;
  double minSeconds = 0, maxSeconds = 0;   // of the whole step; NaN when some group has no measured option
  std::vector<std::string> unmeasured;
};

Ranges rangesOf(const SensitivityTable& t, BudgetKind kind, const StepCost& cost) {
  Ranges r;
  for (size_t i = 0; i < t.modules.size(); ++i) {
    const SensitivityModule& m = t.modules[i];
    uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
    for (size_t c = 0; c < m.cells.size(); ++c) {
      const SensitivityCell& cell = m.cells[c];
      if (!eligible(t, i, int(c), kind, cost)) {
        if (cell.applies)
          r.unmeasured.push_back(m.name + " × " + t.candidates[c] + ": " +
                                 (cell.kernel.empty()
                                      ? "no benchmarked kernel decodes " + cell.format +
                                            (cell.note.empty() ? "" : " (" + cell.note + ")")
                                      : "no stored benchmark of the " + cell.kernel + " kernel"));
        continue;
      }
      lo = std::min(lo, cell.bytes);
      hi = std::max(hi, cell.bytes);
    }
    if (hi == 0) throw InputError(m.name + ": no candidate applies (not even dense)");
    r.minBytes += lo;
    r.maxBytes += hi;
  }
  r.minSeconds = r.maxSeconds = cost.known() ? cost.other() : std::numeric_limits<double>::quiet_NaN();
  for (const std::vector<size_t>& g : cost.groups()) {
    const std::vector<GroupOption> options = groupFront(t, g, cost, std::numeric_limits<size_t>::max());
    if (options.empty()) {
      r.minSeconds = r.maxSeconds = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    r.minSeconds += options.front().seconds;
    double slowest = 0;   // the front drops slow options of more loss; the slowest allocation is every member slowest
    std::vector<int> cells;
    for (size_t m : g) {
      int worst = -1;
      double worstSeconds = -1;
      for (size_t c = 0; c < t.modules[m].cells.size(); ++c)
        if (eligible(t, m, int(c), BudgetKind::TokensPerSecond, cost) && cost.cellSeconds(m, int(c)) > worstSeconds)
          worst = int(c), worstSeconds = cost.cellSeconds(m, int(c));
      cells.push_back(worst);
    }
    slowest = cost.groupSeconds(g, cells);
    for (const GroupOption& o : options) slowest = std::max(slowest, o.seconds);
    r.maxSeconds += slowest;
  }
  return r;
}

double bitsOf(uint64_t bytes, const SensitivityTable& t) {
  return t.linearWeights ? 8.0 * double(bytes) / double(t.linearWeights) : 0;
}

double tokensPerSecond(double stepSeconds) {
  return std::isnan(stepSeconds) || stepSeconds <= 0 ? 0 : 1.0 / stepSeconds;
}

std::string rangeText(BudgetKind kind, const SearchFront& f) {
  switch (kind) {
    case BudgetKind::BitsPerWeight:
      return fixed(f.minBitsPerWeight, 3) + " to " + fixed(f.maxBitsPerWeight, 3) + " bits per weight";
    case BudgetKind::Bytes:
      return std::to_string(f.minBytes) + " to " + std::to_string(f.maxBytes) + " bytes";
    case BudgetKind::TokensPerSecond:
      return fixed(f.minTokensPerSecond, 1) + " to " + fixed(f.maxTokensPerSecond, 1) + " tokens/s (" +
             f.speedSource + ")";
  }
  return "";
}

void fillRanges(SearchFront& f, const SensitivityTable& t, const Ranges& r, const StepCost& cost) {
  f.minBytes = r.minBytes;
  f.maxBytes = r.maxBytes;
  f.minBitsPerWeight = bitsOf(r.minBytes, t);
  f.maxBitsPerWeight = bitsOf(r.maxBytes, t);
  f.minTokensPerSecond = tokensPerSecond(r.maxSeconds);
  f.maxTokensPerSecond = tokensPerSecond(r.minSeconds);
  f.speedSource = cost.source();
  f.unmeasured = r.unmeasured;
}

// Whether `budget` lies in the front's range; the refusal names it.
void requireReachable(const SearchFront& f, const SearchBudget& budget) {
  bool inside = true;
  const double v = budget.value;
  constexpr double tol = 1e-9;
  switch (budget.kind) {
    case BudgetKind::BitsPerWeight:
      inside = v >= f.minBitsPerWeight - tol && v <= f.maxBitsPerWeight + tol;
      break;
    case BudgetKind::Bytes:
      inside = v >= double(f.minBytes) && v <= double(f.maxBytes);
      break;
    case BudgetKind::TokensPerSecond:
      if (f.maxTokensPerSecond <= 0)
        throw InputError("a tokens/s budget needs a bandwidth: stored kernel benchmarks of this device "
                         "(pareto-cli bench kernels) or a measured copy bandwidth");
      inside = v >= f.minTokensPerSecond * (1 - tol) && v <= f.maxTokensPerSecond * (1 + tol);
      break;
  }
  if (!inside)
    throw InputError("budget " + budgetText(budget) + " is outside what the candidates can reach: " +
                     rangeText(budget.kind, f));
}

}  // namespace

std::string budgetText(const SearchBudget& budget) {
  switch (budget.kind) {
    case BudgetKind::BitsPerWeight: return fixed(budget.value, 3) + " bits per weight";
    case BudgetKind::Bytes: return fixed(budget.value, 0) + " bytes";
    case BudgetKind::TokensPerSecond: return fixed(budget.value, 1) + " tokens/s";
  }
  return "";
}

void checkBudget(const SensitivityTable& table, const SearchBudget& budget, const DecodeBandwidth& bandwidth) {
  const StepCost cost(table, bandwidth);
  SearchFront f;
  fillRanges(f, table, rangesOf(table, budget.kind, cost), cost);
  requireReachable(f, budget);
}

SearchFront searchFront(const SensitivityTable& table, BudgetKind kind, const DecodeBandwidth& bandwidth) {
  if (!table.measured) throw Error("searchFront: the sensitivity table has no measured losses");
  const StepCost cost(table, bandwidth);
  SearchFront f;
  f.timeCost = kind == BudgetKind::TokensPerSecond;
  fillRanges(f, table, rangesOf(table, kind, cost), cost);
  // Bytes add up module by module; time adds up by the runtime's GEMVs, so a tokens/s search allocates each
  // decode group as one item (its members' cells together), the fused GEMV of a shared format priced as one.
  std::vector<std::vector<KnapsackItem>> items;
  std::vector<std::vector<GroupOption>> options;
  if (f.timeCost) {
    for (const std::vector<size_t>& g : cost.groups()) {
      options.push_back(groupFront(table, g, cost, kGroupOptions));
      if (options.back().empty())
        throw InputError(table.modules[g.front()].name +
                         ": no candidate with a measured kernel (see the unmeasured list)");
      items.emplace_back();
      for (size_t o = 0; o < options.back().size(); ++o)
        items.back().push_back({int(o), picoseconds(options.back()[o].seconds), options.back()[o].loss});
    }
  } else {
    items.resize(table.modules.size());
    for (size_t i = 0; i < table.modules.size(); ++i) {
      const SensitivityModule& m = table.modules[i];
      for (size_t c = 0; c < m.cells.size(); ++c)
        if (eligible(table, i, int(c), kind, cost)) items[i].push_back({int(c), m.cells[c].bytes, m.cells[c].loss});
    }
  }
  const KnapsackFront k = solveKnapsackFront(items);
  f.gridUnit = k.unit;
  for (const FrontPoint& p : k.points) {
    SearchPoint s;
    s.loss = p.loss;
    if (f.timeCost) {
      s.choice.assign(table.modules.size(), 0);
      for (size_t g = 0; g < cost.groups().size(); ++g) {
        const GroupOption& o = options[g][size_t(p.choice[g])];
        for (size_t k2 = 0; k2 < cost.groups()[g].size(); ++k2) s.choice[cost.groups()[g][k2]] = o.cells[k2];
      }
    } else {
      s.choice = p.choice;
    }
    for (size_t i = 0; i < table.modules.size(); ++i) s.bytes += table.modules[i].cells[size_t(s.choice[i])].bytes;
    s.bitsPerWeight = bitsOf(s.bytes, table);
    s.tokensPerSecond = cost.known() ? tokensPerSecond(cost.stepSeconds(s.choice)) : 0;
    f.points.push_back(std::move(s));
  }
  return f;
}

const SearchPoint& chooseForBudget(const SearchFront& front, const SearchBudget& budget) {
  requireReachable(front, budget);
  const SearchPoint* best = nullptr;
  for (const SearchPoint& p : front.points) {
    bool fits = false;
    switch (budget.kind) {
      case BudgetKind::BitsPerWeight: fits = p.bitsPerWeight <= budget.value + 1e-12; break;
      case BudgetKind::Bytes: fits = double(p.bytes) <= budget.value; break;
      case BudgetKind::TokensPerSecond: fits = p.tokensPerSecond >= budget.value * (1 - 1e-12); break;
    }
    if (fits && (best == nullptr || p.loss < best->loss)) best = &p;
  }
  if (best == nullptr)
    throw InputError("budget " + budgetText(budget) + ": no allocation fits (reachable: " +
                     rangeText(budget.kind, front) + ")");
  return *best;
}

std::vector<size_t> frontierSample(const SearchFront& front, size_t count) {
  std::vector<size_t> out;
  if (front.points.empty() || count == 0) return out;
  if (count >= front.points.size()) {
    for (size_t i = 0; i < front.points.size(); ++i) out.push_back(i);
    return out;
  }
  // Evenly over bits per weight (time fronts: over tokens/s), each target taking the best point within it.
  auto value = [&](const SearchPoint& p) { return front.timeCost ? -p.tokensPerSecond : p.bitsPerWeight; };
  const double lo = value(front.points.front()), hi = value(front.points.back());
  for (size_t k = 0; k < count; ++k) {
    const double target = count == 1 ? hi : lo + (hi - lo) * double(k) / double(count - 1);
    size_t pick = 0;
    for (size_t i = 0; i < front.points.size(); ++i)
      if (value(front.points[i]) <= target + 1e-12) pick = i;
    if (out.empty() || out.back() != pick) out.push_back(pick);
  }
  return out;
}

json searchRecipe(const SearchBase& base, const SensitivityTable& table, const SearchPoint& point,
                  const std::string& description) {
  json overrides = json::array();
  for (size_t i = 0; i < table.modules.size(); ++i) {
    const SearchCandidate& c = base.candidates.at(size_t(point.choice.at(i)));
    // The exact module name as the glob: fnmatch's special characters escaped.
    std::string match;
    for (char ch : table.modules[i].name) {
      if (ch == '*' || ch == '?' || ch == '[' || ch == '\\') match += '\\';
      match += ch;
    }
    overrides.push_back({{"match", match}, {"prune", c.prune}, {"quantize", c.quantize}});
  }
  return {{"description", description},
          {"calibration", base.calibrationBlock},
          {"skip", base.skip},
          {"overrides", overrides}};
}

}  // namespace pareto
