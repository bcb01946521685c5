// Per-module sensitivity (issue 24, point 1): for every block linear and every candidate of the search base, the
// bytes the candidate stores for the module and the estimated loss increase of its solution,
//
//   loss = tr(ΔW H̄ ΔWᵀ),   ΔW = W_candidate − W_dense,   H̄ = H / Σw = the mean of x xᵀ over calibration tokens,
//
// i.e. the mean over calibration tokens of ‖ΔW x‖², the squared error the candidate adds to the module's output.
// H̄ is the module input's Hessian sum as calib/HessianAccumulator.h holds it, divided by its weight sum, so the
// losses of modules of different layers are on one scale (every module sees the same tokens) and do not grow
// with the calibration size. W_candidate is the solution compress/ModuleSolve.h's solveModule gives (the one the
// compress job writes), from the dense model's inputs (calib/SequentialPass.h observeHessians): every candidate
// of a module sees the same Hessian.
//
// That output error is not comparable across modules: a module whose output the next operation damps (q/k before
// the softmax, gate/up before the SiLU product) shows a large one, a module writing into the residual stream
// (o, down) a small one that reaches every later layer. The refinement (search/SensitivityRefinement.h, on by
// default) measures, per module, the KL to dense of replacing that module alone by one reference candidate's
// solution and multiplies every candidate's output error of the module by KL / output error of the reference:
// the losses become predicted KL in nats, on one scale for every module.
//
// Bytes come from the instant estimate (compress/RecipeEstimate.h), which counts each module's plan exactly as
// compress stores it, so bits per weight of an allocation are the bits compress reports. A candidate that cannot
// apply to a module (planModule refuses it: a group size that does not divide the columns, 2:4 on columns that
// are not a multiple of 32) is marked with the reason and never chosen for that module.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "model/Device.h"
#include "search/SearchBase.h"
#include "util/Progress.h"

namespace pareto {

struct ModelSummary;
struct LoadedModel;

struct SensitivityCell {
  bool applies = false;
  std::string problem;   // why it does not apply: planModule's or the solver's message naming the module
  std::string format;    // the stored layout (formats/WeightFormat.h): "int4-g128", "gguf-q4_0", "dense"
  std::string kernel;    // the benchmark kernel that decodes it (RecipeEstimate's ModuleEstimate::kernel); "": none
  std::string note;      // a GGUF fallback, as the module plan says
  uint64_t bytes = 0;    // everything the format stores
  double loss = 0;       // what the allocation minimises: outputError × the module's scale; NaN until measured
  double outputError = 0;   // tr(ΔW H̄ ΔWᵀ); 0 for dense; NaN until measured
};

struct SensitivityModule {
  std::string name;      // "model.layers.0.mlp.up_proj"
  int64_t rows = 0, cols = 0;
  std::vector<SensitivityCell> cells;   // one per candidate, in the base's order
  // loss = outputError × scale. Refined: KL of the reference candidate alone / its output error (measured), or
  // the median of the measured scales of its kind ("o_proj") for a module not measured. Unrefined: 1.
  double scale = 1;
  double referenceKl = std::numeric_limits<double>::quiet_NaN();   // nats per position; NaN: not measured
};

// How the table's losses were made comparable across modules (search/SensitivityRefinement.h).
struct SensitivityRefinement {
  bool done = false;
  std::string reference;        // the candidate each module was replaced by alone
  int64_t windows = 0, tokens = 0;   // calibration sequences and positions the KL was measured on
  size_t measuredModules = 0;   // the rest took their kind's median scale
};

struct SensitivityTable {
  std::vector<std::string> candidates;   // names, in the base's order
  std::vector<SensitivityModule> modules;   // the block linears, in checkpoint (name) order
  int64_t linearWeights = 0;             // Σ rows · cols over the block linears
  uint64_t denseLinearBytes = 0;
  // Weight bytes a batch-1 decode step reads besides the block linears (output head, norms), as the estimate
  // counts them.
  uint64_t otherBytesPerToken = 0;
  int64_t calibrationTokens = 0;         // 0 until measured
  bool measured = false;
  SensitivityRefinement refinement;

  // What the losses are, for a person: "output error tr(ΔW H̄ ΔWᵀ)" or the KL scaling and what it measured.
  std::string estimate() const;

  // "model.layers.0.mlp.down_proj × gptq-int4-g64: ..." for every pair that does not apply.
  std::vector<std::string> skipped() const;
};

// Formats, bytes and applicability from the model's headers alone (instant); no losses yet. Throws InputError
// for a compressed folder (the search starts from the dense model).
SensitivityTable planSensitivity(const SearchBase& base, const ModelSummary& model);

// Loads the model, builds the calibration set of the base and fills every applicable cell's output error, module
// by module as observeHessians reaches them; then, when base.refine.enabled, refines them (stage "refine").
// `progress`: stages "calibration", "sensitivity" and "refine"; `cancel` is checked between modules and
// candidates (throws Cancelled).
void measureSensitivity(SensitivityTable& table, const SearchBase& base, const std::string& modelDir,
                        const RuntimeOptions& runtime, int64_t batch, const ProgressCallback& progress,
                        const CancelToken* cancel);
// The same on a loaded dense model (left as it was found).
void measureSensitivity(SensitivityTable& table, const SearchBase& base, LoadedModel& model, int64_t batch,
                        const ProgressCallback& progress, const CancelToken* cancel);

}  // namespace pareto
