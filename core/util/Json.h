// JSON file loading with errors that name the file and the position of a syntax error, and a nesting limit for
// files that come from strangers (config.json, tokenizer.json, recipes, safetensors headers).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace pareto {

// Deepest nesting of arrays and objects accepted. Real files nest 3-8 levels; a file of a million '[' parses
// fine (nlohmann's parser is iterative) but every recursive walk over the value afterwards (copy, dump,
// comparison, our own component readers) would overflow the stack.
constexpr int kMaxJsonDepth = 64;

// Parses `text`; throws InputError "<source>: ..." when it is malformed or nested deeper than kMaxJsonDepth.
nlohmann::json parseJson(std::string_view text, const std::string& source);

// Reads and parses a JSON file as parseJson does; throws InputError "<path>: ..." when it is missing.
nlohmann::json readJsonFile(const std::string& path);

// The error for a document nested deeper than kMaxJsonDepth, for parsers with their own callback.
[[noreturn]] void throwJsonTooDeep(const std::string& source);

// Reads a whole file into a string; throws InputError naming the file.
std::string readTextFile(const std::string& path);

}  // namespace pareto
