#include "compress/ModuleSolve.h"

#include <ATen/ATen.h>

#include <chrono>

#include "calib/HessianAccumulator.h"
#include "compress/GgufQuantize.h"
#include "compress/Gptq.h"
#include "compress/MagnitudePrune.h"
#include "compress/SolveTimings.h"
#include "compress/SparseGpt.h"
#include "compress/WandaPrune.h"
#include "formats/BitmaskNMWeight.h"
#include "util/Error.h"

namespace pareto {
namespace {

using clock = std::chrono::steady_clock;
double since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

// The code that dequantizes to exactly 0 in every position (0 for symmetric grids, the zero point otherwise).
at::Tensor zeroCodes(const QuantResult& q, int64_t colsPerGroup) {
  if (!q.zeros.defined()) return at::zeros_like(q.codes);
  return q.zeros.repeat_interleave(colsPerGroup, 1).expand_as(q.codes).to(q.codes.scalar_type());
}

// `keep`: after pruning, the weights to quantize (the rest stay exactly 0); `grid` may differ from spec.grid
// (N:M: the group size in original columns).
GptqResult quantizeWeight(const std::string& name, const at::Tensor& weight, const HessianAccumulator* hessian,
                          const QuantizeSpec& spec, const QuantSpec& grid, const at::Tensor& keep = {}) {
  if (spec.method == "rtn") return {rtnQuantize(weight, grid, name), {}, {}};
  if (spec.method == "gptq") {
    GptqOptions o;
    o.damp = spec.damp;
    o.blockSize = spec.block;
    o.actOrder = spec.actOrder;
    o.staticGroups = spec.staticGroups;
    o.keep = keep;
    return gptqQuantize(weight, hessian->sum(), grid, o, name);
  }
  throw InputError(name + ": quantization method \"" + spec.method + "\" is not available in this version of Pareto");
}

SpqrResult spqrWeight(const std::string& name, const at::Tensor& weight, const HessianAccumulator* hessian,
                      const QuantizeSpec& spec, int64_t groupSize, const at::Tensor& keep = {}) {
  SpqrOptions o;
  o.bits = spec.grid.bits;
  o.groupSize = groupSize;
  o.scaleBits = spec.scaleBits;
  o.outlierRatio = spec.outlierRatio;
  o.outlierThreshold = spec.outlierThreshold;
  o.damp = spec.damp;
  o.blockSize = spec.block;
  o.keep = keep;
  return spqrQuantize(weight, hessian->sum(), o, name);
}

ModuleOutcome pruneModule(const std::string& name, const at::Tensor& weight, const HessianAccumulator* hessian,
                          const PruneSpec& spec) {
  const auto t0 = clock::now();
  ModuleOutcome out;
  out.pattern = spec.pattern;
  out.report.name = name;
  out.report.method = spec.method;
  out.report.pattern = spec.pattern.label();
  PruneResult r;
  if (spec.method == "magnitude") {
    r = magnitudePrune(weight, spec.pattern, name);
  } else if (spec.method == "wanda") {
    r = wandaPrune(weight, wandaInputNorms(hessian->sum()), spec.pattern, name);
  } else {
    SparseGptOptions o;
    o.damp = spec.damp;
    o.blockSize = spec.block;
    SparseGptResult s = sparseGptPrune(weight, hessian->sum(), spec.pattern, o, name);
    r = s.pruned;
    out.report.dampUsed = s.report.damp;
    out.report.dampRetries = s.report.dampRetries;
  }
  out.weight = r.weight;
  out.mask = r.mask;
  out.report.seconds = since(t0);
  out.report.sparsity = 1.0 - r.mask.to(at::kFloat).mean().item<double>();
  out.report.bitsPerWeight = 0;   // known once the folder is written (it depends on the stored dtype)
  return out;
}

}  // namespace

ModuleOutcome solveModule(const ModulePlan& plan, const at::Tensor& weight, const HessianAccumulator* hessian) {
  const SolveTimings::Step step("whole module", weight);
  const auto t0 = clock::now();
  const std::string& name = plan.module;
  const std::optional<PruneSpec>& prune = plan.prune;
  const std::optional<QuantizeSpec>& quant = plan.quant;
  ModuleOutcome out = prune ? pruneModule(name, weight, hessian, *prune) : ModuleOutcome{};
  out.report.name = name;
  out.report.method = plan.method();
  out.report.pattern = plan.pattern();
  out.format = plan.format;
  out.report.format = plan.format.name();
  if (!prune) out.weight = weight;
  out.note = plan.note;
  if (quant && plan.format.isGguf()) {
    out.quant = quant;
    GgufQuantResult r;
    if (quant->method == "rtn") {
      r = ggufRtnQuantize(out.weight, plan.format.ggufType, name);
    } else {
      GgufGptqOptions o;
      o.damp = quant->damp;
      o.blockSize = quant->block;
      r = ggufGptqQuantize(out.weight, hessian->sum(), plan.format.ggufType, o, name).quant;
    }
    out.ggufBlocks = r.blocks;
    out.weight = r.dequantized;
  } else if (quant) {
    out.quant = quant;
    if (plan.format.isBitmask()) {
      // Prune then quantize the survivors: the packed codes hold the kept values in column order, which is what
      // the bitmask + int kernel reads, and the grids are groups of those kept values.
      if (quant->method == "rtn") {
        BitmaskNMWeight packed = BitmaskNMWeight::pack(out.weight, out.mask, out.pattern->n(), out.pattern->m());
        out.codes = rtnQuantize(packed.values, quant->grid, name);
        packed.values = out.codes.dequantized;
        out.weight = packed.unpack();
      } else if (quant->method == "gptq") {
        // GPTQ over the kept weights only (pruned ones stay 0, the mask is kept exactly).
        GptqResult r = quantizeWeight(name, out.weight, hessian, *quant, plan.solverGrid(), out.mask);
        out.weight = r.quant.dequantized;
        out.codes = quantKeptColumns(r.quant, out.mask);
        out.permutation = r.permutation;
      } else {
        SpqrResult r = spqrWeight(name, out.weight, hessian, *quant, plan.solverGrid().groupSize, out.mask);
        out.weight = r.dequantized;
        out.spqr = spqrKeptColumns(r, out.mask);
      }
    } else if (quant->method == "spqr") {
      // Unstructured pruning first: the pruned weights get their group's zero code (exactly 0).
      out.spqr = spqrWeight(name, out.weight, hessian, *quant, quant->grid.groupSize, out.mask);
      out.weight = out.spqr->dequantized;
    } else {
      GptqResult r = quantizeWeight(name, out.weight, hessian, *quant, quant->grid,
                                    quant->method == "gptq" ? out.mask : at::Tensor());
      out.codes = r.quant;
      out.permutation = r.permutation;
      if (out.mask.defined() && quant->method == "rtn") {
        // RTN has no error propagation: unstructured zeros (0 on every grid) are simply given the zero code.
        const at::Tensor zero = zeroCodes(out.codes, quant->grid.columnsPerGroup(weight.size(1)));
        out.codes.codes = at::where(out.mask, out.codes.codes, zero);
        out.codes.dequantized = out.codes.dequantized * out.mask.to(out.codes.dequantized.scalar_type());
      }
      out.weight = out.codes.dequantized;
    }
  }
  out.report.seconds = since(t0);
  // Pruned: the fraction removed; quantized only: the weights that landed on a zero code.
  const at::Tensor nonzero = out.mask.defined() ? out.mask : (out.weight != 0);
  out.report.sparsity = 1.0 - nonzero.to(at::kFloat).mean().item<double>();
  return out;
}


}  // namespace pareto
