// Added tokens (special tokens such as <|begin_of_text|> and user-added words) are cut out of the text
// before the normalizer and the model see it, longest match first, honouring lstrip, rstrip, single_word and
// normalized as the Rust library's AddedVocabulary does.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/Regex.h"

namespace pareto::tok {

class ConfigContext;
class Normalizer;

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool singleWord = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A piece of text between added tokens, or an added token with its id.
struct TextPiece {
  std::string text;
  std::optional<int64_t> id;
  bool atOriginalStart = false;
};

class AddedTokens {
 public:
  AddedTokens() = default;
  // Reads the "added_tokens" array. Ids are assigned as the Rust library's add_tokens does (the model's id
  // for a token the vocabulary has, else the next free one), which is what the file says unless the file is
  // inconsistent. The normalizer is needed because normalized tokens are matched in their normalized form.
  AddedTokens(const nlohmann::json& list, const ConfigContext& ctx, const Normalizer* normalizer,
              const std::function<std::optional<int64_t>(const std::string&)>& modelTokenToId,
              int64_t modelVocabCount);

  // Added tokens out of the raw text, then the rest normalized, then normalized added tokens out of that.
  std::vector<TextPiece> extractAndNormalize(std::string_view text, const Normalizer* normalizer) const;

  std::optional<int64_t> tokenToId(std::string_view content) const;
  const AddedToken* byId(int64_t id) const;
  bool isSpecial(std::string_view content) const;
  int64_t maxId() const { return maxId_; }
  bool empty() const { return tokens_.empty(); }

 private:
  // A byte trie answering "longest added token starting here".
  class Trie {
   public:
    void insert(std::string_view key, size_t tokenIndex);
    // (index, length) of the longest key that starts at text[pos], if any.
    std::optional<std::pair<size_t, size_t>> longestAt(std::string_view text, size_t pos) const;
    bool empty() const { return nodes_.size() <= 1; }

   private:
    struct Node {
      std::unordered_map<unsigned char, uint32_t> children;
      int64_t token = -1;
    };
    std::vector<Node> nodes_{Node{}};
  };

  // Splits text into (span, token index or -1) pieces covering it, as find_matches does.
  std::vector<std::pair<Span, int64_t>> findMatches(std::string_view text, const Trie& trie) const;
  void splitOn(std::vector<TextPiece>& pieces, const Trie& trie, bool normalizeFirst,
               const Normalizer* normalizer) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::string, size_t> byContent_;
  std::unordered_map<int64_t, size_t> byId_;
  std::unordered_set<std::string> special_;
  Trie rawTrie_;         // tokens with normalized=false, matched on the input text
  Trie normalizedTrie_;  // tokens with normalized=true, matched (in normalized form) on normalized text
  int64_t maxId_ = -1;
  std::string file_;     // tokenizer.json, for messages
};

}  // namespace pareto::tok
