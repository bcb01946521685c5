#include "compress/Recipe.h"

#include <fnmatch.h>

#include <filesystem>
#include <set>

#include "formats/GgufQuant.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {
namespace {

using nlohmann::json;

class RecipeReader {
 public:
  explicit RecipeReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw InputError(fileMessage(source_, (path.empty() ? "" : path + ": ") + what));
  }

  void onlyKeys(const json& obj, const std::string& path, const std::set<std::string>& allowed) const {
    if (!obj.is_object()) fail(path, "must be an object, got " + obj.dump());
    for (const auto& [key, value] : obj.items()) {
      (void)value;
      if (allowed.count(key) == 0) {
        std::string list;
        for (const auto& k : allowed) list += (list.empty() ? "" : ", ") + k;
        fail(join(path, key), "unknown key (allowed here: " + list + ")");
      }
    }
  }

  static std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

  std::string string(const json& obj, const std::string& path, const char* key, const std::set<std::string>& choices) const {
    const json& v = obj.at(key);
    if (!v.is_string()) fail(join(path, key), "must be a string");
    std::string s = v.get<std::string>();
    if (!choices.empty() && choices.count(s) == 0) {
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
      fail(join(path, key), "\"" + s + "\" is not one of " + list);
    }
    return s;
  }

  int64_t integer(const json& obj, const std::string& path, const char* key, int64_t lo, int64_t hi) const {
    const json& v = obj.at(key);
    if (!v.is_number_integer()) fail(join(path, key), "must be an integer, got " + v.dump());
    int64_t x = v.get<int64_t>();
    if (x < lo || x > hi)
      fail(join(path, key), std::to_string(x) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }

  double number(const json& obj, const std::string& path, const char* key, double lo, double hi, bool openLo) const {
    const json& v = obj.at(key);
    if (!v.is_number()) fail(join(path, key), "must be a number, got " + v.dump());
    double x = v.get<double>();
    if ((openLo ? x <= lo : x < lo) || x > hi)
      fail(join(path, key), v.dump() + " is out of range " + (openLo ? "(" : "[") + std::to_string(lo) + ", " +
                                std::to_string(hi) + "]");
    return x;
  }

  CalibrationSpec calibration(const json& j, const std::string& baseDir) const {
    const std::string path = "calibration";
    onlyKeys(j, path, {"source", "text", "prompts", "continuations", "tokens", "window", "max_new_tokens", "seed"});
    if (!j.contains("source")) fail(path, "missing \"source\" (\"text\" or \"decode\")");
    CalibrationSpec c;
    c.source = string(j, path, "source", {"text", "decode"});
    // Decode calibration generates from prompts, or reads continuations generated elsewhere (a model too large
    // to generate here, a serving engine's output).
    c.fromContinuations = c.source == "decode" && j.contains("continuations");
    const char* fileKey = c.source == "text" ? "text" : c.fromContinuations ? "continuations" : "prompts";
    if (!j.contains(fileKey))
      fail(path, std::string("source \"") + c.source + "\" needs \"" + fileKey + "\": FILE" +
                     (c.source == "decode" ? " (or \"continuations\": FILE)" : ""));
    for (const char* other : {"text", "prompts", "continuations"})
      if (std::string(other) != fileKey && j.contains(other))
        fail(join(path, other), std::string("does not apply with \"") + fileKey + "\" (source \"" + c.source + "\")");
    if (c.fromContinuations && j.contains("max_new_tokens"))
      fail(join(path, "max_new_tokens"), "does not apply to continuations read from a file");
    std::string file = string(j, path, fileKey, {});
    std::filesystem::path p(file);
    c.file = p.is_absolute() || baseDir.empty() ? file : (std::filesystem::path(baseDir) / p).string();
    if (j.contains("tokens")) c.tokens = integer(j, path, "tokens", 1, int64_t{1} << 32);
    if (j.contains("window")) {
      if (c.source != "text") fail(join(path, "window"), "applies to text calibration only");
      c.window = integer(j, path, "window", 2, 1 << 20);
    }
    if (j.contains("max_new_tokens")) {
      if (c.source != "decode") fail(join(path, "max_new_tokens"), "applies to decode calibration only");
      c.maxNewTokens = integer(j, path, "max_new_tokens", 1, 1 << 20);
    }
    if (j.contains("seed")) c.seed = static_cast<uint64_t>(integer(j, path, "seed", 0, INT64_MAX));
    return c;
  }

  PruneSpec prune(const json& j, const std::string& path, const PruneSpec* base) const {
    onlyKeys(j, path, {"method", "pattern", "sparsity", "damp", "block"});
    PruneSpec p;
    if (base != nullptr) p = *base;
    if (j.contains("method"))
      p.method = string(j, path, "method", {"magnitude", "wanda", "sparsegpt"});
    else if (base == nullptr)
      fail(path, "missing \"method\" (magnitude, wanda or sparsegpt)");
    if (j.contains("pattern") && j.contains("sparsity")) fail(path, "give either \"pattern\" (N:M) or \"sparsity\", not both");
    try {
      if (j.contains("pattern")) {
        const json& v = j.at("pattern");
        if (!v.is_string()) fail(join(path, "pattern"), "must be a string like \"2:4\"");
        std::string text = v.get<std::string>();
        if (text.find(':') == std::string::npos) fail(join(path, "pattern"), "\"" + text + "\" is not N:M (for unstructured use \"sparsity\")");
        p.pattern = SparsityPattern::parse(text);
      } else if (j.contains("sparsity")) {
        p.pattern = SparsityPattern::unstructured(number(j, path, "sparsity", 0.0, 1.0, false));
      } else if (base == nullptr) {
        fail(path, "missing \"pattern\" (e.g. \"2:4\") or \"sparsity\" (e.g. 0.5)");
      }
    } catch (const InputError& e) {
      const std::string msg = e.what();
      if (msg.rfind(source_, 0) == 0) throw;   // already ours
      fail(join(path, j.contains("pattern") ? "pattern" : "sparsity"), msg);
    }
    if (j.contains("damp")) p.damp = number(j, path, "damp", 0.0, 1.0, true);
    if (j.contains("block")) p.block = integer(j, path, "block", 1, 1 << 16);
    return p;
  }

  QuantizeSpec quantize(const json& j, const std::string& path, const QuantizeSpec* base) const {
    onlyKeys(j, path, {"method", "format", "bits", "granularity", "group_size", "symmetric", "act_order",
                       "static_groups", "damp", "block", "scale_bits", "outlier_ratio", "outlier_threshold"});
    QuantizeSpec q;
    if (base != nullptr) q = *base;
    if (j.contains("method"))
      q.method = string(j, path, "method", {"rtn", "gptq", "spqr"});
    else if (base == nullptr)
      fail(path, "missing \"method\" (rtn, gptq or spqr)");
    if (q.method == "spqr" && base == nullptr) q.grid = QuantSpec::group(3, 16, false);
    if (j.contains("bits")) q.grid.bits = static_cast<int>(integer(j, path, "bits", 2, 8));
    if (j.contains("symmetric")) {
      if (!j.at("symmetric").is_boolean()) fail(join(path, "symmetric"), "must be true or false");
      q.grid.symmetric = j.at("symmetric").get<bool>();
    }
    if (j.contains("granularity")) {
      const std::string g = string(j, path, "granularity", {"tensor", "channel", "group"});
      q.grid.granularity = g == "tensor" ? QuantSpec::Granularity::Tensor
                           : g == "channel" ? QuantSpec::Granularity::Channel
                                            : QuantSpec::Granularity::Group;
    }
    if (j.contains("group_size")) {
      q.grid.groupSize = integer(j, path, "group_size", 1, 1 << 20);
      if (!j.contains("granularity")) q.grid.granularity = QuantSpec::Granularity::Group;
    }
    for (const char* flag : {"act_order", "static_groups"}) {
      if (!j.contains(flag)) continue;
      if (!j.at(flag).is_boolean()) fail(join(path, flag), "must be true or false");
      if (q.method != "gptq") fail(join(path, flag), "applies to gptq only");
      (std::string(flag) == "act_order" ? q.actOrder : q.staticGroups) = j.at(flag).get<bool>();
    }
    if (j.contains("damp")) q.damp = number(j, path, "damp", 0.0, 1.0, true);
    if (j.contains("block")) q.block = integer(j, path, "block", 1, 1 << 16);
    for (const char* key : {"scale_bits", "outlier_ratio", "outlier_threshold"})
      if (j.contains(key) && q.method != "spqr") fail(join(path, key), "applies to spqr only");
    if (j.contains("scale_bits")) q.scaleBits = static_cast<int>(integer(j, path, "scale_bits", 2, 8));
    if (j.contains("outlier_ratio") && j.contains("outlier_threshold"))
      fail(path, "give either \"outlier_ratio\" or \"outlier_threshold\", not both");
    if (j.contains("outlier_ratio")) q.outlierRatio = number(j, path, "outlier_ratio", 0.0, 0.5, false);
    if (j.contains("outlier_threshold")) q.outlierThreshold = number(j, path, "outlier_threshold", 0.0, 1e30, true);
    if (q.method == "spqr" && q.outlierRatio < 0 && q.outlierThreshold < 0) q.outlierRatio = 0.01;
    if (j.contains("format")) {
      const std::string name = string(j, path, "format", {});
      try {
        q.format = WeightFormat::parse(name);
      } catch (const InputError& e) {
        fail(join(path, "format"), e.what());
      }
      if (!q.format->isGguf())
        fail(join(path, "format"), "\"" + name + "\" is not a GGUF format (gguf-q8_0, gguf-q4_0, gguf-q4_k or "
                                   "gguf-q6_k); an int grid is described by bits, granularity, group_size and symmetric");
    }
    if (q.format) ggufGrid(j, path, q);
    try {
      q.grid.validate(path);
    } catch (const InputError& e) {
      fail("", e.what());
    }
    return q;
  }

  // A GGUF format fixes the grid: keys that say otherwise are refused, the grid is set to mirror the format.
  void ggufGrid(const json& j, const std::string& path, QuantizeSpec& q) const {
    const std::string format = q.format->name();
    if (q.method != "rtn" && q.method != "gptq")
      fail(join(path, "format"), format + " is quantized by rtn or gptq, not " + q.method);
    const gguf::TensorType type = q.format->ggufType;
    const int bits = type == gguf::TensorType::Q8_0 ? 8 : type == gguf::TensorType::Q6_K ? 6 : 4;
    const int64_t block = gguf::traits(type).weightsPerBlock;
    // Q4_K's sub-blocks have a min: the one grid that is not symmetric around 0.
    const bool symmetric = type != gguf::TensorType::Q4_K;
    auto contradicts = [&](const char* key, const std::string& what) {
      fail(join(path, key), "contradicts \"format\": \"" + format + "\" (" + what + "); leave it out");
    };
    if (j.contains("bits") && q.grid.bits != bits) contradicts("bits", std::to_string(bits) + "-bit codes");
    if (j.contains("symmetric") && q.grid.symmetric != symmetric)
      contradicts("symmetric", symmetric ? "a symmetric grid" : "sub-blocks with a min, not symmetric");
    if (j.contains("granularity") && q.grid.granularity != QuantSpec::Granularity::Group)
      contradicts("granularity", "a grid per block of " + std::to_string(block) + " weights of a row");
    if (j.contains("group_size") && q.grid.groupSize != block)
      contradicts("group_size", "blocks of " + std::to_string(block) + " weights");
    if (q.actOrder)
      fail(join(path, "act_order"), "cannot be stored on " + format + ": GGUF blocks are runs of consecutive "
           "columns in their original order, so a permuted sweep would not choose the codes that are stored");
    if (q.staticGroups)
      fail(join(path, "static_groups"), "does not apply to " + format + ": each block's grid is chosen from the "
           "error-updated weights when GPTQ reaches it");
    q.grid = QuantSpec::group(bits, block, symmetric);
  }

  std::vector<std::string> globs(const json& j, const std::string& path) const {
    if (!j.is_array()) fail(path, "must be a list of module name patterns");
    std::vector<std::string> out;
    for (size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_string() || j[i].get<std::string>().empty())
        fail(path + "[" + std::to_string(i) + "]", "must be a non-empty string");
      out.push_back(j[i].get<std::string>());
    }
    return out;
  }

