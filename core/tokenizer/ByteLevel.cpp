#include "tokenizer/ByteLevel.h"

#include <array>

#include "tokenizer/Unicode.h"

namespace pareto::tok {

namespace {

struct Tables {
  std::array<std::string, 256> toChar;
  std::array<char32_t, 256> codePoint{};
  Tables() {
    // Printable Latin-1 bytes stand for themselves; the rest are shifted to 256, 257, ... in byte order.
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      codePoint[b] = printable ? static_cast<char32_t>(b) : next++;
      toChar[b] = utf8(codePoint[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byteToChar(unsigned char byte) { return tables().toChar[byte]; }

std::optional<unsigned char> charToByte(char32_t c) {
  if (c < 256) {
    const bool printable = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
    if (printable) return static_cast<unsigned char>(c);
    return std::nullopt;
  }
  if (c >= 256 + 68) return std::nullopt;
  // Code points 256.. stand for the non-printable bytes in increasing order.
  static const auto reverse = [] {
    std::array<unsigned char, 68> r{};
    for (int b = 0; b < 256; ++b)
      if (tables().codePoint[b] >= 256) r[tables().codePoint[b] - 256] = static_cast<unsigned char>(b);
    return r;
  }();
  return reverse[c - 256];
}

std::string bytesToChars(std::string_view s) {
  std::string out;
  out.reserve(s.size() * 2);
  const auto& t = tables();
  for (char c : s) out += t.toChar[static_cast<unsigned char>(c)];
  return out;
}

}  // namespace pareto::tok
