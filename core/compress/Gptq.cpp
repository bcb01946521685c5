#include "compress/Gptq.h"

#include "compress/ObsBlockKernel.h"
#include "compress/ObsSweep.h"
#include "compress/SolverInputs.h"

#include <ATen/ATen.h>

#include <tuple>
#include <utility>
#include <vector>

#include "util/Error.h"

namespace pareto {
namespace {

// The weight and the options; returns the subject of messages.
std::string checkInputs(const at::Tensor& weight, const QuantSpec& spec, const GptqOptions& options,
                        const std::string& moduleName) {
  const std::string who = solverSubject(moduleName);
  checkQuantWeight(weight, spec, moduleName);
  checkObsOptions(options.damp, options.blockSize, options.maxDampRetries, who, "GPTQ");
  if (options.actOrder && spec.granularity == QuantSpec::Granularity::Group && !options.staticGroups)
    throw InputError(who + ": GPTQ act-order with groups (" + spec.label() +
                     ") needs static groups; dynamic groups with act-order are not supported");
  return who;
}

}  // namespace

GptqResult gptqQuantize(const at::Tensor& weight, const at::Tensor& hessian, const QuantSpec& spec,
                        const GptqOptions& options, const std::string& moduleName) {
  const std::string who = checkInputs(weight, spec, options, moduleName);
  // Pruned weights: 0 from the start (grids see them as 0), fixed at 0 in the sweep.
  ObsInputs inputs = obsInputs(weight, hessian, options.keep, obsWorkType(weight), who, "GPTQ");
  at::Tensor w = std::move(inputs.weight), h = std::move(inputs.hessian), pruned = std::move(inputs.pruned);
  using Granularity = QuantSpec::Granularity;
  const int64_t rows = weight.size(0), columns = weight.size(1);
  const int64_t groups = spec.groupsPerRow(columns, who);
  const int64_t groupSize = spec.columnsPerGroup(columns);
  const bool dynamicGroups = spec.granularity == Granularity::Group && !options.staticGroups;
  GptqResult result;
  GptqReport& report = result.report;
  report.deadInputs = inputs.deadInputs;

  // Grids: [gridRows, groups] scales and zeros. Fixed ones are computed here from W; dynamic groups fill theirs in
  // during the sweep.
  const int64_t gridRows = spec.granularity == Granularity::Tensor ? 1 : rows;
  at::Tensor scales = at::ones({gridRows, groups}, w.options());
  at::Tensor zeros = at::zeros({gridRows, groups}, w.options());
  if (!dynamicGroups) {
    const int64_t perGrid = spec.granularity == Granularity::Tensor ? rows * columns : groupSize;
    const QuantGrid grid = findQuantGrid(w.reshape({gridRows * groups, perGrid}), spec, who);
    scales.copy_(grid.scale.reshape({gridRows, groups}));
    zeros.copy_(grid.zero.reshape({gridRows, groups}));
  }

  std::vector<int64_t> order;  // order[k] = original column quantized k-th (act-order only)
  if (options.actOrder) {
    result.permutation = std::get<1>(h.diagonal().sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
    const at::Tensor permutationCpu = result.permutation.to(at::kCPU, at::kLong).contiguous();
    order.assign(permutationCpu.data_ptr<int64_t>(), permutationCpu.data_ptr<int64_t>() + columns);
    w = w.index_select(1, result.permutation);
    h = h.index_select(0, result.permutation).index_select(1, result.permutation);
    if (pruned.defined()) pruned = pruned.index_select(1, result.permutation);
  }

  const DampedInverse damped = dampedInverse(h, options.damp, options.maxDampRetries, who, "GPTQ");
  noteDamping(report, damped.damping);
  h = at::Tensor();  // free the damped H before the sweep

  at::Tensor codes = at::empty({rows, columns}, w.options());
  ObsSweepHooks hooks;
  hooks.fixColumn = [&](const ObsSweepState& sweep, int64_t column, const at::Tensor& values) {
    const int64_t original = options.actOrder ? order[column] : column;
    const int64_t group = original / groupSize;
    if (dynamicGroups && column % groupSize == 0) {
      // Dynamic groups never combine with act-order, so the group's columns are contiguous here too.
      at::Tensor current = sweep.current(column, groupSize);
      if (pruned.defined()) current = current.masked_fill(pruned.narrow(1, column, groupSize), 0);
      const QuantGrid grid = findQuantGrid(current, spec, who);
      scales.select(1, group).copy_(grid.scale.squeeze(1));
      zeros.select(1, group).copy_(grid.zero.squeeze(1));
    }
    const at::Tensor scale = scales.select(1, group), zero = zeros.select(1, group);
    at::Tensor q = quantizeToCodes(values, scale, zero, spec);
    if (pruned.defined()) q = at::where(pruned.select(1, column), zero.expand_as(q), q);
    codes.select(1, column).copy_(q);
    return dequantizeCodes(q, scale, zero);
  };
  // Act-order visits a group's columns out of order, which the fused block sweep does not follow.
  ObsBlockRule rule;
  if (!options.actOrder && obsBlockKernelAvailable(w)) {
    rule.kind = ObsBlockRule::Kind::Quantize;
    rule.scales = scales;
    rule.zeros = zeros;
    rule.groupSize = groupSize;
    rule.dynamicGroups = dynamicGroups;
    rule.symmetric = spec.symmetric;
    rule.qmin = double(spec.qmin());
    rule.qmax = double(spec.qmax());
    rule.codes = codes;
    rule.pruned = pruned;
    rule.overflow = at::zeros({1}, w.options().dtype(at::kInt));
    hooks.fixBlock = [&](const ObsSweepState& sweep, const at::Tensor& hinvBlock, const at::Tensor& errorsT,
                         const at::Tensor& losses) { return obsBlockKernel(rule, sweep, hinvBlock, errorsT, losses); };
  }
  const ObsSweepResult swept = obsSweep(w, damped.upper, options.blockSize, hooks);
  if (rule.overflow.defined() && rule.overflow.item<int>() != 0)
    throw InputError(who + ": " + spec.label() + " scale exceeds the fp16 range (|w| up to " +
                     std::to_string(weight.abs().max().item<double>()) + ")");
  w = swept.weight;

  if (options.actOrder) {
    const at::Tensor inverse = at::argsort(result.permutation);
    w = w.index_select(1, inverse);
    codes = codes.index_select(1, inverse);
  }
  checkSweptWeight(w, who, "GPTQ", report.damp);
  report.loss = swept.loss;

  QuantResult& quant = result.quant;
  quant.dequantized = w.to(weight.scalar_type());
  quant.codes = codes.to(spec.symmetric ? at::kChar : at::kByte);
  quant.scales = scales.to(at::kFloat);
  if (!spec.symmetric) quant.zeros = zeros.to(at::kByte);
  return result;
}

}  // namespace pareto
