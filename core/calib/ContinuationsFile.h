// A continuations file: what a model generated from prompts, as token ids, for decode calibration of a model
// that cannot generate here (too large for this machine) or whose continuations came from a serving engine.
// JSON Lines, one object a line:
//   {"prompt": [ids], "continuation": [ids]}
// "prompt" as the model read it (BOS first when the model has one), "continuation" the new tokens as generated
// (the EOS it stopped on, if any, included: decode calibration leaves it out, no decode step consumes it).
// Other keys (such as "text") are ignored. Written by `pareto-cli generate --prompts FILE --out FILE`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/Tokenizer.h"

namespace pareto {

struct PromptContinuation {
  std::vector<TokenId> prompt;
  std::vector<TokenId> continuation;
};

// Throws InputError naming the file and line for a line that is not such an object, an id outside
// [0, vocabSize), an empty prompt, or a file without any continuation.
std::vector<PromptContinuation> readContinuationsFile(const std::string& path, int64_t vocabSize);

// One line per record, `texts[i]` (when given) kept beside it under "text" for the reader's eyes; written
// atomically (util/FileSystem.h).
void writeContinuationsFile(const std::string& path, const std::vector<PromptContinuation>& records,
                            const std::vector<std::string>& texts = {});

}  // namespace pareto
