// libFuzzer target: a recipe JSON through the reader and the strict recipe parser, then the per-module lookups
// (skip and override globs) on typical module names.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "compress/Recipe.h"
#include "util/Error.h"
#include "util/Json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nlohmann::json j = pareto::parseJson(std::string_view(reinterpret_cast<const char*>(data), size), "recipe.json");
    const pareto::Recipe r = pareto::Recipe::fromJson(j, "/recipes", "recipe.json");
    if (r.needsCalibration() && !r.calibration) __builtin_trap();
    for (const char* module : {"model.layers.0.self_attn.q_proj", "model.layers.31.mlp.down_proj", "lm_head"}) {
      (void)r.pruneFor(module);
      (void)r.quantizeFor(module);
    }
  } catch (const pareto::InputError&) {
  }
  return 0;
}
