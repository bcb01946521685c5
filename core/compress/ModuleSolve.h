// One module through the solvers its plan names (compress/ModulePlan.h): pruning, then quantization of what
// pruning kept, with the codes, masks and grids the stored format needs. The compress job writes the outcome;
// anything that needs a candidate's solution without writing it (a sensitivity study) calls the same function,
// so the two cannot disagree.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "compress/CompressJob.h"
#include "compress/ModulePlan.h"
#include "compress/QuantGrid.h"
#include "compress/Spqr.h"
#include "formats/WeightFormat.h"

namespace pareto {

class HessianAccumulator;

// What the solvers decided for one module.
struct ModuleOutcome {
  ModuleReport report;
  WeightFormat format;  // the plan's stored format
  at::Tensor weight;  // the solvers' result (SparseGPT also updates the weights it keeps)
  at::Tensor mask;    // bool, for packing; undefined when not pruned
  std::optional<SparsityPattern> pattern;
  std::optional<QuantizeSpec> quant;
  QuantResult codes;  // quantized modules: of the whole weight, or of the bitmask's kept values
  at::Tensor permutation;  // GPTQ act-order: int64 [in], the order the columns were quantized in
  std::optional<SpqrResult> spqr;  // of the whole weight, or of the bitmask's kept values
  at::Tensor ggufBlocks;   // gguf-*: uint8 [rows, bytes of a row], ggml's blocks
  std::string note;        // the plan's (a GGUF fallback)
};


// Runs the plan's solvers on `weight` [out, in] (the model's current weight, on its device). `hessian` is the
// module input's accumulator; it may be null only for plans without calibration (magnitude pruning, RTN).
// Throws InputError naming the module for a plan the solvers refuse.
ModuleOutcome solveModule(const ModulePlan& plan, const at::Tensor& weight, const HessianAccumulator* hessian);

}  // namespace pareto
