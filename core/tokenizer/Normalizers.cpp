#include "tokenizer/Normalizers.h"

#include <utf8proc.h>

#include <vector>

#include "tokenizer/ConfigContext.h"
#include "tokenizer/Pattern.h"
#include "tokenizer/Unicode.h"
#include "util/Error.h"

namespace pareto::tok {

namespace {

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { text = normalizeUnicode(text, form_); }

 private:
  NormalForm form_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) appendLowercase(out, nextCodePoint(text, i));
    text = std::move(out);
  }
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0;
    size_t end = text.size();
    if (left_) {
      while (begin < end) {
        size_t i = begin;
        if (!isWhitespace(nextCodePoint(text, i))) break;
        begin = i;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t i = start;
        if (!isWhitespace(nextCodePoint(text, i))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class StripAccents : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      const char32_t c = nextCodePoint(text, i);
      const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      if (cat != UTF8PROC_CATEGORY_MN && cat != UTF8PROC_CATEGORY_MC && cat != UTF8PROC_CATEGORY_ME)
        appendUtf8(out, c);
    }
    text = std::move(out);
  }
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

// Messages name the tokenizer file and the step ("normalizer Sequence[2] Replace").
struct Where {
  std::string file;
  std::string what;
  [[noreturn]] void grew(size_t from, size_t to) const {
    throw InputError(fileMessage(file, what + " grows " + std::to_string(from) + " bytes of text to " +
                                           std::to_string(to) +
                                           " or more (at most 4x + 4 KiB): refusing a normalizer that amplifies text"));
  }
};

class Replace : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content, Where where)
      : pattern_(std::move(pattern)), content_(std::move(content)), where_(std::move(where)) {}
  void normalize(std::string& text) const override {
    const size_t limit = grownLimit(text.size());
    std::string out = pattern_.replaceAll(text, content_, limit);
    if (out.size() > limit) where_.grew(text.size(), out.size());
    text = std::move(out);
  }

 private:
  Pattern pattern_;
  std::string content_;
  Where where_;
};

// Each step is bounded on its own; the chain is bounded against its input, or N doubling steps would grow a
// text 2^N times.
class Sequence : public Normalizer {
 public:
  Sequence(std::vector<std::unique_ptr<Normalizer>> parts, Where where)
      : parts_(std::move(parts)), where_(std::move(where)) {}
  void normalize(std::string& text) const override {
    const size_t input = text.size();
    const size_t limit = grownLimit(input);
    for (const auto& p : parts_) {
      p->normalize(text);
      if (text.size() > limit) where_.grew(input, text.size());
    }
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
  Where where_;
};

}  // namespace

namespace {

std::string insertedText(const nlohmann::json& j, const char* key, const ConfigContext& ctx, const std::string& what) {
  std::string s = ctx.string(j, key, what);
  if (s.size() > kMaxInsertedBytes)
    ctx.fail(what + ": '" + key + "' is " + std::to_string(s.size()) + " bytes, more than the " +
             std::to_string(kMaxInsertedBytes) + " a normalizer may insert (real ones insert one character)");
  return s;
}

std::unique_ptr<Normalizer> makeNormalizerAt(const nlohmann::json& j, const ConfigContext& ctx,
                                             const std::string& label) {
  const std::string type = ctx.type(j, label);
  const std::string what = label + " " + type;
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip")
    return std::make_unique<Strip>(ctx.boolean(j, "strip_left", what, true), ctx.boolean(j, "strip_right", what, true));
  if (type == "Prepend") return std::make_unique<Prepend>(insertedText(j, "prepend", ctx, what));
  if (type == "Replace")
    return std::make_unique<Replace>(Pattern::fromJson(ctx.field(j, "pattern", what), ctx, what),
                                     insertedText(j, "content", ctx, what), Where{ctx.file(), what});
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    const auto& list = ctx.array(j, "normalizers", what);
    for (size_t i = 0; i < list.size(); ++i)
      parts.push_back(makeNormalizerAt(list[i], ctx, label + " Sequence[" + std::to_string(i) + "]"));
    return std::make_unique<Sequence>(std::move(parts), Where{ctx.file(), what});
  }
  ctx.fail("unsupported normalizer type '" + type +
           "' (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Prepend, Replace, Sequence)");
}

}  // namespace

std::unique_ptr<Normalizer> makeNormalizer(const nlohmann::json& j, const ConfigContext& ctx) {
  return makeNormalizerAt(j, ctx, "normalizer");
}

}  // namespace pareto::tok
