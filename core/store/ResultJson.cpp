#include "store/ResultJson.h"

#include <cmath>
#include <limits>

namespace pareto {
namespace {

using json = nlohmann::json;

bool isValue(const json& v) { return v.is_number() || v.is_boolean(); }
double valueOf(const json& v) { return v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0) : v.get<double>(); }
bool isValueOrNull(const json& v) { return isValue(v) || v.is_null(); }

std::string join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

Curve curveOf(const std::string& name, const json& values) {
  Curve c;
  c.name = name;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].is_null()) continue;   // a step no prompt reached: no point rather than a fake zero
    c.x.push_back(static_cast<double>(i));
    c.y.push_back(valueOf(values[i]));
  }
  return c;
}

void moduleValues(RunResults& out, const std::string& module, const std::string& prefix, const json& object) {
  for (const auto& [key, v] : object.items()) {
    if (prefix.empty() && key == "name") continue;
    if (isValue(v))
      out.moduleStats.push_back({module, join(prefix, key), valueOf(v)});
    else if (v.is_object())
      moduleValues(out, module, join(prefix, key), v);
  }
}

void flatten(RunResults& out, const std::string& name, const json& v) {
  if (isValue(v)) {
    out.metrics.push_back({name, valueOf(v)});
  } else if (v.is_object()) {
    for (const auto& [key, child] : v.items()) flatten(out, join(name, key), child);
  } else if (v.is_array() && !v.empty()) {
    bool values = true, rows = true, named = true;
    for (const auto& e : v) {
      values = values && isValueOrNull(e);
      rows = rows && e.is_array();
      named = named && e.is_object() && e.contains("name") && e["name"].is_string();
      if (rows)
        for (const auto& x : e) rows = rows && isValueOrNull(x);
    }
    if (values) {
      out.curves.push_back(curveOf(name, v));
    } else if (rows) {
      for (size_t i = 0; i < v.size(); ++i) out.curves.push_back(curveOf(name + "[" + std::to_string(i) + "]", v[i]));
    } else if (named) {
      for (const auto& e : v) moduleValues(out, e["name"].get<std::string>(), "", e);
    }
  }
}

}  // namespace

void addResultsFromJson(RunResults& results, const nlohmann::json& result) {
  if (!result.is_object()) return;
  for (const auto& [key, v] : result.items()) {
    if (key == "settings") {
      if (v.is_object()) {
        json merged = results.recipe && results.recipe->is_object() ? *results.recipe : json::object();
        merged.update(v);
        results.recipe = merged;
      }
      continue;
    }
    flatten(results, key, v);
  }
}

}  // namespace pareto
