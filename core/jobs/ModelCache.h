// Loaded models kept between jobs of one front end (the workbench evaluates and generates with the same dense
// model run after run): the dense model and a compressed one, each by folder and runtime. Loading another
// folder frees the one it replaces first.
#pragma once

#include <memory>
#include <string>

#include "model/LoadedModel.h"

namespace pareto {

class ModelCache {
 public:
  // A load reports and can be cancelled as loadModel's; a cancelled or failed load leaves the slot empty (the
  // model it replaces is freed first either way).
  LoadedModel& dense(const std::string& dir, const RuntimeOptions& runtime, const ProgressCallback& progress = {},
                     const CancelToken* cancel = nullptr);
  LoadedModel& compressed(const std::string& dir, const RuntimeOptions& runtime,
                          const ProgressCallback& progress = {}, const CancelToken* cancel = nullptr);
  // The key of the dense model last loaded (its absolute folder and runtime), for results cached with it.
  const std::string& denseKey() const { return denseKey_; }
  // Frees the compressed model (a job's evaluation copy; the folder may be removed or replaced next).
  void dropCompressed();

 private:
  std::unique_ptr<LoadedModel> dense_, compressed_;
  std::string denseKey_, compressedKey_;
};

}  // namespace pareto
