// GPT-2's byte <-> character table: every byte gets a printable character so that a byte-level BPE
// vocabulary can be stored as text (a space is "Ġ", a newline "Ċ").
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pareto::tok {

// The UTF-8 text of the character that stands for `byte`.
const std::string& byteToChar(unsigned char byte);
// The byte a character stands for, or nullopt for a character outside the table.
std::optional<unsigned char> charToByte(char32_t c);

// Every byte of s replaced by its character.
std::string bytesToChars(std::string_view s);

}  // namespace pareto::tok
