// Post-processors: what encode(text, addSpecialTokens=true) wraps around the model's ids (BOS/EOS through
// TemplateProcessing, CLS/SEP through Bert/Roberta processing). Only single sequences are encoded here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pareto::tok {

class ConfigContext;

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int64_t>& ids, bool addSpecialTokens) const = 0;
  // How many ids process() adds to a single sequence (truncation leaves room for them).
  virtual size_t addedCount() const = 0;
};

std::unique_ptr<PostProcessor> makePostProcessor(const nlohmann::json& j, const ConfigContext& ctx);

// The "truncation" and "padding" settings of tokenizer.json, applied around post-processing as the Rust
// library does for a single sequence.
struct Truncation {
  size_t maxLength = 0;
  bool fromLeft = false;
};
struct Padding {
  size_t fixedLength = 0;  // 0: BatchLongest, which leaves a single sequence as it is
  size_t multipleOf = 0;
  bool left = false;
  int64_t padId = 0;
};
std::optional<Truncation> readTruncation(const nlohmann::json& j, const ConfigContext& ctx);
std::optional<Padding> readPadding(const nlohmann::json& j, const ConfigContext& ctx);
void truncate(std::vector<int64_t>& ids, const Truncation& t, size_t reserved);
void pad(std::vector<int64_t>& ids, const Padding& p);

}  // namespace pareto::tok
