#include "util/Json.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/Error.h"

namespace pareto {

std::string readTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fileMessage(path, "cannot open for reading"));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InputError(fileMessage(path, "read error"));
  return ss.str();
}

void throwJsonTooDeep(const std::string& source) {
  throw InputError(fileMessage(source, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                                           " levels (no real file nests that deep; refusing a hostile one)"));
}

nlohmann::json parseJson(std::string_view text, const std::string& source) {
  using nlohmann::json;
  // The parser callback sees every container as it opens, at its depth (0 for the top level): refusing there
  // stops the parse before the deep value is ever built.
  json::parser_callback_t limitDepth = [&source](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throwJsonTooDeep(source);
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limitDepth);
  } catch (const json::exception& e) {
    throw InputError(fileMessage(source, std::string("invalid JSON: ") + e.what()));
  }
}

nlohmann::json readJsonFile(const std::string& path) { return parseJson(readTextFile(path), path); }

}  // namespace pareto
