// What a job's run records in the run store when it begins (store/ExperimentStore.h RunStart): one rule for
// every job of pareto-cli and the workbench, so that a run reads the same whichever front end recorded it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "store/ExperimentStore.h"

namespace pareto {

// A run of `kind` on the model folder `modelDir` ("" for none: a synthetic benchmark) with `settings` on
// `device`:
//   versions  pareto's and LibTorch's
//   device    the device's description ("cpu", "NVIDIA H200") for a device name ("cpu", "cuda:0"); a name that is
//             not one (already a description) as given
//   model     the folder's identity; none when it is not a model folder (the job fails on it and records why)
//   recipe    the settings; every kind but compress also names the model there (its absolute path), while a
//             compress recipe stays a recipe that compress accepts, its model only in the models table
//   output    the absolute output folder ("" for none)
RunStart makeRunStart(const std::string& kind, const std::string& modelDir, const std::string& device,
                      nlohmann::json settings, const std::string& output = "");

// After a finished job's results were added to its run (Job::record): settings the job resolved (a result's
// "settings", store/ResultJson.h) add to those recorded at begin (`begun`), which win: their paths are absolute.
void keepBegunSettings(RunResults& results, const nlohmann::json& begun);

}  // namespace pareto
