// UTF-8 and Unicode helpers for the tokenizer. The character classes follow Rust's `char` methods and the
// regex crate, because the Hugging Face library decides with those (not with the C locale) where words,
// digits and whitespace are.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pareto::tok {

// Decodes the code point at s[i] and advances i. The input must be valid UTF-8 (checked once at the entry
// points with firstInvalidUtf8).
char32_t nextCodePoint(std::string_view s, size_t& i);
// Byte length of the UTF-8 sequence that starts with lead byte b (1 for a stray byte).
size_t utf8Length(unsigned char b);
void appendUtf8(std::string& out, char32_t cp);
std::string utf8(char32_t cp);
size_t countCodePoints(std::string_view s);

// Offset of the first byte that is not part of well-formed UTF-8, or nullopt when s is valid.
std::optional<size_t> firstInvalidUtf8(std::string_view s);
// Rust's String::from_utf8_lossy: each maximal ill-formed subsequence becomes one U+FFFD. Decoders must use
// exactly this rule or partial byte tokens would decode to a different number of replacement characters.
std::string utf8Lossy(std::string_view bytes);

// Rust char::is_whitespace (the Unicode White_Space property).
bool isWhitespace(char32_t c);
// Rust char::is_numeric (general categories Nd, Nl, No).
bool isNumeric(char32_t c);
// The tokenizers crate's is_punc: ASCII punctuation or a Unicode P* category.
bool isPunctuation(char32_t c);
// The regex crate's Unicode \w (Alphabetic, marks, decimal digits, connector punctuation, joiners).
bool isWordChar(char32_t c);
// Rust char::to_lowercase appended to out (U+0130 is the one code point that lowercases to two).
void appendLowercase(std::string& out, char32_t c);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalizeUnicode(std::string_view s, NormalForm form);

}  // namespace pareto::tok
