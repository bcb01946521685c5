// Normalizers: text -> text before pre-tokenization (NFC, Prepend "▁", Replace " " -> "▁", ...).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace pareto::tok {

class ConfigContext;

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// Builds the normalizer described by `j` (an object with "type"); throws InputError naming the file and
// the type when it is unknown or malformed.
std::unique_ptr<Normalizer> makeNormalizer(const nlohmann::json& j, const ConfigContext& ctx);

}  // namespace pareto::tok
