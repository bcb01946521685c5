#include "compress/Gptq.h"

#include "compress/DampedHessian.h"
#include "compress/SolverInputs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>
#include <vector>

#include "util/Error.h"

namespace pareto {
namespace {

void checkOptions(const GptqOptions& options, const QuantSpec& spec, const std::string& who) {
  if (!std::isfinite(options.damp) || options.damp <= 0)
    throw InputError(who + ": GPTQ damp must be a positive fraction of mean(diag H), got " + shortDecimal(options.damp));
  if (options.blockSize < 1)
    throw InputError(who + ": GPTQ block size must be positive, got " + std::to_string(options.blockSize));
  if (options.maxDampRetries < 0)
    throw InputError(who + ": GPTQ damping retries must be >= 0, got " + std::to_string(options.maxDampRetries));
  if (options.actOrder && spec.granularity == QuantSpec::Granularity::Group && !options.staticGroups)
    throw InputError(who + ": GPTQ act-order with groups (" + spec.label() +
                     ") needs static groups; dynamic groups with act-order are not supported");
}

}  // namespace

GptqResult gptqQuantize(const at::Tensor& weight, const at::Tensor& hessian, const QuantSpec& spec,
                        const GptqOptions& options, const std::string& moduleName) {
  const std::string who = solverSubject(moduleName);
  checkQuantWeight(weight, spec, moduleName);
  checkOptions(options, spec, who);
  const int64_t rows = weight.size(0), columns = weight.size(1);
  checkHessian(hessian, columns, who);
  if (options.keep.defined() && (options.keep.scalar_type() != at::kBool || options.keep.sizes() != weight.sizes()))
    throw InputError(who + ": GPTQ keep mask must be bool of the weight's shape [" + std::to_string(rows) + ", " +
                     std::to_string(columns) + "]");
  using Granularity = QuantSpec::Granularity;
  const int64_t groups = spec.groupsPerRow(columns, who);
  const int64_t groupSize = spec.columnsPerGroup(columns);
  const bool dynamicGroups = spec.granularity == Granularity::Group && !options.staticGroups;

  GptqResult result;
  GptqReport& report = result.report;
  const at::ScalarType work = weight.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const bool copy = true;
  at::Tensor w = weight.to(weight.device(), work, /*non_blocking=*/false, copy).contiguous();
  at::Tensor h = hessian.to(weight.device(), work, /*non_blocking=*/false, copy).contiguous();

  // An input that is never active has no curvature: give it a unit one so H stays invertible, and drop its
  // weights, which cannot affect the calibration outputs (0 is on every grid, so they stay exactly 0).
  const at::Tensor dead = h.diagonal() == 0;
  report.deadInputs = dead.sum().item<int64_t>();
  h.diagonal().masked_fill_(dead, 1);
  w.masked_fill_(dead.unsqueeze(0), 0);
  // Pruned weights: 0 from the start (grids see them as 0), fixed at 0 in the sweep.
  at::Tensor pruned;
  if (options.keep.defined()) {
    pruned = options.keep.to(w.device()).logical_not();
    w.masked_fill_(pruned, 0);
  }

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
  report.damp = damped.damping.damp;
  report.lambda = damped.damping.lambda;
  report.dampRetries = damped.damping.retries;
  const at::Tensor& hinv = damped.upper;
  h = at::Tensor();  // free the damped H before the sweep

  at::Tensor codes = at::empty({rows, columns}, w.options());
  at::Tensor losses = at::zeros({rows}, w.options());
  at::Tensor scale, zero;  // the current column's grid: [gridRows]
  for (int64_t i1 = 0; i1 < columns; i1 += options.blockSize) {
    const int64_t count = std::min(options.blockSize, columns - i1), i2 = i1 + count;
    at::Tensor block = w.narrow(1, i1, count).clone();
    at::Tensor quantized = at::zeros_like(block);
    at::Tensor errors = at::zeros_like(block);
    const at::Tensor hinvBlock = hinv.narrow(0, i1, count).narrow(1, i1, count);

    for (int64_t i = 0; i < count; ++i) {
      const int64_t column = i1 + i;
      const int64_t original = options.actOrder ? order[column] : column;
      const int64_t group = original / groupSize;
      if (dynamicGroups && column % groupSize == 0) {
        const int64_t inBlock = std::min(groupSize, count - i);
        at::Tensor current = block.narrow(1, i, inBlock);
        if (inBlock < groupSize) {
          // The group runs past the block: its later columns still miss this block's updates so far.
          const int64_t beyond = groupSize - inBlock;
          at::Tensor later = w.narrow(1, i2, beyond);
          if (i > 0)
            later = later - at::matmul(errors.narrow(1, 0, i), hinv.narrow(0, i1, i).narrow(1, i2, beyond));
          current = at::cat({current, later}, 1);
        }
        // Dynamic groups never combine with act-order, so the group's columns are contiguous here too.
        if (pruned.defined()) current = current.masked_fill(pruned.narrow(1, column, groupSize), 0);
        const QuantGrid grid = findQuantGrid(current, spec, who);
        scales.select(1, group).copy_(grid.scale.squeeze(1));
        zeros.select(1, group).copy_(grid.zero.squeeze(1));
      }
      scale = scales.select(1, group);
      zero = zeros.select(1, group);

      const at::Tensor values = block.select(1, i);
      at::Tensor q = quantizeToCodes(values, scale, zero, spec);
      if (pruned.defined()) q = at::where(pruned.select(1, column), zero.expand_as(q), q);
      const at::Tensor dq = dequantizeCodes(q, scale, zero);
      codes.select(1, column).copy_(q);
      quantized.select(1, i).copy_(dq);
      obsFixColumn(block, hinvBlock, i, values, dq, errors, losses);
    }
    w.narrow(1, i1, count).copy_(quantized);
    obsPropagateBlock(w, errors, hinv, i1, count);
  }

  if (options.actOrder) {
    const at::Tensor inverse = at::argsort(result.permutation);
    w = w.index_select(1, inverse);
    codes = codes.index_select(1, inverse);
  }
  if (!at::isfinite(w).all().item<bool>())
    throw Error(who + ": GPTQ produced NaN or infinite weights (damping " + shortDecimal(report.damp) +
                "); the Hessian is likely degenerate");
  report.loss = losses.sum().item<double>() / 2;

  QuantResult& quant = result.quant;
  quant.dequantized = w.to(weight.scalar_type());
  quant.codes = codes.to(spec.symmetric ? at::kChar : at::kByte);
  quant.scales = scales.to(at::kFloat);
  if (!spec.symmetric) quant.zeros = zeros.to(at::kByte);
  return result;
}

}  // namespace pareto
