#include "jobs/ModelCache.h"

#include "util/FileSystem.h"

namespace pareto {
namespace {

std::string keyOf(const std::string& dir, const RuntimeOptions& r) {
  return absolutePath(dir) + "|" + r.device.str() + "|" + std::string(c10::toString(r.dtype)) +
         (r.packedWeights ? "|packed" : "");
}

LoadedModel& load(std::unique_ptr<LoadedModel>& slot, std::string& slotKey, const std::string& dir,
                  const RuntimeOptions& runtime, const ProgressCallback& progress, const CancelToken* cancel) {
  const std::string key = keyOf(dir, runtime);
  if (!slot || slotKey != key) {
    slot.reset();   // free the old one before loading the next
    slotKey.clear();
    slot = std::make_unique<LoadedModel>(loadModel(dir, runtime, WeightResidency::Whole, progress, cancel));
    slotKey = key;
  }
  return *slot;
}

}  // namespace

LoadedModel& ModelCache::dense(const std::string& dir, const RuntimeOptions& runtime,
                               const ProgressCallback& progress, const CancelToken* cancel) {
  return load(dense_, denseKey_, dir, runtime, progress, cancel);
}

LoadedModel& ModelCache::compressed(const std::string& dir, const RuntimeOptions& runtime,
                                    const ProgressCallback& progress, const CancelToken* cancel) {
  return load(compressed_, compressedKey_, dir, runtime, progress, cancel);
}

void ModelCache::dropCompressed() {
  compressed_.reset();
  compressedKey_.clear();
}

}  // namespace pareto
