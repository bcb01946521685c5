#include "tokenizer/Decoders.h"

#include "tokenizer/ByteLevel.h"
#include "tokenizer/ConfigContext.h"
#include "tokenizer/Pattern.h"
#include "tokenizer/Unicode.h"
#include "util/Error.h"

namespace pareto::tok {

namespace {

class ByteLevelDecoder : public Decoder {
 public:
  void decodeChain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      // A token with a character outside the byte table (an added token such as "<|im_start|>" is fine, but
      // one written in another script is not) contributes its UTF-8 text unchanged.
      const size_t mark = bytes.size();
      bool mapped = true;
      for (size_t i = 0; i < t.size();) {
        const auto b = charToByte(nextCodePoint(t, i));
        if (!b) {
          mapped = false;
          break;
        }
        bytes.push_back(static_cast<char>(*b));
      }
      if (!mapped) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8Lossy(bytes));
  }
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool prependsSpace) : replacement_(replacement), prepends_(prependsSpace) {}
  void decodeChain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      const std::string& t = tokens[k];
      std::string out;
      out.reserve(t.size());
      for (size_t i = 0; i < t.size();) {
        const char32_t c = nextCodePoint(t, i);
        if (c == replacement_) {
          // Every replacement character of the first token is dropped, not only a leading one.
          if (!(k == 0 && prepends_)) out.push_back(' ');
        } else {
          appendUtf8(out, c);
        }
      }
      tokens[k] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool prepends_;
};

class ByteFallbackDecoder : public Decoder {
 public:
  void decodeChain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (!firstInvalidUtf8(pending)) {
        out.push_back(pending);
      } else {
        // One U+FFFD per byte, unlike from_utf8_lossy.
        for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') byte = parseHexByte(t[3], t[4]);
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int parseHexByte(char hi, char lo) {
    const int h = hexDigit(hi);
    const int l = hexDigit(lo);
    // u8::from_str_radix also takes "+F" as 15.
    if (hi == '+' && l >= 0) return l;
    return (h < 0 || l < 0) ? -1 : h * 16 + l;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decodeChain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decodeChain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<char32_t> chars;
      for (size_t i = 0; i < t.size();) chars.push_back(nextCodePoint(t, i));
      size_t startCut = 0;
      for (size_t i = 0; i < start_ && i < chars.size() && chars[i] == content_; ++i) startCut = i + 1;
      size_t stopCut = chars.size();
      for (size_t i = 0; i < stop_ && i < chars.size(); ++i) {
        const size_t index = chars.size() - i - 1;
        if (chars[index] != content_) break;
        stopCut = index;
      }
      std::string out;
      for (size_t i = startCut; i < stopCut; ++i) appendUtf8(out, chars[i]);
      t = std::move(out);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

[[noreturn]] void refuseGrowth(const std::string& file, const std::string& what, size_t from, size_t to) {
  throw InputError(fileMessage(file, what + " grows " + std::to_string(from) + " bytes of decoded text to " +
                                         std::to_string(to) +
                                         " or more (at most 4x + 4 KiB): refusing a decoder that amplifies text"));
}

size_t totalBytes(const std::vector<std::string>& tokens) {
  size_t n = 0;
  for (const std::string& t : tokens) n += t.size();
  return n;
}

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern pattern, std::string content, std::string file, std::string what)
      : pattern_(std::move(pattern)), content_(std::move(content)), file_(std::move(file)), what_(std::move(what)) {}
  void decodeChain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      const size_t limit = grownLimit(t.size());
      std::string out = pattern_.replaceAll(t, content_, limit);
      if (out.size() > limit) refuseGrowth(file_, what_, t.size(), out.size());
      t = std::move(out);
    }
  }

 private:
  Pattern pattern_;
  std::string content_;
  std::string file_, what_;
};

// The classic BPE decoder: the end-of-word suffix becomes a space (nothing after the last token).
class BpeDecoder : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decodeChain(std::vector<std::string>& tokens) const override {
    const Pattern p = Pattern::literal(suffix_);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = p.replaceAll(tokens[i], i + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class SequenceDecoder : public Decoder {
 public:
  SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts, std::string file, std::string what)
      : parts_(std::move(parts)), file_(std::move(file)), what_(std::move(what)) {}
  // Bounded against the chain's input as a whole: each Replace step alone may grow 4x.
  void decodeChain(std::vector<std::string>& tokens) const override {
    const size_t input = totalBytes(tokens);
    for (const auto& p : parts_) {
      p->decodeChain(tokens);
      if (const size_t now = totalBytes(tokens); now > grownLimit(input)) refuseGrowth(file_, what_, input, now);
    }
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
  std::string file_, what_;
};

}  // namespace

std::unique_ptr<Decoder> makeDecoder(const nlohmann::json& j, const ConfigContext& ctx) {
  const std::string type = ctx.type(j, "decoder");
  const std::string what = "decoder " + type;
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    const auto scheme = ctx.optString(j, "prepend_scheme", what);
    bool prepends = true;
    if (scheme) {
      if (*scheme != "always" && *scheme != "first" && *scheme != "never")
        ctx.fail(what + ": unknown prepend_scheme '" + *scheme + "' (expected always, first or never)");
      prepends = *scheme != "never";
    } else {
      prepends = ctx.boolean(j, "add_prefix_space", what, true);
    }
    return std::make_unique<MetaspaceDecoder>(ctx.character(j, "replacement", what, U'\u2581'), prepends);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const int64_t start = ctx.integer(j, "start", what, 0);
    const int64_t stop = ctx.integer(j, "stop", what, 0);
    if (start < 0 || stop < 0) ctx.fail(what + ": 'start' and 'stop' must not be negative");
    return std::make_unique<StripDecoder>(ctx.character(j, "content", what, std::nullopt),
                                          static_cast<size_t>(start), static_cast<size_t>(stop));
  }
  if (type == "Replace")
  {
    std::string content = ctx.string(j, "content", what);
    if (content.size() > kMaxInsertedBytes)
      ctx.fail(what + ": 'content' is " + std::to_string(content.size()) + " bytes, more than the " +
               std::to_string(kMaxInsertedBytes) + " a decoder may insert");
    return std::make_unique<ReplaceDecoder>(Pattern::fromJson(ctx.field(j, "pattern", what), ctx, what),
                                            std::move(content), ctx.file(), what);
  }
  if (type == "BPEDecoder") return std::make_unique<BpeDecoder>(ctx.optString(j, "suffix", what).value_or("</w>"));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const auto& sub : ctx.array(j, "decoders", what)) parts.push_back(makeDecoder(sub, ctx));
    return std::make_unique<SequenceDecoder>(std::move(parts), ctx.file(), what);
  }
  ctx.fail("unsupported decoder type '" + type +
           "' (supported: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, BPEDecoder, Sequence)");
}

}  // namespace pareto::tok
