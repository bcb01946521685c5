// Hugging Face tokenizer.json, byte-for-byte: the ids Pareto feeds a model must be the ids transformers would.
// The pipeline (added tokens → normalizer → pre-tokenizer → model → post-processor, and the decoder) mirrors
// the Rust `tokenizers` library; an unknown component type is refused, never approximated.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pareto {

using TokenId = int64_t;

class Tokenizer {
 public:
  // Loads a tokenizer.json file, or <dir>/tokenizer.json when given a model folder.
  // Throws InputError naming the file and the offending component.
  static Tokenizer fromPath(const std::string& fileOrModelDir);
  // The same from an already parsed tokenizer.json; `source` names it in messages (the fuzz target uses this).
  static Tokenizer fromJson(const nlohmann::json& root, const std::string& source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // addSpecialTokens applies the post-processor (e.g. BOS); off by default, as in the golden files.
  std::vector<TokenId> encode(std::string_view text, bool addSpecialTokens = false) const;
  std::string decode(const std::vector<TokenId>& ids, bool skipSpecialTokens = false) const;

  std::optional<TokenId> tokenToId(std::string_view token) const;
  std::optional<std::string> idToToken(TokenId id) const;
  // Size of the vocabulary including added tokens (max id + 1).
  size_t vocabSize() const;
  const std::string& sourcePath() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads a UTF-8 text file (readTextFile: a regular file of at most 2 GiB) and encodes it whole; an InputError of
// the encoder (text that is not UTF-8, a regex that gives up) is prefixed with the file's name.
std::vector<TokenId> encodeTextFile(const Tokenizer& tokenizer, const std::string& path,
                                    bool addSpecialTokens = false);

}  // namespace pareto
