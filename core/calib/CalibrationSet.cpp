#include "calib/CalibrationSet.h"

#include <numeric>
#include <sstream>

#include "tokenizer/Unicode.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {

int64_t CalibrationSet::countedTokens() const {
  int64_t n = 0;
  for (const auto& s : sequences)
    for (float w : s.weights) n += w > 0;
  return n;
}

int64_t CalibrationSet::totalTokens() const {
  int64_t n = 0;
  for (const auto& s : sequences) n += static_cast<int64_t>(s.ids.size());
  return n;
}

std::vector<std::string> readPrompts(const std::string& path) {
  std::istringstream in(readTextFile(path, kMaxTextFileBytes, "a prompts file"));
  std::vector<std::string> prompts;
  size_t lineNumber = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineNumber;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // Caught here so the message names the file and line; the encoder would only say "not valid UTF-8".
    if (const auto bad = tok::firstInvalidUtf8(line))
      throw InputError(fileMessage(path, "line " + std::to_string(lineNumber) + " is not valid UTF-8 (byte " +
                                             std::to_string(*bad) + " of the line)"));
    if (line.find_first_not_of(" \t") != std::string::npos) prompts.push_back(line);
  }
  if (prompts.empty()) throw InputError(fileMessage(path, "no prompts (expected one prompt per line)"));
  return prompts;
}

std::vector<size_t> seededPermutation(size_t n, uint64_t seed) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  uint64_t state = seed;
  auto next = [&state] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[next() % i]);
  return order;
}

}  // namespace pareto
