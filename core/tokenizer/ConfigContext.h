// Typed access to the fields of tokenizer.json with InputErrors that name the file, the component and the
// key, so a user with a broken or unsupported tokenizer knows exactly what to look at.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace pareto::tok {

class ConfigContext {
 public:
  explicit ConfigContext(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  // "<file>: <what>", the prefix of every message about this file.
  std::string where(const std::string& what) const;
  [[noreturn]] void fail(const std::string& what) const;

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
