// Pre-tokenizers: cut normalized text into the pieces ("words") the model tokenizes one by one, and for
// byte-level tokenizers map bytes to GPT-2 characters.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pareto::tok {

class ConfigContext;

struct Split {
  std::string text;
  // Whether the piece starts at offset 0 of the original input (Metaspace's prepend_scheme "first").
  bool atOriginalStart = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `splits` by their refinement; empty pieces never survive.
  virtual void preTokenize(std::vector<Split>& splits) const = 0;
};

std::unique_ptr<PreTokenizer> makePreTokenizer(const nlohmann::json& j, const ConfigContext& ctx);

}  // namespace pareto::tok
