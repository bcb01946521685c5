// Typed access to the fields of tokenizer.json with InputErrors that name the file, the component and the
// key, so a user with a broken or unsupported tokenizer knows exactly what to look at.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace pareto::tok {

// Bounds on what tokenizer.json may ask of us. Every length below is far above real files (the longest vocab
// entry of Llama 3 and Qwen3 is 256 bytes; Llama 3's 256 added tokens total 7.5 KB) and keeps one hostile
// entry from costing gigabytes: a 30 MB added token became a 6 GB match trie.
constexpr size_t kMaxTokenBytes = 1024;              // a vocab entry, a merge piece, an added token
constexpr size_t kMaxAddedTokensBytes = 1u << 20;    // all added tokens together (the trie costs ~200 B a byte)
constexpr size_t kMaxInsertedBytes = 1024;           // what Prepend and Replace insert per match

// The most bytes normalizing (or decoding) `inputBytes` may give. Real normalizers at most triple a text
// (" " -> "\u2581", plus a prepended "\u2581"); a chain of Replace steps would grow it geometrically.
constexpr size_t grownLimit(size_t inputBytes) { return 4 * inputBytes + 4096; }

class ConfigContext {
 public:
  explicit ConfigContext(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  // "<file>: <what>", the prefix of every message about this file.
  std::string where(const std::string& what) const;
  [[noreturn]] void fail(const std::string& what) const;
  // Refuses a token string from the file (vocab entry, merge piece, added token) longer than kMaxTokenBytes.
  void checkTokenLength(const std::string& token, const std::string& what) const;

  // The "type" of a component object; `what` is e.g. "normalizer".
  std::string type(const nlohmann::json& obj, const std::string& what) const;
  // A required field (present and not null).
  const nlohmann::json& field(const nlohmann::json& obj, const char* key, const std::string& what) const;

  std::string string(const nlohmann::json& obj, const char* key, const std::string& what) const;
  std::optional<std::string> optString(const nlohmann::json& obj, const char* key, const std::string& what) const;
  bool boolean(const nlohmann::json& obj, const char* key, const std::string& what, bool fallback) const;
  int64_t integer(const nlohmann::json& obj, const char* key, const std::string& what, int64_t fallback) const;
  // A string field that must hold exactly one character (Metaspace replacement, Strip content).
  char32_t character(const nlohmann::json& obj, const char* key, const std::string& what,
                     std::optional<char32_t> fallback) const;
  // A required array field.
  const nlohmann::json& array(const nlohmann::json& obj, const char* key, const std::string& what) const;

 private:
  std::string file_;
};

}  // namespace pareto::tok
