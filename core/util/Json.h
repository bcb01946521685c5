// JSON file loading with errors that name the file and the position of a syntax error, a nesting limit and a
// size cap for files that come from strangers (config.json, tokenizer.json, recipes, safetensors headers).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "util/InputFile.h"

namespace pareto {

// Deepest nesting of arrays and objects accepted. Real files nest 3-8 levels; a file of a million '[' parses
// fine (nlohmann's parser is iterative) but every recursive walk over the value afterwards (copy, dump,
// comparison, our own component readers) would overflow the stack.
constexpr int kMaxJsonDepth = 64;

// Called with each key of the top-level object, in file order (the safetensors header refuses duplicates, which
// nlohmann would silently collapse).
using JsonKeyVisitor = std::function<void(const std::string& key)>;

// Parses `text` in time linear in its length; throws InputError "<source>: <invalidWhat>: ..." when it is
// malformed and "<source>: JSON nested deeper than 64 levels ..." when it nests deeper than kMaxJsonDepth.
nlohmann::json parseJson(std::string_view text, const std::string& source, const JsonKeyVisitor& onTopLevelKey = {},
                         const std::string& invalidWhat = "invalid JSON");

// Reads (readInputFile: a regular file of at most maxBytes) and parses a JSON file as parseJson does.
nlohmann::json readJsonFile(const std::string& path, uint64_t maxBytes = kMaxJsonConfigBytes,
                            const std::string& kind = "a JSON file");

// The error for a document nested deeper than kMaxJsonDepth.
[[noreturn]] void throwJsonTooDeep(const std::string& source);

// Reads a whole text file through readInputFile; throws InputError naming the file.
std::string readTextFile(const std::string& path, uint64_t maxBytes = kMaxTextFileBytes,
                         const std::string& kind = "a text file");

}  // namespace pareto
