#include "tokenizer/PostProcessors.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/ConfigContext.h"

namespace pareto::tok {

namespace {

class NoOpProcessor : public PostProcessor {
 public:
  void process(std::vector<int64_t>&, bool) const override {}
  size_t addedCount() const override { return 0; }
};

// The single-sequence template: a list of pieces, each the sequence itself or a special token's ids.
class TemplateProcessor : public PostProcessor {
 public:
  struct Piece {
    bool isSequence = false;
    std::vector<int64_t> ids;
  };
  explicit TemplateProcessor(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}
  void process(std::vector<int64_t>& ids, bool addSpecialTokens) const override {
    if (!addSpecialTokens) return;
    std::vector<int64_t> out;
    out.reserve(ids.size() + 4);
    for (const Piece& p : pieces_) {
      if (p.isSequence)
        out.insert(out.end(), ids.begin(), ids.end());
      else
        out.insert(out.end(), p.ids.begin(), p.ids.end());
    }
    ids = std::move(out);
  }
  size_t addedCount() const override {
    size_t n = 0;
    for (const Piece& p : pieces_) n += p.ids.size();
    return n;
  }

 private:
  std::vector<Piece> pieces_;
};

// Bert ([CLS] A [SEP]) and Roberta (<s> A </s>) processing of a single sequence.
class WrapProcessor : public PostProcessor {
 public:
  WrapProcessor(int64_t first, int64_t last) : first_(first), last_(last) {}
  void process(std::vector<int64_t>& ids, bool addSpecialTokens) const override {
    if (!addSpecialTokens) return;
    ids.insert(ids.begin(), first_);
    ids.push_back(last_);
  }
  size_t addedCount() const override { return 2; }

 private:
  int64_t first_, last_;
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int64_t>& ids, bool addSpecialTokens) const override {
    for (const auto& p : parts_) p->process(ids, addSpecialTokens);
  }
  size_t addedCount() const override {
    size_t n = 0;
    for (const auto& p : parts_) n += p->addedCount();
    return n;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

// A template is copied into every encode: real ones have 2-5 pieces naming one or two special tokens of one id.
constexpr size_t kMaxTemplatePieces = 256;
constexpr size_t kMaxTemplateIds = 1024;

std::unique_ptr<PostProcessor> makeTemplate(const nlohmann::json& j, const ConfigContext& ctx) {
  const std::string what = "post_processor TemplateProcessing";
  std::map<std::string, std::vector<int64_t>> specials;
  if (j.contains("special_tokens") && !j["special_tokens"].is_null()) {
    const auto& st = j["special_tokens"];
    if (!st.is_object()) ctx.fail(what + ": 'special_tokens' must be an object");
    for (auto it = st.begin(); it != st.end(); ++it) {
      const std::string where = what + ": special_tokens['" + it.key() + "']";
      std::vector<int64_t> ids;
      const auto& list = ctx.array(it.value(), "ids", where);
      if (list.size() > kMaxTemplateIds)
        ctx.fail(where + ": " + std::to_string(list.size()) + " ids, more than the " +
                 std::to_string(kMaxTemplateIds) + " a template may add");
      for (const auto& id : list) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0) ctx.fail(where + ": 'ids' must be non-negative integers");
        ids.push_back(id.get<int64_t>());
      }
      specials[it.key()] = ids;
    }
  }
  auto special = [&](const std::string& name) {
    auto it = specials.find(name);
    if (it == specials.end()) ctx.fail(what + ": the template uses '" + name + "', which is not in 'special_tokens'");
    return it->second;
  };

  std::vector<TemplateProcessor::Piece> pieces;
  const auto& single = ctx.array(j, "single", what);
  if (single.size() > kMaxTemplatePieces)
    ctx.fail(what + ": 'single' has " + std::to_string(single.size()) + " pieces, more than the " +
             std::to_string(kMaxTemplatePieces) + " a template may have");
  size_t sequences = 0, addedIds = 0;
  for (size_t i = 0; i < single.size(); ++i) {
    const auto& p = single[i];
    const std::string where = what + ": single[" + std::to_string(i) + "]";
    TemplateProcessor::Piece piece;
    if (p.is_object() && p.contains("Sequence")) {
      const std::string id = ctx.string(p["Sequence"], "id", where);
      if (id != "A") ctx.fail(where + ": the single-sequence template can only use sequence A, not '" + id + "'");
      piece.isSequence = true;
    } else if (p.is_object() && p.contains("SpecialToken")) {
      piece.ids = special(ctx.string(p["SpecialToken"], "id", where));
    } else if (p.is_string()) {
      // The string form ("$A", "$A:0", "[CLS]", "[CLS]:0") the Python API accepts.
      std::string s = p.get<std::string>();
      const size_t colon = s.rfind(':');
      if (colon != std::string::npos && colon > 0) s = s.substr(0, colon);
      if (s == "$" || s == "$A" || s == "$a" || s == "$0") {
        piece.isSequence = true;
      } else if (!s.empty() && s[0] == '$') {
        ctx.fail(where + ": the single-sequence template can only use sequence A, not '" + s + "'");
      } else {
        piece.ids = special(s);
      }
    } else {
      ctx.fail(where + " is " + p.dump() + "; expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    // Each sequence piece copies the whole encoded text once more.
    if (piece.isSequence && ++sequences > 1)
      ctx.fail(where +
               ": sequence A appears more than once (each copy repeats the whole text; real templates use it once)");
    addedIds += piece.ids.size();
    if (addedIds > kMaxTemplateIds)
      ctx.fail(where + ": the template adds more than " + std::to_string(kMaxTemplateIds) + " ids to every encode");
    pieces.push_back(std::move(piece));
  }
  return std::make_unique<TemplateProcessor>(std::move(pieces));
}

int64_t tokenPairId(const nlohmann::json& j, const char* key, const ConfigContext& ctx, const std::string& what) {
  const auto& v = ctx.field(j, key, what);
  if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer())
    ctx.fail(what + ": '" + key + "' must be [token, id]");
  return v[1].get<int64_t>();
}

}  // namespace

std::unique_ptr<PostProcessor> makePostProcessor(const nlohmann::json& j, const ConfigContext& ctx) {
  const std::string type = ctx.type(j, "post_processor");
  const std::string what = "post_processor " + type;
  // ByteLevel post-processing only trims offsets; ids are untouched.
  if (type == "ByteLevel") return std::make_unique<NoOpProcessor>();
  if (type == "TemplateProcessing") return makeTemplate(j, ctx);
  if (type == "BertProcessing" || type == "RobertaProcessing")
    return std::make_unique<WrapProcessor>(tokenPairId(j, "cls", ctx, what), tokenPairId(j, "sep", ctx, what));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const auto& sub : ctx.array(j, "processors", what)) parts.push_back(makePostProcessor(sub, ctx));
    return std::make_unique<SequenceProcessor>(std::move(parts));
  }
  ctx.fail("unsupported post_processor type '" + type +
           "' (supported: TemplateProcessing, ByteLevel, BertProcessing, RobertaProcessing, Sequence)");
}

