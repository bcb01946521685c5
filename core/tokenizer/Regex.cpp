#include "tokenizer/Regex.h"

#include <pcre2.h>

#include <cctype>

#include "tokenizer/Unicode.h"
#include "util/Error.h"

namespace pareto::tok {

namespace {

// Generous for any real pre-tokenizer regex on any piece of text, small enough to stop a catastrophic
// backtracking pattern within a fraction of a second.
constexpr uint32_t kMatchLimit = 20'000'000;
constexpr uint32_t kDepthLimit = 200'000;
// Backtracking frames of the interpreter live on the heap: bound them too (KiB), or a deep pattern could take
// gigabytes before the depth limit is reached.
constexpr uint32_t kHeapLimitKiB = 256u << 10;
constexpr size_t kJitStackMax = 8u << 20;

// Oniguruma's \w: Alphabetic, marks, decimal digits, connector punctuation, joiners (PCRE2's UCP \w lacks
// the marks).
constexpr const char* kWordItems = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}";

std::string pcre2Message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match state: a JIT stack cannot be shared between threads, and encode() may run concurrently.
struct MatchState {
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jitStack = nullptr;
  pcre2_match_data* data = nullptr;
  MatchState() {
    context = pcre2_match_context_create(nullptr);
    pcre2_set_match_limit(context, kMatchLimit);
    pcre2_set_depth_limit(context, kDepthLimit);
    pcre2_set_heap_limit(context, kHeapLimitKiB);
    jitStack = pcre2_jit_stack_create(32 * 1024, kJitStackMax, nullptr);
    if (jitStack != nullptr) pcre2_jit_stack_assign(context, nullptr, jitStack);
    data = pcre2_match_data_create(1, nullptr);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    if (jitStack != nullptr) pcre2_jit_stack_free(jitStack);
    pcre2_match_context_free(context);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

MatchState& matchState() {
  thread_local MatchState state;
  return state;
}

bool isHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

std::string Regex::translateOniguruma(const std::string& p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool inClass = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      ++i;
      switch (e) {
        case 's': out += "\\p{White_Space}"; break;
        case 'S': out += "\\P{White_Space}"; break;
        case 'w':
          out += inClass ? std::string(kWordItems) : "[" + std::string(kWordItems) + "]";
          break;
        case 'W':
          out += inClass ? std::string("\\W") : "[^" + std::string(kWordItems) + "]";
          break;
        // Oniguruma's \h is a hexadecimal digit, PCRE2's a horizontal space.
        case 'h': out += inClass ? "0-9a-fA-F" : "[0-9a-fA-F]"; break;
        case 'H': out += inClass ? "\\H" : "[^0-9a-fA-F]"; break;
        case 'u':
          if (i + 4 < p.size() && isHex(p[i + 1]) && isHex(p[i + 2]) && isHex(p[i + 3]) && isHex(p[i + 4])) {
            out += "\\x{" + p.substr(i + 1, 4) + "}";
            i += 4;
          } else {
            out += "\\u";
          }
          break;
        default:
          out += '\\';
          out += e;
      }
      continue;
    }
    if (inClass) {
      if (c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
        const size_t close = p.find(":]", i + 2);
        if (close != std::string::npos) {
          out += p.substr(i, close + 2 - i);
          i = close + 1;
          continue;
        }
      }
      if (c == ']') inClass = false;
      out += c;
      continue;
    }
    if (c == '[') {
      inClass = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a leading ']' is a literal
      continue;
    }
    if (c == '(' && i + 2 < p.size() && p[i + 1] == '?') {
      // An option group (?imx-imx) or (?imx-imx:...): Oniguruma's m is "dot matches newline", PCRE2's s.
      size_t j = i + 2;
      while (j < p.size() && (p[j] == 'i' || p[j] == 'm' || p[j] == 'x' || p[j] == '-')) ++j;
      if (j > i + 2 && j < p.size() && (p[j] == ':' || p[j] == ')')) {
        out += "(?";
        for (size_t k = i + 2; k < j; ++k) out += p[k] == 'm' ? 's' : p[k];
        i = j - 1;
        continue;
      }
    }
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& onigPattern, const std::string& context)
    : pattern_(onigPattern), context_(context), code_(std::make_unique<Code>()) {
  const std::string translated = translateOniguruma(onigPattern);
  pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
  int err = 0;
  PCRE2_SIZE errOffset = 0;
  // Oniguruma's ^ and $ are line anchors: PCRE2_MULTILINE.
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &errOffset, cctx);
  pcre2_compile_context_free(cctx);
  if (code_->code == nullptr)
    throw InputError(context_ + ": invalid regex '" + onigPattern + "': " + pcre2Message(err) + " (offset " +
                     std::to_string(errOffset) + ")");
  code_->jit = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

void Regex::findAll(std::string_view text, std::vector<Span>& out) const {
  MatchState& st = matchState();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  bool haveLast = false;
  size_t lastEnd = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT || rc == PCRE2_ERROR_HEAPLIMIT ||
        rc == PCRE2_ERROR_JIT_STACKLIMIT)
      throw InputError(context_ + ": regex '" + pattern_ + "' gave up on a piece of " +
                       std::to_string(text.size()) + " bytes (" + pcre2Message(rc) +
                       "): the pattern backtracks catastrophically on this text, so the tokenizer.json is "
                       "unusable for it");
    if (rc < 0)
      throw InputError(context_ + ": regex '" + pattern_ + "' failed on a piece of " +
                       std::to_string(text.size()) + " bytes: " + pcre2Message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t s = ov[0];
    const size_t e = ov[1];
    if (s == e && haveLast && lastEnd == e) {
      if (pos >= text.size()) break;
      pos += utf8Length(static_cast<unsigned char>(text[pos]));
      continue;
    }
    out.emplace_back(s, e);
    haveLast = true;
    lastEnd = e;
    pos = e;
  }
}

void findLiteral(std::string_view text, std::string_view literal, std::vector<Span>& out) {
  if (literal.empty()) {
    for (size_t i = 0; i <= text.size();) {
      out.emplace_back(i, i);
      if (i == text.size()) break;
      i += utf8Length(static_cast<unsigned char>(text[i]));
    }
    return;
  }
  size_t pos = 0;
  while ((pos = text.find(literal, pos)) != std::string_view::npos) {
    out.emplace_back(pos, pos + literal.size());
    pos += literal.size();
  }
}

}  // namespace pareto::tok
