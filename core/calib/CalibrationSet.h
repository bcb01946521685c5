// What a calibration source produces: token sequences and, per position, the weight with which that position's
// activations enter the Hessian (text: all 1; decode: prompt 0, continuation 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/Tokenizer.h"

namespace pareto {

struct CalibrationSequence {
  std::vector<TokenId> ids;
  std::vector<float> weights;   // same length as ids
};

struct CalibrationSet {
  std::string source;           // "text" or "decode"
  std::vector<CalibrationSequence> sequences;
  int64_t countedTokens() const;   // positions with weight > 0
  int64_t totalTokens() const;
};

// Lines of a prompts file (one prompt per line, blank lines ignored). Throws InputError naming the file when it
// cannot be read or holds no prompt.
std::vector<std::string> readPrompts(const std::string& path);

// A deterministic permutation of 0..n-1 from a seed (splitmix64 Fisher-Yates; the same on every platform).
std::vector<size_t> seededPermutation(size_t n, uint64_t seed);

}  // namespace pareto
