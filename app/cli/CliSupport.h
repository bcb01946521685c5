// Shared pieces of pareto-cli commands: printing results as text or one JSON object, a progress bar on
// stderr when it is a terminal.
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "util/Progress.h"

namespace pareto::cli {

// Prints `result` as one JSON object on stdout when json is set, else `text` (followed by a newline).
// "1,2,4" → {1, 2, 4}; InputError naming `option` for an item that is not an integer.
std::vector<int64_t> parseIntList(const std::string& text, const std::string& option);
// "a,b,,c" → {"a", "b", "c"}.
std::vector<std::string> splitList(const std::string& text);

// Writes `result` (indented) to `path` when path is not empty; InputError naming the file when it cannot be written.
void writeResultFile(const std::string& path, const nlohmann::json& result);

void printResult(bool json, const nlohmann::json& result, const std::string& text);

// A progress callback that draws "stage [#####     ] 42% message" on stderr when stderr is a terminal and
// does nothing otherwise (so logs and pipes stay clean).
ProgressCallback terminalProgress();

// Cancelled by the first Ctrl-C (SIGINT) once installed; long jobs check it between layers/batches and stop
// cleanly (exit 130). A second Ctrl-C ends the process at once.
const CancelToken& interruptToken();

}  // namespace pareto::cli
