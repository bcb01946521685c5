#include "compress/ObsSweep.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "compress/SolveTimings.h"
#include "compress/SolverInputs.h"
#include "util/Error.h"

namespace pareto {
namespace {

// Column i of `block` (the lazy block of W) was `original` and is now `fixed`: its error scaled by U_ii goes to
// errors[:, i] and `losses`, and is compensated on the block's later columns through row i of U.
void fixInBlock(const at::Tensor& block, const at::Tensor& hinvBlock, int64_t i, const at::Tensor& original,
                const at::Tensor& fixed, const at::Tensor& errors, const at::Tensor& losses) {
  const int64_t count = block.size(1);
  const at::Tensor error = (original - fixed) / hinvBlock.select(0, i).select(0, i);
  losses.add_(error.square());
  block.narrow(1, i, count - i).addr_(error, hinvBlock.select(0, i).narrow(0, i, count - i), 1, -1);
  errors.select(1, i).copy_(error);
}

// After a lazy block [i1, i1 + count): its accumulated errors update every later column of `w` in one product.
void propagateBlock(const at::Tensor& w, const at::Tensor& errors, const at::Tensor& hinv, int64_t i1,
                    int64_t count) {
  const int64_t i2 = i1 + count, columns = w.size(1);
  if (i2 < columns)
    w.narrow(1, i2, columns - i2).addmm_(errors, hinv.narrow(0, i1, count).narrow(1, i2, columns - i2), 1, -1);
}

}  // namespace

at::ScalarType obsWorkType(const at::Tensor& weight) {
  return weight.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

ObsInputs obsInputs(const at::Tensor& weight, const at::Tensor& hessian, const at::Tensor& keep, at::ScalarType work,
                    const std::string& who, const std::string& method) {
  const SolveTimings::Step step("inputs", weight);
  const int64_t rows = weight.size(0), columns = weight.size(1);
  checkHessian(hessian, columns, who);
  if (keep.defined() && (keep.scalar_type() != at::kBool || keep.sizes() != weight.sizes()))
    throw InputError(who + ": " + method + " keep mask must be bool of the weight's shape [" + std::to_string(rows) +
                     ", " + std::to_string(columns) + "]");
  ObsInputs inputs;
  inputs.weight = weight.to(weight.device(), work, /*non_blocking=*/false, /*copy=*/true).contiguous();
  inputs.hessian = hessian.to(weight.device(), work, /*non_blocking=*/false, /*copy=*/true).contiguous();
  const at::Tensor dead = inputs.hessian.diagonal() == 0;
  inputs.deadInputs = dead.sum().item<int64_t>();
  inputs.hessian.diagonal().masked_fill_(dead, 1);
  inputs.weight.masked_fill_(dead.unsqueeze(0), 0);
  if (keep.defined()) {
    inputs.pruned = keep.to(inputs.weight.device()).logical_not();
    inputs.weight.masked_fill_(inputs.pruned, 0);
  }
  return inputs;
}

void checkObsOptions(double damp, int64_t blockSize, int maxDampRetries, const std::string& who,
                     const std::string& method) {
  if (!std::isfinite(damp) || damp <= 0)
    throw InputError(who + ": " + method + " damp must be a positive fraction of mean(diag H), got " +
                     shortDecimal(damp));
  if (blockSize < 1)
    throw InputError(who + ": " + method + " block size must be positive, got " + std::to_string(blockSize));
  if (maxDampRetries < 0)
    throw InputError(who + ": " + method + " damping retries must be >= 0, got " + std::to_string(maxDampRetries));
}

at::Tensor ObsSweepState::current(int64_t column, int64_t count) const {
  const int64_t i = column - start_, width = block_.size(1);
  const int64_t inBlock = std::min(count, width - i);
  at::Tensor values = block_.narrow(1, i, inBlock);
  if (inBlock == count) return values;
  // The columns past the block still miss this block's errors so far.
  const int64_t i2 = start_ + width, beyond = count - inBlock;
  at::Tensor later = w_.narrow(1, i2, beyond);
  if (fixed_ > 0)
    later = later - at::matmul(errors_.narrow(1, 0, fixed_), hinv_.narrow(0, start_, fixed_).narrow(1, i2, beyond));
  return at::cat({values, later}, 1);
}

ObsSweepResult obsSweep(const at::Tensor& weight, const at::Tensor& hinvUpper, int64_t blockSize,
                        const ObsSweepHooks& hooks) {
  using Step = SolveTimings::Step;
  const Step step("sweep", weight);
  const at::Tensor w = weight.clone(at::MemoryFormat::Contiguous);
  const int64_t columns = w.size(1);
  const at::Tensor losses = at::zeros({w.size(0)}, w.options());
  for (int64_t i1 = 0; i1 < columns; i1 += blockSize) {
    std::optional<Step> part(std::in_place, "sweep: block setup, host", w, SolveTimings::Until::HostDone);
    const int64_t count = std::min(blockSize, columns - i1);
    const at::Tensor block = w.narrow(1, i1, count).clone();
    const at::Tensor fixed = at::zeros_like(block);
    const at::Tensor errors = at::zeros_like(block);
    const at::Tensor hinvBlock = hinvUpper.narrow(0, i1, count).narrow(1, i1, count);
    ObsSweepState state(w, hinvUpper, block, errors, i1);
    if (hooks.beginBlock) hooks.beginBlock(state);
    if (hooks.fixBlock) {
      const at::Tensor errorsT = at::empty({count, w.size(0)}, w.options());
      part.emplace("sweep: block kernel, host", w, SolveTimings::Until::HostDone);
      if (hooks.fixBlock(state, hinvBlock, errorsT, losses)) {
        part.emplace("sweep: propagate, host", w, SolveTimings::Until::HostDone);
        w.narrow(1, i1, count).copy_(block);
        propagateBlock(w, errorsT.t(), hinvUpper, i1, count);
        continue;
      }
    }
    part.emplace("sweep: column by column, host", w, SolveTimings::Until::HostDone);
    for (int64_t i = 0; i < count; ++i) {
      state.fixed_ = i;
      const at::Tensor values = block.select(1, i);
      const at::Tensor column = hooks.fixColumn(state, i1 + i, values);
      fixed.select(1, i).copy_(column);
      fixInBlock(block, hinvBlock, i, values, column, errors, losses);
    }
    part.emplace("sweep: propagate, host", w, SolveTimings::Until::HostDone);
    w.narrow(1, i1, count).copy_(fixed);
    propagateBlock(w, errors, hinvUpper, i1, count);
  }
  const Step rest("sweep: the device's queued work", w);
  return {w, losses.sum().item<double>() / 2};
}

void checkSweptWeight(const at::Tensor& weight, const std::string& who, const std::string& method, double damp,
                      const std::string& cause) {
  if (!at::isfinite(weight).all().item<bool>())
    throw Error(who + ": " + method + " produced NaN or infinite weights (damping " + shortDecimal(damp) + "); " +
                cause);
}

}  // namespace pareto
