#include "tokenizer/ConfigContext.h"

#include "tokenizer/Unicode.h"
#include "util/Error.h"

namespace pareto::tok {

std::string ConfigContext::where(const std::string& what) const { return fileMessage(file_, what); }

void ConfigContext::fail(const std::string& what) const { throw InputError(where(what)); }

void ConfigContext::checkTokenLength(const std::string& token, const std::string& what) const {
  if (token.size() > kMaxTokenBytes)
    fail(what + " is " + std::to_string(token.size()) + " bytes long, more than the " + std::to_string(kMaxTokenBytes) +
         " bytes a token may be (real tokens are at most a few hundred)");
}

std::string ConfigContext::type(const nlohmann::json& obj, const std::string& what) const {
  if (!obj.is_object()) fail(what + " must be an object");
  auto it = obj.find("type");
  if (it == obj.end() || !it->is_string()) fail(what + " has no string 'type'");
  return it->get<std::string>();
}

const nlohmann::json& ConfigContext::field(const nlohmann::json& obj, const char* key,
                                           const std::string& what) const {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) fail(what + ": missing '" + key + "'");
  return *it;
}

std::string ConfigContext::string(const nlohmann::json& obj, const char* key, const std::string& what) const {
  const auto& v = field(obj, key, what);
  if (!v.is_string()) fail(what + ": '" + key + "' must be a string");
  return v.get<std::string>();
}

std::optional<std::string> ConfigContext::optString(const nlohmann::json& obj, const char* key,
                                                    const std::string& what) const {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) fail(what + ": '" + key + "' must be a string");
  return it->get<std::string>();
}

bool ConfigContext::boolean(const nlohmann::json& obj, const char* key, const std::string& what,
                            bool fallback) const {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(what + ": '" + key + "' must be true or false");
  return it->get<bool>();
}

int64_t ConfigContext::integer(const nlohmann::json& obj, const char* key, const std::string& what,
                               int64_t fallback) const {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) fail(what + ": '" + key + "' must be an integer");
  return it->get<int64_t>();
}

char32_t ConfigContext::character(const nlohmann::json& obj, const char* key, const std::string& what,
                                  std::optional<char32_t> fallback) const {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (fallback) return *fallback;
    fail(what + ": missing '" + key + "'");
  }
  if (!it->is_string()) fail(what + ": '" + key + "' must be a one-character string");
  const std::string s = it->get<std::string>();
  if (s.empty() || firstInvalidUtf8(s) || countCodePoints(s) != 1)
    fail(what + ": '" + key + "' must be exactly one character, got '" + s + "'");
  size_t i = 0;
  return nextCodePoint(s, i);
}

const nlohmann::json& ConfigContext::array(const nlohmann::json& obj, const char* key,
                                           const std::string& what) const {
  const auto& v = field(obj, key, what);
  if (!v.is_array()) fail(what + ": '" + key + "' must be an array");
  return v;
}

}  // namespace pareto::tok
