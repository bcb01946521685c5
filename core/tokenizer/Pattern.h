// Patterns ({"Regex": ...} or {"String": ...} in tokenizer.json) and the split behaviours of the Rust
// library's NormalizedString::split. Matches are reported as a cover of the whole text, alternating gaps
// and matches, because the behaviours (MergedWithPrevious etc.) are defined on that sequence.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/Regex.h"

namespace pareto::tok {

class ConfigContext;

// (span, isMatch), covering the text from 0 to its end.
using MatchCover = std::vector<std::pair<Span, bool>>;

class Pattern {
 public:
  // Reads {"Regex": "..."} or {"String": "..."}; `what` names the component for messages.
  static Pattern fromJson(const nlohmann::json& j, const ConfigContext& ctx, const std::string& what);
  static Pattern literal(std::string s);

  MatchCover findMatches(std::string_view text) const;
  // Every match replaced by `content` (the Replace normalizer and decoder). Stops once the result is longer than
  // maxBytes (the caller refuses such a result), so a hostile replacement never builds the whole of it.
  std::string replaceAll(std::string_view text, std::string_view content, size_t maxBytes = SIZE_MAX) const;

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

MatchCover matchCoverFromSpans(size_t textLength, const std::vector<Span>& matches);
// Each character satisfying `pred` is its own match.
MatchCover matchCoverOfChars(std::string_view text, const std::function<bool(char32_t)>& pred);
void invertCover(MatchCover& cover);

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
SplitBehavior splitBehaviorFromJson(const nlohmann::json& j, const ConfigContext& ctx, const std::string& what);

// The pieces NormalizedString::split keeps, empty ones dropped (PreTokenizedString drops them too).
std::vector<Span> applySplitBehavior(const MatchCover& cover, SplitBehavior behavior);

}  // namespace pareto::tok
