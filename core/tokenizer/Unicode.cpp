#include "tokenizer/Unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "util/Error.h"

namespace pareto::tok {

size_t utf8Length(unsigned char b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return 4;
  return 1;
}

char32_t nextCodePoint(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const size_t n = utf8Length(b0);
  if (n == 1 || i + n > s.size()) {
    ++i;
    return b0;
  }
  char32_t cp = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

void appendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8(char32_t cp) {
  std::string s;
  appendUtf8(s, cp);
  return s;
}

size_t countCodePoints(std::string_view s) {
  size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

namespace {

// Length of the well-formed sequence at s[i], or 0 with `bad` set to the length of the maximal ill-formed
// prefix (Unicode Table 3-7, as Rust's Utf8Chunks applies it).
size_t wellFormedAt(std::string_view s, size_t i, size_t& bad) {
  auto at = [&](size_t k) -> int { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : -1; };
  auto cont = [](int b) { return b >= 0x80 && b <= 0xBF; };
  const int b0 = at(0);
  if (b0 < 0x80) return 1;
  bad = 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(at(1)) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    const int b1 = at(1);
    const bool ok1 = (b0 == 0xE0)   ? (b1 >= 0xA0 && b1 <= 0xBF)
                     : (b0 == 0xED) ? (b1 >= 0x80 && b1 <= 0x9F)
                                    : cont(b1);
    if (!ok1) return 0;
    bad = 2;
    return cont(at(2)) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    const int b1 = at(1);
    const bool ok1 = (b0 == 0xF0)   ? (b1 >= 0x90 && b1 <= 0xBF)
                     : (b0 == 0xF4) ? (b1 >= 0x80 && b1 <= 0x8F)
                                    : cont(b1);
    if (!ok1) return 0;
    bad = 2;
    if (!cont(at(2))) return 0;
    bad = 3;
    return cont(at(3)) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::optional<size_t> firstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t bad = 0;
    const size_t n = wellFormedAt(s, i, bad);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::string utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t bad = 0;
    const size_t n = wellFormedAt(bytes, i, bad);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += bad;
    }
  }
  return out;
}

bool isWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool isNumeric(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

bool isPunctuation(char32_t c) {
  if (c < 0x80) return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
                       (c >= 0x7B && c <= 0x7E);
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

bool isWordChar(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  switch (cat) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      break;
  }
  // Joiners, and the symbols that are Alphabetic through Other_Alphabetic (circled and squared letters).
  return c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
         (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
}

void appendLowercase(std::string& out, char32_t c) {
  if (c == 0x130) {
    out.append("i\xCC\x87");
    return;
  }
  appendUtf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

std::string normalizeUnicode(std::string_view s, NormalForm form) {
  if (s.empty()) return {};
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* dest = nullptr;
  // An explicit length (no UTF8PROC_NULLTERM) so that NUL characters in the text survive.
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &dest,
                                          static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> guard(dest, &std::free);
  if (n < 0) throw Error(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
  return std::string(reinterpret_cast<const char*>(dest), static_cast<size_t>(n));
}

}  // namespace pareto::tok
