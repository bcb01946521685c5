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

nlohmann::json readJsonFile(const std::string& path) {
  std::string text = readTextFile(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fileMessage(path, std::string("invalid JSON: ") + e.what()));
  }
}

}  // namespace pareto
