// Regular expressions of tokenizer.json files. Those are written for Oniguruma (the engine the Rust library
// uses); we run them on PCRE2 in UTF + UCP mode after rewriting the few constructs whose meaning differs
// (\s, \w, \h, (?m), \uHHHH, line anchors), and with match and depth limits so that no pattern can backtrack
// for ever on hostile input.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pareto::tok {

using Span = std::pair<size_t, size_t>;  // [begin, end) byte offsets

class Regex {
 public:
  // `context` names the file and component for error messages. Throws InputError when the pattern does
  // not compile.
  Regex(const std::string& onigPattern, const std::string& context);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All matches, scanning left to right like onig's find_iter: an empty match right where the previous
  // match ended is skipped by advancing one character. Throws InputError when a limit is hit.
  void findAll(std::string_view text, std::vector<Span>& out) const;

  const std::string& pattern() const { return pattern_; }

  // The PCRE2 pattern used for an Oniguruma one (exposed for tests).
  static std::string translateOniguruma(const std::string& pattern);

 private:
  struct Code;
  std::string pattern_;
  std::string context_;
  std::unique_ptr<Code> code_;
};

// Non-overlapping occurrences of a literal, with the same empty-pattern behaviour as a regex that matches
// the empty string (the Rust library turns literal patterns into escaped regexes).
void findLiteral(std::string_view text, std::string_view literal, std::vector<Span>& out);

}  // namespace pareto::tok
