#include "jobs/RunRecords.h"

#include <torch/version.h>

#include "model/Device.h"
#include "store/ModelIdentity.h"
#include "util/FileSystem.h"
#include "util/Version.h"

namespace pareto {
namespace {

std::string describeDevice(const std::string& device) {
  try {
    return deviceDescription(parseDevice(device));
  } catch (const std::exception&) {
    return device;
  }
}

}  // namespace

RunStart makeRunStart(const std::string& kind, const std::string& modelDir, const std::string& device,
                      nlohmann::json settings, const std::string& output) {
  RunStart s;
  s.kind = kind;
  s.versions = {{"pareto", paretoVersion()}, {"libtorch", TORCH_VERSION}};
  s.device = describeDevice(device);
  if (!modelDir.empty()) {
    try {
      s.model = identifyModel(modelDir);
    } catch (const std::exception&) {
      // not a model folder: the job fails on it in a moment and the run records why
    }
  }
  if (!settings.is_object()) settings = nlohmann::json::object();
  if (kind != "compress" && !modelDir.empty()) settings["model"] = absolutePath(modelDir);
  s.recipe = std::move(settings);
  s.output = absolutePath(output);
  return s;
}

void keepBegunSettings(RunResults& results, const nlohmann::json& begun) {
  if (!results.recipe) return;
  nlohmann::json merged = *results.recipe;
  merged.update(begun);
  results.recipe = merged;
}

}  // namespace pareto