 private:
  std::string source_;
};

bool globMatch(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

}  // namespace

Recipe Recipe::fromJson(const json& j, const std::string& baseDir, const std::string& sourceName) {
  RecipeReader r(sourceName);
  r.onlyKeys(j, "", {"calibration", "prune", "quantize", "lm_head", "skip", "overrides", "name", "description"});
  Recipe recipe;
  recipe.document = j;
  if (j.contains("quantize") && !j.at("quantize").is_null())
    recipe.quantize = r.quantize(j.at("quantize"), "quantize", nullptr);
  if (j.contains("calibration") && !j.at("calibration").is_null())
    recipe.calibration = r.calibration(j.at("calibration"), baseDir);
  if (j.contains("prune") && !j.at("prune").is_null()) recipe.prune = r.prune(j.at("prune"), "prune", nullptr);
  if (j.contains("skip")) recipe.skip = r.globs(j.at("skip"), "skip");
  if (j.contains("overrides")) {
    const json& list = j.at("overrides");
    if (!list.is_array()) r.fail("overrides", "must be a list of {\"match\": GLOB, \"prune\": ...}");
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string path = "overrides[" + std::to_string(i) + "]";
      const json& o = list[i];
      r.onlyKeys(o, path, {"match", "prune", "quantize"});
      if (!o.contains("match") || !o.at("match").is_string() || o.at("match").get<std::string>().empty())
        r.fail(path, "needs \"match\": a module name pattern such as \"model.layers.0.*\"");
      if (!o.contains("prune") && !o.contains("quantize"))
        r.fail(path, "needs \"prune\" and/or \"quantize\": null (leave as is) or a block");
      ModuleOverride mo;
      mo.match = o.at("match").get<std::string>();
      if (o.contains("prune")) {
        mo.overridesPrune = true;
        if (!o.at("prune").is_null()) {
          const PruneSpec* base = recipe.prune ? &*recipe.prune : nullptr;
          mo.prune = r.prune(o.at("prune"), path + ".prune", base);
        }
      }
      if (o.contains("quantize")) {
        mo.overridesQuantize = true;
        if (!o.at("quantize").is_null()) {
          const QuantizeSpec* base = recipe.quantize ? &*recipe.quantize : nullptr;
          mo.quantize = r.quantize(o.at("quantize"), path + ".quantize", base);
        }
      }
      recipe.overrides.push_back(mo);
    }
  }
  if (j.contains("lm_head") && !j.at("lm_head").is_null()) {
    const json& head = j.at("lm_head");
    r.onlyKeys(head, "lm_head", {"quantize"});
    if (!head.contains("quantize") || head.at("quantize").is_null())
      r.fail("lm_head", "needs \"quantize\": {\"method\": \"rtn\", ...} (leave \"lm_head\" out to keep the head as it is)");
    // The head is quantized on its own grid: it takes nothing from the recipe's "quantize".
    QuantizeSpec q = r.quantize(head.at("quantize"), "lm_head.quantize", nullptr);
    if (q.method != "rtn")
      r.fail("lm_head.quantize.method", "\"" + q.method + "\" needs the Hessian of the head's input (the final norm's "
             "output over the calibration set), which the sequential pass does not collect; the head takes \"rtn\" "
             "(an int grid or a gguf-* format)");
    recipe.headQuantize = q;
  }
  if (!recipe.prune && !recipe.quantize && recipe.overrides.empty() && !recipe.headQuantize)
    r.fail("", "nothing to do: the recipe has no \"prune\", \"quantize\" or \"lm_head\" block");
  if (recipe.needsCalibration() && !recipe.calibration)
    r.fail("", "methods wanda, sparsegpt, gptq and spqr need a \"calibration\" block");
  return recipe;
}

