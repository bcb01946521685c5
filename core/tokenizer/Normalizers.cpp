#include "tokenizer/Normalizers.h"

#include <utf8proc.h>

#include <vector>

#include "tokenizer/ConfigContext.h"
#include "tokenizer/Pattern.h"
#include "tokenizer/Unicode.h"

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

class Replace : public Normalizer {
 public:
  Replace(Pattern pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = pattern_.replaceAll(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& text) const override {
    for (const auto& p : parts_) p->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> makeNormalizer(const nlohmann::json& j, const ConfigContext& ctx) {
  const std::string type = ctx.type(j, "normalizer");
  const std::string what = "normalizer " + type;
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip")
    return std::make_unique<Strip>(ctx.boolean(j, "strip_left", what, true), ctx.boolean(j, "strip_right", what, true));
  if (type == "Prepend") return std::make_unique<Prepend>(ctx.string(j, "prepend", what));
  if (type == "Replace")
    return std::make_unique<Replace>(Pattern::fromJson(ctx.field(j, "pattern", what), ctx, what),
                                     ctx.string(j, "content", what));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const auto& sub : ctx.array(j, "normalizers", what)) parts.push_back(makeNormalizer(sub, ctx));
    return std::make_unique<Sequence>(std::move(parts));
  }
  ctx.fail("unsupported normalizer type '" + type +
           "' (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Prepend, Replace, Sequence)");
}

}  // namespace pareto::tok
