// The BPE model: a word (one pre-tokenized piece) becomes ids by applying merges in rank order. Same
// algorithm and tie-breaking as the Rust library (a priority queue of candidate merges ordered by rank, then
// position), plus a per-word cache because real text repeats its words.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pareto::tok {

class ConfigContext;

class BpeModel {
 public:
  // Reads the "model" object of tokenizer.json (type BPE). Throws InputError for a malformed vocab or
  // merges entry, naming the file and the entry.
  BpeModel(const nlohmann::json& model, const ConfigContext& ctx);

  void tokenize(std::string_view word, std::vector<int64_t>& out) const;

  std::optional<int64_t> tokenToId(std::string_view token) const;
  // Token text of id, or nullptr when the vocabulary has no such id.
  const std::string* idToToken(int64_t id) const;
  int64_t maxId() const { return static_cast<int64_t>(idToToken_.size()) - 1; }
  // Number of vocabulary entries (the Rust library's get_vocab_size, which numbers new added tokens).
  size_t vocabCount() const { return vocab_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    uint32_t newId;
  };
  static uint64_t pairKey(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }

  // The word's characters as initial symbols (with prefix/suffix, byte fallback and unknowns), then merged.
  void mergeWord(std::string_view word, std::vector<int64_t>& out) const;
  // The id of unk_token; the Rust library only complains about a missing one when it is needed.
  uint32_t unkId() const;

  std::string context_;  // the file, for errors raised while encoding

  std::unordered_map<std::string, uint32_t> vocab_;
  std::vector<std::string> idToToken_;
  std::vector<char> hasId_;  // ids may have holes
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<std::string> unkToken_;
  std::optional<std::string> continuingSubwordPrefix_;
  std::optional<std::string> endOfWordSuffix_;
  bool fuseUnk_ = false;
  bool byteFallback_ = false;
  bool ignoreMerges_ = false;

  mutable std::mutex cacheMutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
};

}  // namespace pareto::tok