Recipe Recipe::fromFile(const std::string& path) {
  Recipe r = fromJson(readJsonFile(path, kMaxJsonConfigBytes, "a recipe"),
                      std::filesystem::path(path).parent_path().string(), path);
  r.path = path;
  return r;
}

std::optional<PruneSpec> Recipe::pruneFor(const std::string& module) const {
  if (module == "lm_head") return std::nullopt;
  for (const auto& s : skip)
    if (globMatch(s, module)) return std::nullopt;
  std::optional<PruneSpec> p = prune;
  for (const auto& o : overrides)
    if (o.overridesPrune && globMatch(o.match, module)) p = o.prune;
  return p;
}

std::optional<QuantizeSpec> Recipe::quantizeFor(const std::string& module) const {
  if (module == "lm_head") return headQuantize;
  for (const auto& s : skip)
    if (globMatch(s, module)) return std::nullopt;
  std::optional<QuantizeSpec> q = quantize;
  for (const auto& o : overrides)
    if (o.overridesQuantize && globMatch(o.match, module)) q = o.quantize;
  return q;
}

bool Recipe::needsCalibration() const {
  if (prune && prune->needsCalibration()) return true;
  if (quantize && quantize->needsCalibration()) return true;
  for (const auto& o : overrides)
    if ((o.prune && o.prune->needsCalibration()) || (o.quantize && o.quantize->needsCalibration())) return true;
  return false;
}

}  // namespace pareto
