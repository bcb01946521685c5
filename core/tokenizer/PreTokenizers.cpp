#include "tokenizer/PreTokenizers.h"

#include <functional>

#include "tokenizer/ByteLevel.h"
#include "tokenizer/ConfigContext.h"
#include "tokenizer/Pattern.h"
#include "tokenizer/Unicode.h"

namespace pareto::tok {

namespace {

// GPT-2's pre-tokenization regex, as the ByteLevel pre-tokenizer of the Rust library spells it.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Applies `cut` (text -> match cover) and `behavior` to every split.
void splitAll(std::vector<Split>& splits, const std::function<MatchCover(const std::string&)>& cut,
              SplitBehavior behavior) {
  std::vector<Split> out;
  out.reserve(splits.size());
  for (Split& s : splits) {
    for (const Span& span : applySplitBehavior(cut(s.text), behavior))
      out.push_back({s.text.substr(span.first, span.second - span.first), s.atOriginalStart && span.first == 0});
  }
  splits = std::move(out);
}

class ByteLevelPre : public PreTokenizer {
 public:
  ByteLevelPre(bool addPrefixSpace, bool useRegex, const ConfigContext& ctx) : addPrefixSpace_(addPrefixSpace) {
    if (useRegex) regex_ = std::make_shared<Regex>(kGpt2Pattern, ctx.where("pre_tokenizer ByteLevel"));
  }
  void preTokenize(std::vector<Split>& splits) const override {
    if (addPrefixSpace_)
      for (Split& s : splits)
        if (s.text.empty() || s.text[0] != ' ') s.text.insert(0, 1, ' ');
    if (regex_) {
      std::vector<Span> spans;
      splitAll(
          splits,
          [&](const std::string& t) {
            spans.clear();
            regex_->findAll(t, spans);
            return matchCoverFromSpans(t.size(), spans);
          },
          SplitBehavior::Isolated);
    }
    for (Split& s : splits) s.text = bytesToChars(s.text);
  }

