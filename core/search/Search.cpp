#include "search/Search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "util/Error.h"

namespace pareto {
namespace {

using nlohmann::json;

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

// Seconds per token of a module's bytes: at its kernel's measured bandwidth, or at the one bandwidth.
class SpeedModel {
 public:
  explicit SpeedModel(const DecodeBandwidth& b) {
    for (const KernelMeasurement& k : b.kernels)
      if (std::isfinite(k.bytesPerSecond) && k.bytesPerSecond > 0) kernels_.emplace(k.kernel, k.bytesPerSecond);
    byKernel_ = kernels_.count("dense") != 0;
    one_ = b.bytesPerSecond > 0 && std::isfinite(b.bytesPerSecond) ? b.bytesPerSecond : 0;
    if (byKernel_) {
      source_ = "stored kernel benchmarks of " + b.kernels.front().device + " (" + std::to_string(kernels_.size()) +
                " kernels)";
    } else if (one_ > 0) {
      source_ = b.source.empty() ? "bytes / " + fixed(one_ / 1e9, 1) + " GB/s" : b.source;
    }
  }
  bool known() const { return byKernel_ || one_ > 0; }
  bool byKernel() const { return byKernel_; }
  const std::string& source() const { return source_; }
  // NaN when the kernel has no measurement (kernel benchmarks) or nothing is known.
  double seconds(uint64_t bytes, const std::string& kernel) const {
    if (byKernel_) {
      const auto it = kernels_.find(kernel);
      return it == kernels_.end() ? std::numeric_limits<double>::quiet_NaN() : double(bytes) / it->second;
    }
    return one_ > 0 ? double(bytes) / one_ : std::numeric_limits<double>::quiet_NaN();
  }
  double otherSeconds(uint64_t bytes) const { return seconds(bytes, "dense"); }

 private:
  std::map<std::string, double> kernels_;
  bool byKernel_ = false;
  double one_ = 0;
  std::string source_;
};

uint64_t picoseconds(double seconds) { return uint64_t(std::llround(seconds * 1e12)); }

// Whether a cell takes part in a search of `kind` (tokens/s: its seconds must be known).
bool eligible(const SensitivityCell& cell, BudgetKind kind, const SpeedModel& speed) {
  if (!cell.applies) return false;
  return kind != BudgetKind::TokensPerSecond || !std::isnan(speed.seconds(cell.bytes, cell.kernel));
}

struct Ranges {
  uint64_t minBytes = 0, maxBytes = 0;
  double minSeconds = 0, maxSeconds = 0;   // of the linears
  std::vector<std::string> unmeasured;
};

Ranges rangesOf(const SensitivityTable& t, BudgetKind kind, const SpeedModel& speed) {
  Ranges r;
  for (const SensitivityModule& m : t.modules) {
    uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
    double slo = std::numeric_limits<double>::infinity(), shi = 0;
    for (size_t c = 0; c < m.cells.size(); ++c) {
      const SensitivityCell& cell = m.cells[c];
      if (!eligible(cell, kind, speed)) {
        if (cell.applies)
          r.unmeasured.push_back(m.name + " × " + t.candidates[c] + ": " +
                                 (cell.kernel.empty() ? "no benchmarked kernel decodes " + cell.format
                                                      : "no stored benchmark of the " + cell.kernel + " kernel"));
        continue;
      }
      lo = std::min(lo, cell.bytes);
      hi = std::max(hi, cell.bytes);
      const double s = speed.seconds(cell.bytes, cell.kernel);
      if (!std::isnan(s)) {
        slo = std::min(slo, s);
        shi = std::max(shi, s);
      }
    }
    if (hi == 0) throw InputError(m.name + ": no candidate applies (not even dense)");
    r.minBytes += lo;
    r.maxBytes += hi;
    r.minSeconds += slo;
    r.maxSeconds += shi;
  }
  return r;
}

double bitsOf(uint64_t bytes, const SensitivityTable& t) {
  return t.linearWeights ? 8.0 * double(bytes) / double(t.linearWeights) : 0;
}

double tokensPerSecond(double linearSeconds, const SensitivityTable& t, const SpeedModel& speed) {
  const double other = speed.otherSeconds(t.otherBytesPerToken);
  if (std::isnan(linearSeconds) || std::isnan(other) || linearSeconds + other <= 0) return 0;
  return 1.0 / (linearSeconds + other);
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

void fillRanges(SearchFront& f, const SensitivityTable& t, const Ranges& r, const SpeedModel& speed) {
  f.minBytes = r.minBytes;
  f.maxBytes = r.maxBytes;
  f.minBitsPerWeight = bitsOf(r.minBytes, t);
  f.maxBitsPerWeight = bitsOf(r.maxBytes, t);
  f.minTokensPerSecond = tokensPerSecond(r.maxSeconds, t, speed);
  f.maxTokensPerSecond = tokensPerSecond(r.minSeconds, t, speed);
  f.speedSource = speed.source();
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
  const SpeedModel speed(bandwidth);
  SearchFront f;
  fillRanges(f, table, rangesOf(table, budget.kind, speed), speed);
  requireReachable(f, budget);
}

SearchFront searchFront(const SensitivityTable& table, BudgetKind kind, const DecodeBandwidth& bandwidth) {
  if (!table.measured) throw Error("searchFront: the sensitivity table has no measured losses");
  const SpeedModel speed(bandwidth);
  SearchFront f;
  f.timeCost = kind == BudgetKind::TokensPerSecond;
  fillRanges(f, table, rangesOf(table, kind, speed), speed);
  std::vector<std::vector<KnapsackItem>> items(table.modules.size());
  for (size_t i = 0; i < table.modules.size(); ++i) {
    const SensitivityModule& m = table.modules[i];
    for (size_t c = 0; c < m.cells.size(); ++c) {
      const SensitivityCell& cell = m.cells[c];
      if (!eligible(cell, kind, speed)) continue;
      const uint64_t cost = f.timeCost ? picoseconds(speed.seconds(cell.bytes, cell.kernel)) : cell.bytes;
      items[i].push_back({int(c), cost, cell.loss});
    }
  }
  const KnapsackFront k = solveKnapsackFront(items);
  f.gridUnit = k.unit;
  for (const FrontPoint& p : k.points) {
    SearchPoint s;
    s.loss = p.loss;
    s.choice = p.choice;
    double seconds = 0;
    for (size_t i = 0; i < table.modules.size(); ++i) {
      const SensitivityCell& cell = table.modules[i].cells[size_t(p.choice[i])];
      s.bytes += cell.bytes;
      seconds += speed.seconds(cell.bytes, cell.kernel);
    }
    s.bitsPerWeight = bitsOf(s.bytes, table);
    s.tokensPerSecond = tokensPerSecond(seconds, table, speed);
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
