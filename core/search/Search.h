// The search of issue 24: a sensitivity table (search/Sensitivity.h) and a budget in, the predicted front of
// allocations and the one chosen for the budget out, each as an ordinary recipe (one override per module, the
// exact module name as its glob) that compress runs as it is.
//
// Budgets: average bits per weight over the block linears (as compress reports linear_bits_per_weight), total
// bytes of the block linears, or predicted batch-1 decode tokens per second. Bits and bytes are one cost (the
// bytes each candidate stores); tokens per second is the cost in seconds per token, Σ bytes / the GB/s the
// module's kernel achieved in this device's stored kernel benchmarks (RecipeEstimate's model), plus what the
// step reads besides the linears at the dense kernel's GB/s. Without usable kernel benchmarks every byte is
// read at one bandwidth (a measured copy bandwidth), so a tokens-per-second budget is a bytes budget.
// The allocation is search/Allocation.h's exact multiple-choice knapsack over that cost: one sweep, the whole
// front.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compress/RecipeEstimate.h"
#include "search/Allocation.h"
#include "search/SearchBase.h"
#include "search/Sensitivity.h"

namespace pareto {

enum class BudgetKind { BitsPerWeight, Bytes, TokensPerSecond };

struct SearchBudget {
  BudgetKind kind = BudgetKind::BitsPerWeight;
  double value = 0;
};
std::string budgetText(const SearchBudget& budget);   // "4.125 bits per weight", "12000000 bytes", "250 tokens/s"

struct SearchPoint {
  double loss = 0;               // Σ estimated loss
  uint64_t bytes = 0;            // of the block linears
  double bitsPerWeight = 0;      // over the block linears
  double tokensPerSecond = 0;    // predicted; 0 when no bandwidth is known
  std::vector<int> choice;       // per module of the table: the candidate's index
};

struct SearchFront {
  bool timeCost = false;         // the knapsack's cost: seconds per token (else bytes)
  std::vector<SearchPoint> points;   // cheapest first, estimated loss decreasing
  // The reachable range in the budget's terms (bits per weight, bytes, tokens/s).
  double minBitsPerWeight = 0, maxBitsPerWeight = 0;
  uint64_t minBytes = 0, maxBytes = 0;
  double minTokensPerSecond = 0, maxTokensPerSecond = 0;
  std::string speedSource;       // where predicted tokens/s come from
  // Module × candidate pairs left out under a tokens/s budget: a layout no benchmarked kernel decodes, or a
  // kernel this device's benchmarks lack.
  std::vector<std::string> unmeasured;
  uint64_t gridUnit = 1;         // Allocation.h's unit (bytes, or picoseconds per token)
};

// A finished search: the base it read, the measured table, the front and the point chosen for the budget.
struct SearchReport {
  SearchBase base;
  SensitivityTable table;
  SearchFront front;
  SearchBudget budget;
  size_t chosen = 0;        // index into front.points
  const SearchPoint& chosenPoint() const { return front.points.at(chosen); }
};

// The front over bytes (kind BitsPerWeight, Bytes) or over time (TokensPerSecond). Needs a measured table.
SearchFront searchFront(const SensitivityTable& table, BudgetKind kind, const DecodeBandwidth& bandwidth);

// The reachable range of `budget`'s kind from the table's bytes and the bandwidth alone (no losses needed), so a
// budget can be refused before the sensitivity pass. Throws InputError "... is outside what the candidates can
// reach: 2.50 to 16.00 bits per weight" for a budget outside it.
void checkBudget(const SensitivityTable& table, const SearchBudget& budget, const DecodeBandwidth& bandwidth);

// The front's point of least estimated loss within the budget. Throws InputError with the reachable range when
// none is.
const SearchPoint& chooseForBudget(const SearchFront& front, const SearchBudget& budget);

// `count` points spread evenly over the front's cost range (distinct; all of them when the front is shorter).
std::vector<size_t> frontierSample(const SearchFront& front, size_t count);

// The point as a recipe: the base's calibration block (file made absolute) and skip list, one override per
// module naming it exactly with its candidate's blocks, and "search" (budget, estimates) in the description.
nlohmann::json searchRecipe(const SearchBase& base, const SensitivityTable& table, const SearchPoint& point,
                            const std::string& description);

}  // namespace pareto
