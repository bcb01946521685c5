#include "tokenizer/AddedTokens.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tokenizer/ConfigContext.h"
#include "tokenizer/Normalizers.h"
#include "tokenizer/Unicode.h"
#include "util/Error.h"

namespace pareto::tok {

namespace {

// The last character of s (which must be non-empty valid UTF-8).
char32_t lastChar(std::string_view s) {
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return nextCodePoint(s, start);
}

// Start of the run of whitespace that ends s (s.size() when there is none).
size_t trailingSpaceStart(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!isWhitespace(nextCodePoint(s, i))) break;
    end = start;
  }
  return end;
}

// Length of the run of whitespace that starts s.
size_t leadingSpaceLength(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!isWhitespace(nextCodePoint(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

void AddedTokens::Trie::insert(std::string_view key, size_t tokenIndex) {
  uint32_t node = 0;
  for (unsigned char c : key) {
    auto it = nodes_[node].children.find(c);
    if (it == nodes_[node].children.end()) {
      nodes_.push_back(Node{});
      const auto child = static_cast<uint32_t>(nodes_.size() - 1);
      nodes_[node].children.emplace(c, child);
      node = child;
    } else {
      node = it->second;
    }
  }
  nodes_[node].token = static_cast<int64_t>(tokenIndex);
}

std::optional<std::pair<size_t, size_t>> AddedTokens::Trie::longestAt(std::string_view text, size_t pos) const {
  std::optional<std::pair<size_t, size_t>> best;
  uint32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = nodes_[node].children.find(static_cast<unsigned char>(text[i]));
    if (it == nodes_[node].children.end()) break;
    node = it->second;
    if (nodes_[node].token >= 0) best = std::make_pair(static_cast<size_t>(nodes_[node].token), i + 1 - pos);
  }
  return best;
}

AddedTokens::AddedTokens(const nlohmann::json& list, const ConfigContext& ctx, const Normalizer* normalizer,
                         const std::function<std::optional<int64_t>(const std::string&)>& modelTokenToId,
                         int64_t modelVocabCount) {
  if (!list.is_array()) ctx.fail("'added_tokens' must be an array");
  file_ = ctx.file();
  std::vector<AddedToken> declared;
  size_t totalBytes = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& t = list[i];
    const std::string what = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object()) ctx.fail(what + " must be an object");
    AddedToken tok;
    tok.content = ctx.string(t, "content", what);
    tok.id = ctx.integer(t, "id", what, 0);
    tok.singleWord = ctx.boolean(t, "single_word", what, false);
    tok.lstrip = ctx.boolean(t, "lstrip", what, false);
    tok.rstrip = ctx.boolean(t, "rstrip", what, false);
    tok.normalized = ctx.boolean(t, "normalized", what, true);
    tok.special = ctx.boolean(t, "special", what, false);
    if (firstInvalidUtf8(tok.content)) ctx.fail(what + ": 'content' is not valid UTF-8");
    ctx.checkTokenLength(tok.content, what + ": 'content'");
    totalBytes += tok.content.size();
    if (totalBytes > kMaxAddedTokensBytes)
      ctx.fail("'added_tokens' hold more than " + std::to_string(kMaxAddedTokensBytes) +
               " bytes of text (at " + what + "); real tokenizers add a few kilobytes");
    if (tok.special && !tok.content.empty()) special_.insert(tok.content);
    declared.push_back(std::move(tok));
  }

  int64_t maxAdded = -1;
  for (AddedToken& tok : declared) {
    if (tok.content.empty()) continue;  // the Rust library ignores empty added tokens
    auto existing = byContent_.find(tok.content);
    std::optional<int64_t> id;
    if (existing != byContent_.end()) id = tokens_[existing->second].id;
    if (!id) id = modelTokenToId(tok.content);
    if (!id) {
      if (maxAdded < 0)
        id = modelVocabCount;
      else
        id = (maxAdded >= modelVocabCount || modelVocabCount == 0) ? maxAdded + 1 : modelVocabCount;
    }
    tok.id = *id;
    maxAdded = std::max(maxAdded, tok.id);
    if (existing != byContent_.end()) {
      tokens_[existing->second] = tok;  // a later entry with the same content replaces the earlier one
    } else {
      byContent_.emplace(tok.content, tokens_.size());
      tokens_.push_back(tok);
    }
  }
  for (size_t k = 0; k < tokens_.size(); ++k) {
    const AddedToken& tok = tokens_[k];
    byId_[tok.id] = k;
    maxId_ = std::max(maxId_, tok.id);
    if (!tok.normalized) {
      rawTrie_.insert(tok.content, k);
    } else {
      std::string pattern = tok.content;
      if (normalizer != nullptr) normalizer->normalize(pattern);
      if (!pattern.empty()) normalizedTrie_.insert(pattern, k);
    }
  }
}

