#include "util/Json.h"

#include <nlohmann/json.hpp>

#include "util/Error.h"

namespace pareto {

namespace {

using nlohmann::json;

// A SAX pass that builds nothing: it refuses nesting past kMaxJsonDepth as the container opens and reports
// syntax errors, so the DOM parse that follows sees only documents that are valid and shallow. nlohmann's
// callback parser could check depth while building, but it searches the parent container for discarded values
// at the end of every object and array, which is quadratic in the number of elements (a 7 MB header of 100k
// tensors took minutes).
class DepthScan {
 public:
  DepthScan(const std::string& source, const JsonKeyVisitor& onTopLevelKey)
      : source_(source), onTopLevelKey_(onTopLevelKey) {}

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return open(); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    if (depth_ == 1 && onTopLevelKey_) onTopLevelKey_(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = e.what();
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  // depth_ counts the containers open around the next value: the top level opens at 0 and containers at
  // depths 0 .. kMaxJsonDepth - 1 are accepted, exactly as the callback parser's depth counted them.
  bool open() {
    if (depth_ >= kMaxJsonDepth) throwJsonTooDeep(source_);
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }

  const std::string& source_;
  const JsonKeyVisitor& onTopLevelKey_;
  int depth_ = 0;
  std::string error_;
};

}  // namespace

std::string readTextFile(const std::string& path, uint64_t maxBytes, const std::string& kind) {
  return readInputFile(path, maxBytes, kind);
}

void throwJsonTooDeep(const std::string& source) {
  throw InputError(fileMessage(source, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                                           " levels (no real file nests that deep; refusing a hostile one)"));
}

json parseJson(std::string_view text, const std::string& source, const JsonKeyVisitor& onTopLevelKey,
               const std::string& invalidWhat) {
  DepthScan scan(source, onTopLevelKey);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &scan);
  } catch (const json::exception& e) {
    throw InputError(fileMessage(source, invalidWhat + ": " + e.what()));
  }
  if (!ok) throw InputError(fileMessage(source, invalidWhat + ": " + scan.error()));
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw InputError(fileMessage(source, invalidWhat + ": " + e.what()));
  }
}

json readJsonFile(const std::string& path, uint64_t maxBytes, const std::string& kind) {
  return parseJson(readInputFile(path, maxBytes, kind), path);
}

}  // namespace pareto
