#include "calib/ContinuationsFile.h"

#include <nlohmann/json.hpp>

#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/Json.h"

namespace pareto {

std::vector<PromptContinuation> readContinuationsFile(const std::string& path, int64_t vocabSize) {
  const std::string text = readTextFile(path, kMaxTextFileBytes, "a continuations file");
  std::vector<PromptContinuation> records;
  size_t start = 0;
  for (int64_t line = 1; start < text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view row(text.data() + start, end - start);
    start = end + 1;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = path + ":" + std::to_string(line);
    const nlohmann::json j = parseJson(row, where);
    auto ids = [&](const char* key) {
      if (!j.is_object() || !j.contains(key) || !j.at(key).is_array())
        throw InputError(where + ": expected {\"prompt\": [ids], \"continuation\": [ids]}, \"" + key +
                         "\" is missing or not a list");
      std::vector<TokenId> out;
      for (const auto& v : j.at(key)) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocabSize)
          throw InputError(where + ": \"" + key + "\" holds " + v.dump() + ", not a token id of this model (0.." +
                           std::to_string(vocabSize - 1) + ")");
        out.push_back(static_cast<TokenId>(v.get<int64_t>()));
      }
      return out;
    };
    PromptContinuation r{ids("prompt"), ids("continuation")};
    if (r.prompt.empty()) throw InputError(where + ": the prompt is empty (a continuation needs something to continue)");
    records.push_back(std::move(r));
  }
  if (records.empty()) throw InputError(fileMessage(path, "holds no continuation"));
  return records;
}

void writeContinuationsFile(const std::string& path, const std::vector<PromptContinuation>& records,
                            const std::vector<std::string>& texts) {
  std::string out;
  for (size_t i = 0; i < records.size(); ++i) {
    nlohmann::json j = {{"prompt", records[i].prompt}, {"continuation", records[i].continuation}};
    if (i < texts.size()) j["text"] = texts[i];
    out += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  writeFileAtomically(path, out);
}

}  // namespace pareto
