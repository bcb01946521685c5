// The OBS sweep that SparseGPT, GPTQ and SpQR share (IST-DASLab `fasterprune` / `fasterquant`): W is fixed
// column by column in input order; after each column its error, scaled by U_jj (U the upper Cholesky factor of
// (H + λI)⁻¹), is compensated on the not-yet-fixed columns through row j of U, in lazy blocks so that the bulk of
// the update is one matrix product per block. What a column is fixed to (pruned, quantized, kept as an outlier),
// and when a mask or a grid is chosen, is the solver's: the hooks below. Also here: the start every solver shares
// (working copies, dead inputs, the damping options) and the check of the swept weight.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "compress/DampedHessian.h"

namespace pareto {

// The dtype the solvers work in: float64 for a float64 weight, float32 for any other.
at::ScalarType obsWorkType(const at::Tensor& weight);

// The start every OBS solver shares, after its own checks of the weight and options. Checks H (checkHessian) and
// `keep` (optional, bool of W's shape), throwing InputError naming `who` and `method`; then makes working copies of
// W and H in `work` on W's device, contiguous. An input that is never active (H_jj == 0) has no curvature: it gets
// H_jj = 1, so H stays invertible, and its weights are set to 0 (they cannot affect the calibration outputs; 0 is
// on every grid). Pruned weights (not in `keep`) are set to 0 as well.
struct ObsInputs {
  at::Tensor weight;        // [out, in]
  at::Tensor hessian;       // [in, in]
  at::Tensor pruned;        // bool [out, in] on W's device, the complement of `keep`; undefined without `keep`
  int64_t deadInputs = 0;   // inputs with H_jj == 0
};
ObsInputs obsInputs(const at::Tensor& weight, const at::Tensor& hessian, const at::Tensor& keep, at::ScalarType work,
                    const std::string& who, const std::string& method);

// The options every OBS solver takes: throws InputError naming `who` and `method` ("GPTQ", ...) for damp <= 0
// (or not finite), blockSize < 1, maxDampRetries < 0.
void checkObsOptions(double damp, int64_t blockSize, int maxDampRetries, const std::string& who,
                     const std::string& method);

// Copies the damping finally used into a solver's report (its fields damp, lambda, dampRetries).
template <class Report>
void noteDamping(Report& report, const Damping& damping) {
  report.damp = damping.damp;
  report.lambda = damping.lambda;
  report.dampRetries = damping.retries;
}

struct ObsSweepHooks;
struct ObsSweepResult;

// Where the sweep stands, for the hooks: in the lazy block [start, start + width) of W.
class ObsSweepState {
 public:
  int64_t start() const { return start_; }
  int64_t width() const { return block_.size(1); }
  // The block's current values [out, width]: its columns not yet fixed are updated for every error so far (a fixed
  // column holds its fixed value only up to rounding; the sweep writes back what fixColumn returned).
  const at::Tensor& block() const { return block_; }
  // The current, error-updated values of columns [column, column + count) of W, not yet fixed (column >= the
  // column being fixed); they may run past this block (a group longer than what is left of it). A view of the
  // block where they lie inside it.
  at::Tensor current(int64_t column, int64_t count) const;

 private:
  friend ObsSweepResult obsSweep(const at::Tensor&, const at::Tensor&, int64_t, const ObsSweepHooks&);
  ObsSweepState(at::Tensor w, at::Tensor hinv, at::Tensor block, at::Tensor errors, int64_t start)
      : w_(std::move(w)), hinv_(std::move(hinv)), block_(std::move(block)), errors_(std::move(errors)),
        start_(start) {}
  at::Tensor w_, hinv_, block_, errors_;  // W (earlier blocks fixed), U, the block, the block's errors so far
  int64_t start_;
  int64_t fixed_ = 0;                     // the block's columns fixed so far
};

struct ObsSweepHooks {
  // Optional: called when the sweep reaches a lazy block, before its first column (SparseGPT's unstructured mask).
  std::function<void(const ObsSweepState&)> beginBlock;
  // Required: column `column` of W (in sweep order) with its current values [out] is fixed to what this returns
  // ([out], W's dtype and device); a group's grid or an N:M mask is chosen here at the group's first column,
  // from state.current(column, groupSize). `values` is a view of the block: it changes once the hook returns.
  std::function<at::Tensor(const ObsSweepState& state, int64_t column, const at::Tensor& values)> fixColumn;
  // Optional: fixes every column of the block at once, with what fixColumn would give column by column up to
  // rounding (a fused kernel: compress/ObsBlockKernel.h): the block holds the fixed values afterwards, errorsT
  // [width, out] each column's error / U_jj, and `losses` [out] gains their squares. Returns false, having changed
  // nothing, where it cannot; the sweep then calls fixColumn.
  std::function<bool(const ObsSweepState& state, const at::Tensor& hinvBlock, const at::Tensor& errorsT,
                     const at::Tensor& losses)>
      fixBlock;
};

struct ObsSweepResult {
  at::Tensor weight;  // [out, in]: every column as fixed by the hook
  double loss = 0;    // Σ ½ (w − fixed)² / U_jj² over all weights (the reference's `Losses`), w as the sweep saw it
};

// weight: [out, in] floating; hinvUpper: [in, in] the upper Cholesky factor U of (H + λI)⁻¹ (DampedInverse::upper),
// same dtype and device; blockSize >= 1 columns per lazy block. Pure: the sweep works on its own copy of the weight.
ObsSweepResult obsSweep(const at::Tensor& weight, const at::Tensor& hinvUpper, int64_t blockSize,
                        const ObsSweepHooks& hooks);

// Throws Error "<who>: <method> produced NaN or infinite weights (damping <damp>); <cause>" unless every entry of
// the swept weight is finite.
void checkSweptWeight(const at::Tensor& weight, const std::string& who, const std::string& method, double damp,
                      const std::string& cause = "the Hessian is likely degenerate");

}  // namespace pareto