std::optional<Truncation> readTruncation(const nlohmann::json& j, const ConfigContext& ctx) {
  if (j.is_null()) return std::nullopt;
  const std::string what = "truncation";
  if (!j.is_object()) ctx.fail(what + " must be an object or null");
  Truncation t;
  const int64_t maxLength = ctx.integer(j, "max_length", what, 512);
  if (maxLength < 0) ctx.fail(what + ": 'max_length' must not be negative");
  t.maxLength = static_cast<size_t>(maxLength);
  const std::string direction = ctx.optString(j, "direction", what).value_or("Right");
  if (direction != "Right" && direction != "Left") ctx.fail(what + ": unknown direction '" + direction + "'");
  t.fromLeft = direction == "Left";
  const std::string strategy = ctx.optString(j, "strategy", what).value_or("LongestFirst");
  if (strategy != "LongestFirst" && strategy != "OnlyFirst" && strategy != "OnlySecond")
    ctx.fail(what + ": unknown strategy '" + strategy + "'");
  // OnlySecond cannot truncate a single sequence: the Rust library refuses to encode with it.
  if (strategy == "OnlySecond") ctx.fail(what + ": strategy OnlySecond cannot truncate a single sequence");
  return t;
}

std::optional<Padding> readPadding(const nlohmann::json& j, const ConfigContext& ctx) {
  if (j.is_null()) return std::nullopt;
  const std::string what = "padding";
  if (!j.is_object()) ctx.fail(what + " must be an object or null");
  Padding p;
  const auto& strategy = ctx.field(j, "strategy", what);
  if (strategy.is_object() && strategy.contains("Fixed") && strategy["Fixed"].is_number_unsigned()) {
    p.fixedLength = strategy["Fixed"].get<size_t>();
  } else if (!(strategy.is_string() && strategy.get<std::string>() == "BatchLongest")) {
    ctx.fail(what + ": unknown strategy " + strategy.dump() + " (expected \"BatchLongest\" or {\"Fixed\": n})");
  }
  const int64_t multiple = ctx.integer(j, "pad_to_multiple_of", what, 0);
  if (multiple < 0) ctx.fail(what + ": 'pad_to_multiple_of' must not be negative");
  p.multipleOf = static_cast<size_t>(multiple);
  // Every encode pads to these lengths: a hostile 2^40 would make each call allocate terabytes.
  constexpr size_t kMaxPaddedLength = size_t{1} << 24;   // config.json's bound on max_position_embeddings
  if (p.fixedLength > kMaxPaddedLength || p.multipleOf > kMaxPaddedLength)
    ctx.fail(what + ": padding length " + std::to_string(std::max(p.fixedLength, p.multipleOf)) +
             " is beyond any model's context (at most " + std::to_string(kMaxPaddedLength) + ")");
  const std::string direction = ctx.optString(j, "direction", what).value_or("Right");
  if (direction != "Right" && direction != "Left") ctx.fail(what + ": unknown direction '" + direction + "'");
  p.left = direction == "Left";
  p.padId = ctx.integer(j, "pad_id", what, 0);
  return p;
}

void truncate(std::vector<int64_t>& ids, const Truncation& t, size_t reserved) {
  const size_t maxLength = t.maxLength > reserved ? t.maxLength - reserved : 0;
  if (ids.size() <= maxLength) return;
  if (t.fromLeft)
    ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(maxLength));
  else
    ids.resize(maxLength);
}

void pad(std::vector<int64_t>& ids, const Padding& p) {
  size_t length = p.fixedLength > 0 ? p.fixedLength : ids.size();
  if (p.multipleOf > 0 && length % p.multipleOf > 0) length += p.multipleOf - length % p.multipleOf;
  if (ids.size() >= length) return;
  const size_t n = length - ids.size();
  if (p.left)
    ids.insert(ids.begin(), n, p.padId);
  else
    ids.insert(ids.end(), n, p.padId);
}

}  // namespace pareto::tok
