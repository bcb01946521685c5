// libFuzzer target: config.json text through the JSON reader (nesting limit) and ModelConfig validation. A
// config that passes must describe a buildable model: the invariants checked here are the ones the model code
// relies on without checking again.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "checkpoint/ModelConfig.h"
#include "util/Error.h"
#include "util/Json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nlohmann::json j = pareto::parseJson(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
    const pareto::ModelConfig c = pareto::ModelConfig::fromJson(j, "config.json");
    const bool sane = c.vocabSize > 0 && c.hiddenSize > 0 && c.intermediateSize > 0 && c.numLayers > 0 &&
                      c.numHeads > 0 && c.numKvHeads > 0 && c.numHeads % c.numKvHeads == 0 && c.headDim > 0 &&
                      c.headDim % 2 == 0 && c.maxPositionEmbeddings > 0 && c.rmsNormEps > 0 && c.ropeTheta > 0;
    if (!sane) __builtin_trap();
    for (int64_t id : c.eosTokenIds)
      if (id < 0 || id >= c.vocabSize) __builtin_trap();
  } catch (const pareto::InputError&) {
  }
  return 0;
}
