// The finished layers of a compress run, kept in its staging folder (util/OutputFolder.h: kResumeFolder) as
// each one completes, so that `compress --resume` continues an interrupted run (killed, crashed, cancelled)
// from its last complete layer with the result an uninterrupted run gives:
//   resume/layer-NNNNN.safetensors  the layer's modules in their stored form (PackedModuleIO, final names)
//   resume/layer-NNNNN.json         the layer's manifest entries and module reports
//   resume/inputs-NNNNN.safetensors the calibration activations entering block NNNNN, one tensor per batch, as the
//                                   pass computed them with the finished layers' weights: a resume starts the pass
//                                   there. Only the newest is kept, so the resume folder holds one set of
//                                   activations beside the stored forms (keeping each layer's weights as held
//                                   instead cost a 70B's 80 layers ~270 GB of float32)
//   resume/state.json               what the run is (source checkpoint, recipe, device, dtype, batch) and how
//                                   many layers are done; written last, so a layer counts once it is complete
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "calib/SequentialPass.h"
#include "checkpoint/Safetensors.h"

namespace pareto {

struct ModuleReport;

// One finished module of a layer.
struct FinishedModule {
  std::string module;                                   // "model.layers.3.mlp.up_proj"
  std::vector<std::pair<std::string, at::Tensor>> stored;   // as writePackedModule gives them (CPU)
  nlohmann::json manifestEntry;                         // pareto.json's "modules" entry
  uint64_t storedBytes = 0;
};

class CompressResume {
 public:
  // `staging`: the run's staging folder; `identity`: what must match for a resume (JSON object).
  CompressResume(std::string staging, nlohmann::json identity, int64_t layers);

  // A fresh run: creates the resume folder. A resumed one: checks the identity (InputError naming the first
  // setting that differs from the interrupted run's) and returns the layers already done.
  int64_t start(bool resumed);

  // Saves the calibration inputs of block `layer` (the pass's blockInputs), one batch at a time; the layer before
  // it counts as done once writeLayer has written it, and that removes the previous block's inputs. The second form
  // writes host copies of them (taken in the pass, written beside it).
  void writeInputs(int64_t layer, const SequentialPassOptions::BlockInputs& inputs);
  void writeInputs(int64_t layer, const std::vector<at::Tensor>& hostInputs);
  void writeLayer(int64_t layer, const std::vector<FinishedModule>& modules, const std::vector<ModuleReport>& reports);

  // A resumed run: batch `batch`'s input of the first block not done, on `device` (the pass's restoredInput).
  // InputError naming the file when it is missing or was saved for other batches.
  at::Tensor restoredInput(size_t batch, const std::vector<int64_t>& shape, const c10::Device& device) const;

  // A finished layer as written: its modules' stored tensors, entries and reports.
  struct Layer {
    // The layer's file, mapped: its tensors are read one at a time as the result is written.
    std::shared_ptr<const SafetensorsFile> file;
    std::map<std::string, std::vector<const TensorEntry*>> stored;   // by module, in the order written
    std::map<std::string, nlohmann::json> manifestEntries;
    std::map<std::string, uint64_t> storedBytes;
    std::vector<ModuleReport> reports;
  };
  Layer readLayer(int64_t layer) const;

  int64_t layersDone() const { return done_; }
  // Removes the resume folder (before the staging folder becomes the result).
  void finish();

 private:
  std::string path(const char* kind, int64_t layer) const;
  std::string inputsPath(int64_t layer) const;
  std::string dir_;
  nlohmann::json identity_;
  int64_t layers_ = 0, done_ = 0;
};

// An interrupted compress to `outDir` that --resume would continue: its staging folder and finished layers, or
// {"", 0} when there is none.
struct InterruptedCompress {
  std::string staging;
  int64_t layersDone = 0;
};
InterruptedCompress interruptedCompress(const std::string& outDir);

}  // namespace pareto
