// Decoders: token strings -> text. Each step maps a list of strings to a list of strings (decode_chain in
// the Rust library) and the result is their concatenation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pareto::tok {

class ConfigContext;

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decodeChain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> makeDecoder(const nlohmann::json& j, const ConfigContext& ctx);

}  // namespace pareto::tok