 private:
  bool addPrefixSpace_;
  std::shared_ptr<const Regex> regex_;
};

class SplitPre : public PreTokenizer {
 public:
  SplitPre(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void preTokenize(std::vector<Split>& splits) const override {
    splitAll(
        splits,
        [&](const std::string& t) {
          MatchCover cover = pattern_.findMatches(t);
          if (invert_) invertCover(cover);
          return cover;
        },
        behavior_);
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Splits on characters satisfying a predicate (Digits, Punctuation, WhitespaceSplit, CharDelimiterSplit).
class CharSplitPre : public PreTokenizer {
 public:
  CharSplitPre(std::function<bool(char32_t)> pred, SplitBehavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  void preTokenize(std::vector<Split>& splits) const override {
    splitAll(
        splits, [&](const std::string& t) { return matchCoverOfChars(t, pred_); }, behavior_);
  }

 private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

class WhitespacePre : public PreTokenizer {
 public:
  explicit WhitespacePre(const ConfigContext& ctx)
      : regex_(std::make_shared<Regex>(R"(\w+|[^\w\s]+)", ctx.where("pre_tokenizer Whitespace"))) {}
  void preTokenize(std::vector<Split>& splits) const override {
    std::vector<Span> spans;
    splitAll(
        splits,
        [&](const std::string& t) {
          spans.clear();
          regex_->findAll(t, spans);
          MatchCover cover = matchCoverFromSpans(t.size(), spans);
          invertCover(cover);
          return cover;
        },
        SplitBehavior::Removed);
  }

 private:
  std::shared_ptr<const Regex> regex_;
};

enum class PrependScheme { Always, First, Never };

class MetaspacePre : public PreTokenizer {
 public:
  MetaspacePre(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), rep_(utf8(replacement)), scheme_(scheme), split_(split) {}
  void preTokenize(std::vector<Split>& splits) const override {
    const Pattern space = Pattern::literal(" ");
    for (Split& s : splits) {
      s.text = space.replaceAll(s.text, rep_);
      const bool startsWithRep = s.text.compare(0, rep_.size(), rep_) == 0;
      if (!startsWithRep && (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && s.atOriginalStart)))
        s.text.insert(0, rep_);
    }
    if (split_) {
      const char32_t rep = replacement_;
      splitAll(
          splits, [&](const std::string& t) { return matchCoverOfChars(t, [rep](char32_t c) { return c == rep; }); },
          SplitBehavior::MergedWithNext);
    }
  }

 private:
  char32_t replacement_;
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

class BertPre : public PreTokenizer {
 public:
  void preTokenize(std::vector<Split>& splits) const override {
    splitAll(
        splits, [](const std::string& t) { return matchCoverOfChars(t, isWhitespace); }, SplitBehavior::Removed);
    splitAll(
        splits, [](const std::string& t) { return matchCoverOfChars(t, isPunctuation); }, SplitBehavior::Isolated);
  }
};

class SequencePre : public PreTokenizer {
 public:
  explicit SequencePre(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void preTokenize(std::vector<Split>& splits) const override {
    for (const auto& p : parts_) p->preTokenize(splits);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

PrependScheme prependScheme(const nlohmann::json& j, const ConfigContext& ctx, const std::string& what) {
  const auto scheme = ctx.optString(j, "prepend_scheme", what);
  const auto it = j.find("add_prefix_space");
  const bool noPrefix = it != j.end() && it->is_boolean() && !it->get<bool>();
  if (!scheme) return noPrefix ? PrependScheme::Never : PrependScheme::Always;
  PrependScheme s;
  if (*scheme == "always")
    s = PrependScheme::Always;
  else if (*scheme == "first")
    s = PrependScheme::First;
  else if (*scheme == "never")
    s = PrependScheme::Never;
  else
    ctx.fail(what + ": unknown prepend_scheme '" + *scheme + "' (expected always, first or never)");
  if (noPrefix && s != PrependScheme::Never) ctx.fail(what + ": add_prefix_space does not match prepend_scheme");
  return s;
}

}  // namespace

std::unique_ptr<PreTokenizer> makePreTokenizer(const nlohmann::json& j, const ConfigContext& ctx) {
  const std::string type = ctx.type(j, "pre_tokenizer");
  const std::string what = "pre_tokenizer " + type;
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPre>(ctx.boolean(j, "add_prefix_space", what, true),
                                          ctx.boolean(j, "use_regex", what, true), ctx);
  if (type == "Split")
    return std::make_unique<SplitPre>(Pattern::fromJson(ctx.field(j, "pattern", what), ctx, what),
                                      splitBehaviorFromJson(ctx.field(j, "behavior", what), ctx, what),
                                      ctx.boolean(j, "invert", what, false));
  if (type == "Metaspace")
    return std::make_unique<MetaspacePre>(ctx.character(j, "replacement", what, U'\u2581'),
                                          prependScheme(j, ctx, what), ctx.boolean(j, "split", what, true));
  if (type == "Digits")
    return std::make_unique<CharSplitPre>(isNumeric, ctx.boolean(j, "individual_digits", what, false)
                                                         ? SplitBehavior::Isolated
                                                         : SplitBehavior::Contiguous);
  if (type == "Whitespace") return std::make_unique<WhitespacePre>(ctx);
  if (type == "WhitespaceSplit") return std::make_unique<CharSplitPre>(isWhitespace, SplitBehavior::Removed);
  if (type == "Punctuation") {
    SplitBehavior b = SplitBehavior::Isolated;
    if (j.contains("behavior") && !j["behavior"].is_null()) b = splitBehaviorFromJson(j["behavior"], ctx, what);
    return std::make_unique<CharSplitPre>(isPunctuation, b);
  }
  if (type == "CharDelimiterSplit") {
    const char32_t d = ctx.character(j, "delimiter", what, std::nullopt);
    return std::make_unique<CharSplitPre>([d](char32_t c) { return c == d; }, SplitBehavior::Removed);
  }
  if (type == "BertPreTokenizer") return std::make_unique<BertPre>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const auto& sub : ctx.array(j, "pretokenizers", what)) parts.push_back(makePreTokenizer(sub, ctx));
    return std::make_unique<SequencePre>(std::move(parts));
  }
  ctx.fail("unsupported pre_tokenizer type '" + type +
           "' (supported: ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation, "
           "CharDelimiterSplit, BertPreTokenizer, Sequence)");
}

}  // namespace pareto::tok
