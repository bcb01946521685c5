#include "search/SearchBase.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "util/Error.h"
#include "util/Json.h"

namespace pareto {
namespace {

using nlohmann::json;

const char* calibrationFileKey(const CalibrationSpec& c) {
  return c.source == "text" ? "text" : c.fromContinuations ? "continuations" : "prompts";
}

RefineOptions readRefine(const json& r, const std::vector<SearchCandidate>& candidates, const std::string& sourceName) {
  auto fail = [&](const std::string& what) { throw InputError(fileMessage(sourceName, what)); };
  RefineOptions o;
  if (r.is_boolean()) {
    o.enabled = r.get<bool>();
    return o;
  }
  if (!r.is_object()) fail("refine: must be false, true or {\"windows\", \"modules\", \"reference\"}");
  for (const auto& [key, value] : r.items()) {
    if (key == "windows" || key == "modules") {
      if (!value.is_number_integer() || value.get<int64_t>() < (key == "windows" ? 1 : 0))
        fail("refine." + key + ": must be an integer of at least " + (key == "windows" ? "1" : "0 (0: every module)"));
      (key == "windows" ? o.windows : o.modules) = value.get<int64_t>();
    } else if (key == "reference") {
      if (!value.is_string()) fail("refine.reference: must be a candidate's name");
      o.reference = value.get<std::string>();
      const auto it = std::find_if(candidates.begin(), candidates.end(),
                                   [&](const SearchCandidate& c) { return c.name == o.reference; });
      if (it == candidates.end()) fail("refine.reference: \"" + o.reference + "\" names no candidate");
      if (it->dense()) fail("refine.reference: \"" + o.reference + "\" is dense; name a candidate that changes weights");
    } else {
      fail("refine." + key + ": unknown key (allowed here: modules, reference, windows)");
    }
  }
  return o;
}

}  // namespace

json defaultCandidateBlocks() {
  const json gptq = {{"method", "gptq"}, {"granularity", "group"}, {"symmetric", true}, {"damp", 0.01}};
  auto gptqBits = [&](int bits, int group) {
    json q = gptq;
    q["bits"] = bits;
    q["group_size"] = group;
    return q;
  };
  const json sparse24 = {{"method", "sparsegpt"}, {"pattern", "2:4"}};
  return json::array({
      {{"name", "dense"}},
      {{"name", "rtn-int8-channel"},
       {"quantize", {{"method", "rtn"}, {"bits", 8}, {"granularity", "channel"}, {"symmetric", true}}}},
      {{"name", "gptq-int4-g64"}, {"quantize", gptqBits(4, 64)}},
      {{"name", "gptq-int4-g128"}, {"quantize", gptqBits(4, 128)}},
      {{"name", "gptq-int3-g128"}, {"quantize", gptqBits(3, 128)}},
      {{"name", "spqr-3bit"},
       {"quantize", {{"method", "spqr"}, {"bits", 3}, {"group_size", 16}, {"scale_bits", 3}, {"outlier_ratio", 0.002}}}},
      {{"name", "sparsegpt-2:4"}, {"prune", sparse24}},
      // Groups of 64 kept values span 128 columns: the layout of the shipped sparsegpt-2of4-gptq4 recipe.
      {{"name", "sparsegpt-2:4+gptq-int4"}, {"prune", sparse24}, {"quantize", gptqBits(4, 64)}},
      {{"name", "rtn-gguf-q8_0"}, {"quantize", {{"method", "rtn"}, {"format", "gguf-q8_0"}}}},
      {{"name", "gptq-gguf-q4_k"}, {"quantize", {{"method", "gptq"}, {"format", "gguf-q4_k"}, {"damp", 0.01}}}},
      {{"name", "rtn-gguf-q4_0"}, {"quantize", {{"method", "rtn"}, {"format", "gguf-q4_0"}}}},
  });
}

SearchBase searchBaseFromJson(const json& j, const std::string& baseDir, const std::string& sourceName) {
  auto fail = [&](const std::string& what) { throw InputError(fileMessage(sourceName, what)); };
  if (!j.is_object()) fail("must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (key == "prune" || key == "quantize" || key == "overrides")
      fail(key + ": the search chooses pruning and quantization per module; list the choices under "
                 "\"candidates\" (each {\"name\", \"prune\", \"quantize\"})");
    if (key != "calibration" && key != "skip" && key != "candidates" && key != "name" && key != "description" &&
        key != "refine")
      fail(key + ": unknown key (allowed here: calibration, candidates, description, name, refine, skip)");
  }
  if (!j.contains("calibration") || j.at("calibration").is_null())
    fail("a \"calibration\" block is needed: every candidate's estimated loss is measured against the Hessians "
         "of the calibration set");
  SearchBase base;
  base.defaultCandidates = !j.contains("candidates");
  const json list = base.defaultCandidates ? defaultCandidateBlocks() : j.at("candidates");
  if (!list.is_array()) fail("candidates: must be a list of {\"name\", \"prune\", \"quantize\"}");
  // Parsed once through the recipe reader, so that calibration and skip are checked as compress checks them.
  json shell = {{"calibration", j.at("calibration")}, {"quantize", {{"method", "rtn"}}}};
  if (j.contains("skip")) shell["skip"] = j.at("skip");
  const Recipe reference = Recipe::fromJson(shell, baseDir, sourceName);
  base.calibration = *reference.calibration;
  base.skip = reference.skip;
  base.calibrationBlock = j.at("calibration");
  base.calibrationBlock[calibrationFileKey(base.calibration)] = std::filesystem::absolute(base.calibration.file).string();

  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "candidates[" + std::to_string(i) + "]";
    const json& c = list[i];
    if (!c.is_object()) fail(path + ": must be an object {\"name\", \"prune\", \"quantize\"}");
    for (const auto& [key, value] : c.items()) {
      (void)value;
      if (key != "name" && key != "prune" && key != "quantize")
        fail(path + "." + key + ": unknown key (allowed here: name, prune, quantize)");
    }
    SearchCandidate cand;
    cand.prune = c.contains("prune") ? c.at("prune") : json();
    cand.quantize = c.contains("quantize") ? c.at("quantize") : json();
    if (c.contains("name")) {
      if (!c.at("name").is_string() || c.at("name").get<std::string>().empty())
        fail(path + ".name: must be a non-empty string");
      cand.name = c.at("name").get<std::string>();
    } else {
      cand.name = cand.prune.is_null() && cand.quantize.is_null()
                      ? "dense"
                      : json::object({{"prune", cand.prune}, {"quantize", cand.quantize}}).dump();
    }
    if (!names.insert(cand.name).second) fail(path + ".name: \"" + cand.name + "\" names two candidates");
    if (!cand.prune.is_null() || !cand.quantize.is_null()) {
      json r = {{"calibration", j.at("calibration")}, {"skip", base.skip}};
      if (!cand.prune.is_null()) r["prune"] = cand.prune;
      if (!cand.quantize.is_null()) r["quantize"] = cand.quantize;
      cand.recipe = Recipe::fromJson(r, baseDir, sourceName + ": " + path);
    }
    base.candidates.push_back(std::move(cand));
  }
  if (base.candidates.size() < 2) fail("candidates: give at least two, so that there is something to choose");
  if (j.contains("refine")) base.refine = readRefine(j.at("refine"), base.candidates, sourceName);
  return base;
}

SearchBase readSearchBase(const std::string& path) {
  SearchBase base = searchBaseFromJson(readJsonFile(path, kMaxJsonConfigBytes, "a search base recipe"),
                                       std::filesystem::path(path).parent_path().string(), path);
  base.path = path;
  return base;
}

}  // namespace pareto
