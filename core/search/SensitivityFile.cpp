#include "search/SensitivityFile.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/Json.h"

namespace pareto {
namespace {

using nlohmann::json;

constexpr int kVersion = 1;

// JSON has no NaN: null stands for it.
json number(double v) { return std::isnan(v) ? json() : json(v); }
double number(const json& j) { return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>(); }

}  // namespace

json sensitivityKey(const SearchBase& base, const std::string& modelDir, const std::string& dtype) {
  json candidates = json::array();
  for (const SearchCandidate& c : base.candidates)
    candidates.push_back({{"name", c.name}, {"prune", c.prune}, {"quantize", c.quantize}});
  const RefineOptions& r = base.refine;
  return {{"model", std::filesystem::absolute(modelDir).lexically_normal().string()},
          {"calibration", base.calibrationBlock},
          {"skip", base.skip},
          {"candidates", candidates},
          {"refine", r.enabled ? json{{"windows", r.windows}, {"modules", r.modules}, {"reference", r.reference}}
                               : json(false)},
          {"dtype", dtype}};
}

void writeSensitivityTable(const std::string& path, const SensitivityTable& t, const json& key) {
  json modules = json::array();
  for (const SensitivityModule& m : t.modules) {
    json cells = json::array();
    for (const SensitivityCell& c : m.cells)
      cells.push_back({{"applies", c.applies}, {"problem", c.problem}, {"format", c.format}, {"kernel", c.kernel},
                       {"note", c.note}, {"bytes", c.bytes}, {"loss", number(c.loss)},
                       {"output_error", number(c.outputError)}});
    modules.push_back({{"name", m.name}, {"rows", m.rows}, {"cols", m.cols}, {"scale", m.scale},
                       {"reference_kl", number(m.referenceKl)}, {"cells", cells}});
  }
  const SensitivityRefinement& r = t.refinement;
  const json doc = {{"pareto_sensitivity_table", kVersion},
                    {"key", key},
                    {"candidates", t.candidates},
                    {"linear_weights", t.linearWeights},
                    {"dense_linear_bytes", t.denseLinearBytes},
                    {"other_bytes_per_token", t.otherBytesPerToken},
                    {"calibration_tokens", t.calibrationTokens},
                    {"refinement", {{"done", r.done}, {"reference", r.reference}, {"windows", r.windows},
                                    {"tokens", r.tokens}, {"measured_modules", r.measuredModules}}},
                    {"modules", modules}};
  writeFileAtomically(path, doc.dump() + "\n");
}

std::optional<SensitivityTable> readSensitivityTable(const std::string& path, const json& key) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  const json doc = readJsonFile(path, uint64_t(1) << 30, "a sensitivity table");
  if (!doc.is_object() || doc.value("pareto_sensitivity_table", 0) != kVersion)
    throw InputError(fileMessage(path, "is not a sensitivity table `pareto-cli search --table` wrote (version " +
                                           std::to_string(kVersion) + "); give another path"));
  if (doc.at("key") != key) return std::nullopt;
  try {
    SensitivityTable t;
    t.candidates = doc.at("candidates").get<std::vector<std::string>>();
    t.linearWeights = doc.at("linear_weights").get<int64_t>();
    t.denseLinearBytes = doc.at("dense_linear_bytes").get<uint64_t>();
    t.otherBytesPerToken = doc.at("other_bytes_per_token").get<uint64_t>();
    t.calibrationTokens = doc.at("calibration_tokens").get<int64_t>();
    const json& r = doc.at("refinement");
    t.refinement = {r.at("done").get<bool>(), r.at("reference").get<std::string>(), r.at("windows").get<int64_t>(),
                    r.at("tokens").get<int64_t>(), r.at("measured_modules").get<size_t>()};
    for (const json& mj : doc.at("modules")) {
      SensitivityModule m;
      m.name = mj.at("name").get<std::string>();
      m.rows = mj.at("rows").get<int64_t>();
      m.cols = mj.at("cols").get<int64_t>();
      m.scale = mj.at("scale").get<double>();
      m.referenceKl = number(mj.at("reference_kl"));
      for (const json& cj : mj.at("cells")) {
        SensitivityCell c;
        c.applies = cj.at("applies").get<bool>();
        c.problem = cj.at("problem").get<std::string>();
        c.format = cj.at("format").get<std::string>();
        c.kernel = cj.at("kernel").get<std::string>();
        c.note = cj.at("note").get<std::string>();
        c.bytes = cj.at("bytes").get<uint64_t>();
        c.loss = number(cj.at("loss"));
        c.outputError = number(cj.at("output_error"));
        m.cells.push_back(std::move(c));
      }
      if (m.cells.size() != t.candidates.size())
        throw InputError(m.name + ": " + std::to_string(m.cells.size()) + " cells for " +
                         std::to_string(t.candidates.size()) + " candidates");
      t.modules.push_back(std::move(m));
    }
    t.measured = true;
    return t;
  } catch (const json::exception& e) {
    throw InputError(fileMessage(path, std::string("malformed sensitivity table: ") + e.what()));
  } catch (const InputError& e) {
    throw InputError(fileMessage(path, e.what()));
  }
}

}  // namespace pareto
