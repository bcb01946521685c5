// JSON file loading with errors that name the file and the position of a syntax error.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace pareto {

// Reads and parses a JSON file; throws InputError "<path>: ..." when it is missing or malformed.
nlohmann::json readJsonFile(const std::string& path);

// Reads a whole file into a string; throws InputError naming the file.
std::string readTextFile(const std::string& path);

}  // namespace pareto
