// libFuzzer target: a tokenizer.json and a text. The input is the JSON, optionally followed by a NUL byte and the
// text to encode (a JSON file cannot contain a raw NUL, so the split is unambiguous); without one, a few fixed
// texts are encoded. A tokenizer that loads must encode without crashing or hanging (its regexes run under the
// PCRE2 limits), give ids inside its vocabulary, and decode what it encoded.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "tokenizer/Tokenizer.h"
#include "util/Error.h"
#include "util/Json.h"

namespace {

void encodeDecode(const pareto::Tokenizer& t, std::string_view text) {
  for (bool special : {false, true}) {
    std::vector<pareto::TokenId> ids;
    try {
      ids = t.encode(text, special);
    } catch (const pareto::InputError&) {
      continue;   // invalid UTF-8 or a regex limit: refused with a message
    }
    const auto vocab = static_cast<pareto::TokenId>(t.vocabSize());
    for (pareto::TokenId id : ids)
      if (id < 0 || id >= vocab) __builtin_trap();
    try {
      (void)t.decode(ids, special);
    } catch (const pareto::InputError&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(text, 0, size);
  const size_t jsonSize = nul != nullptr ? static_cast<size_t>(static_cast<const char*>(nul) - text) : size;
  try {
    const nlohmann::json j = pareto::parseJson(std::string_view(text, jsonSize), "tokenizer.json");
    const pareto::Tokenizer t = pareto::Tokenizer::fromJson(j, "tokenizer.json");
    if (nul != nullptr) {
      encodeDecode(t, std::string_view(text + jsonSize + 1, size - jsonSize - 1));
    } else {
      for (const char* sample : {"Hello world! It's 2024, isn't it?", "  def f(x):\n\treturn x**2  # \xc3\xa9t\xc3\xa9",
                                 "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80", ""})
        encodeDecode(t, sample);
    }
  } catch (const pareto::InputError&) {
  }
  return 0;
}
