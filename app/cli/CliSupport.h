// Shared pieces of pareto-cli commands: printing results as text or one JSON object, a progress bar on
// stderr when it is a terminal.
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "util/Progress.h"

namespace pareto::cli {

// "1,2,4" → {1, 2, 4}; InputError naming `option` for an item that is not an integer.
std::vector<int64_t> parseIntList(const std::string& text, const std::string& option);
// "a,b,,c" → {"a", "b", "c"}.
std::vector<std::string> splitList(const std::string& text);

// Writes `result` (indented) to `path` when path is not empty, through a temporary file renamed into place;
// Error naming the file when it cannot be written (a full disk leaves no short file).
void writeResultFile(const std::string& path, const nlohmann::json& result);

// `text` with control characters (escape sequences, carriage returns, C1 controls) written as \xNN: values from
// a stranger's config.json or tokenizer.json must not recolour, move or clear the user's terminal. Newlines and
// tabs stay.
std::string terminalSafe(const std::string& text);

// Writes `line` and a newline to stderr in one write(2): the ranks of a distributed job share the launcher's
// stderr, and a message written piecewise (as std::cerr << a << b does) interleaves with theirs. A pipe keeps
// writes of up to PIPE_BUF (4096) bytes whole.
void printErrorLine(const std::string& line);

// Prints `result` as one JSON object on stdout when json is set, else `text` (followed by a newline), and
// checks that it was written (checkStdout).
void printResult(bool json, const nlohmann::json& result, const std::string& text);
// Flushes stdout; throws Error when anything written to it was lost (a full disk, a closed pipe).
void checkStdout();

// Progress on stderr: "stage [#####     ] 42% message" redrawn in place when stderr is a terminal; otherwise
// plain lines ("pareto-cli: [  12.3s] stage 42% message"), at most one every 2 s; nothing after setQuiet(true).
ProgressCallback terminalProgress();
void setQuiet(bool quiet);

// Cancelled by the first Ctrl-C (SIGINT), SIGTERM or SIGHUP once installed; long jobs check it between
// layers/batches and stop cleanly. A second signal ends the process at once.
const CancelToken& interruptToken();
// 128 + the signal that cancelled the job (130 for Ctrl-C, 143 SIGTERM, 129 SIGHUP), and its name.
int cancelledExitCode();
const char* cancelSignalName();

}  // namespace pareto::cli
