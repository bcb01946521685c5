// The copy bandwidth predicted tokens/s come from when no kernel benchmarks cover a recipe (compress/
// RecipeEstimate.h DecodeBandwidth): measured once per device and kept in the experiment store (a benchmark row of
// no run, kernel "copy": not a run of the history), then read back by every prediction until it is measured again on request. A fresh
// measurement at each start would move every prediction with the machine's load of the moment; one stored
// figure gives the same recipe the same tokens/s in `pareto-cli search` and the workbench, session after session.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>

#include "compress/RecipeEstimate.h"
#include "store/ExperimentStore.h"

namespace pareto {

// The benchmark row's kernel name for a copy bandwidth measurement.
inline constexpr const char* kCopyBandwidthKernel = "copy";

struct StoredCopyBandwidth {
  std::string device;          // model/Device.h deviceDescription: "cpu", "NVIDIA H200"
  double bytesPerSecond = 0;
  double measuredAt = 0;       // seconds since the Unix epoch
};

// The newest copy bandwidth stored for `deviceName` (deviceDescription), or none.
std::optional<StoredCopyBandwidth> storedCopyBandwidth(const ExperimentStore& store, const std::string& deviceName);

// Measures the device's copy bandwidth (runtime/CopyBandwidth.h) and records it in `store`; with no store it is
// only measured. Throws InputError for a device this build cannot run, and the store's errors.
StoredCopyBandwidth measureCopyBandwidthInto(ExperimentStore* store, const c10::Device& device);

// The stored figure for `device`, else a new measurement stored for next time (measured but not stored when the
// store cannot be written: `storeProblem` says why). `fresh` measures anew whatever is stored.
StoredCopyBandwidth copyBandwidthForPredictions(ExperimentStore* store, const c10::Device& device, bool fresh = false,
                                        std::string* storeProblem = nullptr);

// What predictions say they come from: "cpu copy bandwidth 22.7 GB/s measured 2026-12-01 14:03", the device
// named by `label` (the workbench's "CPU", "NVIDIA H200 (cuda:0)").
std::string copyBandwidthSource(const StoredCopyBandwidth& bandwidth, const std::string& label);

// A prediction's bandwidth: `copy`, with the device's stored kernel benchmarks (steps and single GEMVs) where the
// store has any.
DecodeBandwidth decodeBandwidth(const StoredCopyBandwidth& copy, const std::string& label,
                                const ExperimentStore* store);

// Sets b.gemvs from the store's single-GEMV rows of `deviceName` (decodeBandwidth does it too; for a bandwidth
// built elsewhere, as the workbench builds its own).
void addStoredGemvs(DecodeBandwidth& b, const ExperimentStore& store, const std::string& deviceName);

// Sets b.denseStepSeconds / denseStepSource from the newest stored batch-1 `bench decode` of the dense model in
// `modelDir` on `deviceName` (the row's "<model> context N" names the folder as it was given: compared as
// canonical paths). Leaves `b` as it is when there is none.
void addDenseDecodeStep(DecodeBandwidth& b, const ExperimentStore& store, const std::string& deviceName,
                        const std::string& modelDir);

}  // namespace pareto
