#include "tokenizer/Pattern.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tokenizer/ConfigContext.h"
#include "tokenizer/Unicode.h"

namespace pareto::tok {

Pattern Pattern::fromJson(const nlohmann::json& j, const ConfigContext& ctx, const std::string& what) {
  if (!j.is_object() || j.size() != 1)
    ctx.fail(what + ": 'pattern' must be {\"Regex\": ...} or {\"String\": ...}");
  Pattern p;
  if (j.contains("String")) {
    p.literal_ = ctx.string(j, "String", what + " pattern");
  } else if (j.contains("Regex")) {
    p.regex_ = std::make_shared<Regex>(ctx.string(j, "Regex", what + " pattern"), ctx.where(what));
  } else {
    ctx.fail(what + ": unknown pattern kind '" + j.begin().key() + "' (expected Regex or String)");
  }
  return p;
}

Pattern Pattern::literal(std::string s) {
  Pattern p;
  p.literal_ = std::move(s);
  return p;
}

MatchCover Pattern::findMatches(std::string_view text) const {
  if (text.empty()) return {{{0, 0}, false}};
  std::vector<Span> spans;
  if (regex_)
    regex_->findAll(text, spans);
  else
    findLiteral(text, literal_, spans);
  return matchCoverFromSpans(text.size(), spans);
}

std::string Pattern::replaceAll(std::string_view text, std::string_view content, size_t maxBytes) const {
  std::string out;
  out.reserve(text.size());
  for (const auto& [span, isMatch] : findMatches(text)) {
    if (out.size() > maxBytes) break;
    if (isMatch)
      out.append(content);
    else
      out.append(text.substr(span.first, span.second - span.first));
  }
  return out;
}

MatchCover matchCoverFromSpans(size_t textLength, const std::vector<Span>& matches) {
  if (textLength == 0) return {{{0, 0}, false}};
  MatchCover cover;
  cover.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (const Span& m : matches) {
    if (prev != m.first) cover.push_back({{prev, m.first}, false});
    cover.push_back({m, true});
    prev = m.second;
  }
  if (prev != textLength) cover.push_back({{prev, textLength}, false});
  return cover;
}

MatchCover matchCoverOfChars(std::string_view text, const std::function<bool(char32_t)>& pred) {
  if (text.empty()) return {{{0, 0}, false}};
  MatchCover cover;
  size_t lastOffset = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t b = i;
    const char32_t c = nextCodePoint(text, i);
    if (pred(c)) {
      if (lastOffset < b) cover.push_back({{lastOffset, b}, false});
      cover.push_back({{b, i}, true});
      lastOffset = i;
    }
  }
  if (text.size() > lastOffset) cover.push_back({{lastOffset, text.size()}, false});
  return cover;
}

void invertCover(MatchCover& cover) {
  for (auto& m : cover) m.second = !m.second;
}

SplitBehavior splitBehaviorFromJson(const nlohmann::json& j, const ConfigContext& ctx, const std::string& what) {
  if (!j.is_string()) ctx.fail(what + ": 'behavior' must be a string");
  const std::string s = j.get<std::string>();
  if (s == "Removed") return SplitBehavior::Removed;
  if (s == "Isolated") return SplitBehavior::Isolated;
  if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (s == "Contiguous") return SplitBehavior::Contiguous;
  ctx.fail(what + ": unknown split behavior '" + s +
           "' (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)");
}

std::vector<Span> applySplitBehavior(const MatchCover& cover, SplitBehavior behavior) {
  // (span, remove) as the Rust fold builds it.
  std::vector<std::pair<Span, bool>> splits;
  splits.reserve(cover.size());
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const auto& m : cover) splits.push_back({m.first, false});
      break;
    case SplitBehavior::Removed:
      splits = cover;
      break;
    case SplitBehavior::Contiguous: {
      bool previousMatch = false;
      for (const auto& [span, isMatch] : cover) {
        if (isMatch == previousMatch && !splits.empty())
          splits.back().first.second = span.second;
        else
          splits.push_back({span, false});
        previousMatch = isMatch;
      }
      break;
    }
    case SplitBehavior::MergedWithPrevious: {
      bool previousMatch = false;
      for (const auto& [span, isMatch] : cover) {
        if (isMatch && !previousMatch && !splits.empty())
          splits.back().first.second = span.second;
        else
          splits.push_back({span, false});
        previousMatch = isMatch;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool previousMatch = false;
      for (auto it = cover.rbegin(); it != cover.rend(); ++it) {
        const auto& [span, isMatch] = *it;
        if (isMatch && !previousMatch && !splits.empty())
          splits.back().first.first = span.first;
        else
          splits.push_back({span, false});
        previousMatch = isMatch;
      }
      std::reverse(splits.begin(), splits.end());
      break;
    }
  }
  std::vector<Span> kept;
  kept.reserve(splits.size());
  for (const auto& [span, remove] : splits)
    if (!remove && span.first != span.second) kept.push_back(span);
  return kept;
}

}  // namespace pareto::tok