std::optional<int64_t> AddedTokens::tokenToId(std::string_view content) const {
  auto it = byContent_.find(std::string(content));
  if (it == byContent_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

const AddedToken* AddedTokens::byId(int64_t id) const {
  auto it = byId_.find(id);
  return it == byId_.end() ? nullptr : &tokens_[it->second];
}

bool AddedTokens::isSpecial(std::string_view content) const { return special_.count(std::string(content)) != 0; }

std::vector<std::pair<Span, int64_t>> AddedTokens::findMatches(std::string_view text, const Trie& trie) const {
  std::vector<std::pair<Span, int64_t>> splits;
  if (text.empty()) return {{{0, 0}, -1}};
  size_t startOffset = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const auto m = trie.longestAt(text, pos);
    if (!m) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + m->second;
    // The scan resumes right after the match as found, whether it is rejected or widened by rstrip: the
    // Rust library iterates over the automaton's matches independently of what it does with them.
    pos = stop;
    const AddedToken& tok = tokens_[m->first];
    if (tok.singleWord) {
      const bool startSpace = start == 0 || !isWordChar(lastChar(text.substr(0, start)));
      size_t after = stop;
      const bool stopSpace = stop == text.size() || !isWordChar(nextCodePoint(text, after));
      if (!startSpace || !stopSpace) continue;
    }
    if (tok.lstrip) start = std::max(trailingSpaceStart(text.substr(0, start)), startOffset);
    if (tok.rstrip) stop += leadingSpaceLength(text.substr(stop));
    if (startOffset < start) splits.push_back({{startOffset, start}, -1});
    splits.push_back({{start, stop}, static_cast<int64_t>(m->first)});
    startOffset = stop;
  }
  if (startOffset != text.size()) splits.push_back({{startOffset, text.size()}, -1});
  return splits;
}

void AddedTokens::splitOn(std::vector<TextPiece>& pieces, const Trie& trie, bool normalizeFirst,
                          const Normalizer* normalizer) const {
  std::vector<TextPiece> out;
  out.reserve(pieces.size());
  // Each piece between added tokens is normalized on its own, so a normalizer that adds a little to every
  // piece (Prepend) adds it once per added token in the text: the total is bounded, not just each piece.
  size_t bytesIn = 0, bytesOut = 0;
  for (TextPiece& piece : pieces) {
    if (piece.id) {
      out.push_back(std::move(piece));
      continue;
    }
    if (normalizeFirst && normalizer != nullptr) {
      bytesIn += piece.text.size();
      normalizer->normalize(piece.text);
      bytesOut += piece.text.size();
      if (bytesOut > grownLimit(bytesIn))
        throw InputError(fileMessage(file_, "the normalizer grows " + std::to_string(bytesIn) + " bytes of text to " +
                                                std::to_string(bytesOut) +
                                                " or more between added tokens (at most 4x + 4 KiB): refusing a "
                                                "normalizer that amplifies text"));
    }
    if (trie.empty()) {
      if (!piece.text.empty()) out.push_back(std::move(piece));
      continue;
    }
    for (const auto& [span, index] : findMatches(piece.text, trie)) {
      if (span.first == span.second) continue;
      TextPiece p;
      p.text = piece.text.substr(span.first, span.second - span.first);
      if (index >= 0) p.id = tokens_[static_cast<size_t>(index)].id;
      p.atOriginalStart = piece.atOriginalStart && span.first == 0;
      out.push_back(std::move(p));
    }
  }
  pieces = std::move(out);
}

std::vector<TextPiece> AddedTokens::extractAndNormalize(std::string_view text, const Normalizer* normalizer) const {
  std::vector<TextPiece> pieces;
  pieces.push_back(TextPiece{std::string(text), std::nullopt, true});
  splitOn(pieces, rawTrie_, false, nullptr);
  splitOn(pieces, normalizedTrie_, true, normalizer);
  return pieces;
}

}  // namespace pareto::tok
