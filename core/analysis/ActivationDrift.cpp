#include "analysis/ActivationDrift.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "eval/DecodeFidelity.h"
#include "eval/Continuations.h"
#include "util/Error.h"

namespace pareto {
namespace {

// Tokens whose decode steps happen: all of the continuation except a final EOS, which nothing consumes.
size_t consumedLength(const std::vector<TokenId>& continuation, const std::vector<TokenId>& eos) {
  if (!continuation.empty() && std::find(eos.begin(), eos.end(), continuation.back()) != eos.end())
    return continuation.size() - 1;
  return continuation.size();
}

// prompt + the consumed part of the continuation, right-padded to `width`. Teacher-forcing this reproduces the
// decode-time hidden states exactly (causal attention), and padding after the last real token reaches nothing.
at::Tensor paddedIds(const std::vector<std::vector<TokenId>>& prompts,
                     const std::vector<std::vector<TokenId>>& continuations, const std::vector<size_t>& consumed,
                     int64_t width) {
  const int64_t B = static_cast<int64_t>(prompts.size());
  std::vector<int64_t> flat(static_cast<size_t>(B * width), 0);
  for (int64_t b = 0; b < B; ++b) {
    auto out = std::copy(prompts[b].begin(), prompts[b].end(), flat.begin() + b * width);
    std::copy(continuations[b].begin(), continuations[b].begin() + consumed[b], out);
  }
  return at::tensor(flat, at::TensorOptions().dtype(at::kLong)).view({B, width});
}

// The input hidden state of each layer row in turn, one block at a time so that only the current one is alive.
class HiddenStates {
 public:
  HiddenStates(const LlamaModel& model, const at::Tensor& ids)
      : model_(model), ctx_(model.prepare(ids.size(0), ids.size(1), nullptr, nullptr)), x_(model.embed(ids)) {}
  const at::Tensor& current() const { return x_; }
  void runBlock(int64_t layer) { x_ = model_.block(layer, x_, ctx_); }

 private:
  const LlamaModel& model_;
  LlamaModel::Context ctx_;
  at::Tensor x_;
};

// The positions compared at each step: flattened [batch * width] row indices and the step of each.
struct StepRows {
  std::vector<int64_t> rows, steps;
  at::Tensor index;   // rows on the activations' device
};

// Adds ‖h_c − h_d‖ / ‖h_d‖ of every selected position to sums[step], in float32 on the device.
void accumulateDrift(const at::Tensor& dense, const at::Tensor& compressed, const StepRows& sel,
                     std::vector<double>& sums) {
  if (sel.rows.empty()) return;
  const int64_t H = dense.size(-1);
  at::Tensor d = dense.reshape({-1, H}).index_select(0, sel.index).to(at::kFloat);
  at::Tensor c = compressed.reshape({-1, H}).to(dense.device()).index_select(0, sel.index).to(at::kFloat);
  at::Tensor ratio = ((c - d).pow(2).sum(-1).sqrt() / d.pow(2).sum(-1).sqrt()).to(at::kCPU, at::kDouble).contiguous();
  const double* r = ratio.data_ptr<double>();
  for (size_t i = 0; i < sel.steps.size(); ++i) sums[static_cast<size_t>(sel.steps[i])] += r[i];
}

DriftCurves finishCurves(const std::vector<std::vector<double>>& sums, std::vector<int64_t> counts) {
  DriftCurves c;
  for (const auto& row : sums) {
    std::vector<double> mean(row.size(), std::numeric_limits<double>::quiet_NaN());
    for (size_t t = 0; t < row.size(); ++t)
      if (counts[t] > 0) mean[t] = row[t] / double(counts[t]);
    c.drift.push_back(std::move(mean));
  }
  c.counts = std::move(counts);
  summarizeDriftCurves(c);
  return c;
}

}  // namespace

void summarizeDriftCurves(DriftCurves& c) {
  const size_t reached = static_cast<size_t>(
      std::find(c.counts.begin(), c.counts.end(), int64_t{0}) - c.counts.begin());   // counts never grow with t
  c.summary.clear();
  for (const auto& row : c.drift)
    c.summary.push_back(summarizeDriftCurve(
        std::vector<double>(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(std::min(reached, row.size())))));
}

DriftCurveSummary summarizeDriftCurve(const std::vector<double>& curve) {
  DriftCurveSummary s;
  const size_t n = curve.size();
  if (n == 0) {
    s.plateau = std::numeric_limits<double>::quiet_NaN();
    return s;
  }
  const size_t quarter = std::max<size_t>(1, n / 4);
  double sum = 0;
  for (size_t t = n - quarter; t < n; ++t) sum += curve[t];
  s.plateau = sum / double(quarter);
  for (size_t t = 0; t < n; ++t)
    if (curve[t] >= 0.9 * s.plateau) {
      s.stepsTo90 = static_cast<int64_t>(t);
      break;
    }
  return s;
}

ActivationDriftResult activationDrift(const LlamaModel& dense, const LlamaModel& compressed,
                                      const std::vector<std::vector<TokenId>>& prompts,
                                      const ActivationDriftOptions& opts, const ProgressCallback& progress,
                                      const CancelToken* cancel) {
  const auto start = std::chrono::steady_clock::now();
  const size_t batch =
      checkComparisonInputs("activation drift", dense, compressed, prompts, opts.steps, "steps", opts.batch);
  const int64_t L = dense.numLayers();
  const size_t rows = static_cast<size_t>(L + 1), steps = static_cast<size_t>(opts.steps);

  std::vector<std::vector<double>> freeSums(rows, std::vector<double>(steps, 0.0)), forcedSums = freeSums;
  std::vector<int64_t> freeCounts(steps, 0), forcedCounts(steps, 0);
  for (size_t first = 0; first < prompts.size(); first += batch) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    const size_t last = std::min(prompts.size(), first + batch);
    // Step t consumes token t, so `steps` new tokens cover steps 0 .. steps-1.
    const ContinuationBatch b = continuationsOf(dense, compressed, prompts, first, last, opts.steps,
                                                opts.eosTokenIds, batch, opts.continuations);

    std::vector<size_t> denseSteps, ownSteps;
    int64_t width = 1;
    StepRows freeRows, forcedRows;
    for (size_t i = 0; i < b.prompts.size(); ++i) {
      denseSteps.push_back(consumedLength(b.dense[i], opts.eosTokenIds));
      ownSteps.push_back(consumedLength(b.compressed[i], opts.eosTokenIds));
      width = std::max<int64_t>(width, static_cast<int64_t>(b.prompts[i].size() + std::max(denseSteps[i], ownSteps[i])));
    }
    for (size_t i = 0; i < b.prompts.size(); ++i) {
      const int64_t rowStart = static_cast<int64_t>(i) * width + static_cast<int64_t>(b.prompts[i].size());
      for (size_t t = 0; t < denseSteps[i]; ++t) {
        forcedRows.rows.push_back(rowStart + static_cast<int64_t>(t));
        forcedRows.steps.push_back(static_cast<int64_t>(t));
        ++forcedCounts[t];
      }
      for (size_t t = 0; t < std::min(denseSteps[i], ownSteps[i]); ++t) {
        freeRows.rows.push_back(rowStart + static_cast<int64_t>(t));
        freeRows.steps.push_back(static_cast<int64_t>(t));
        ++freeCounts[t];
      }
    }

    at::Tensor denseIds = paddedIds(b.prompts, b.dense, denseSteps, width);
    at::Tensor ownIds = paddedIds(b.prompts, b.compressed, ownSteps, width);
    // Three streams of identical shape: dense on its tokens, compressed on its own, compressed on the dense
    // ones. Identical shapes also make a model compared with itself give exactly zero.
    HiddenStates denseStates(dense, denseIds), freeStates(compressed, ownIds), forcedStates(compressed, denseIds);
    const auto device = denseStates.current().device();
    const auto longOpts = at::TensorOptions().dtype(at::kLong);
    freeRows.index = at::tensor(freeRows.rows, longOpts).to(device);
    forcedRows.index = at::tensor(forcedRows.rows, longOpts).to(device);
    for (int64_t l = 0; l <= L; ++l) {
      if (l > 0) {
        if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
        denseStates.runBlock(l - 1);
        freeStates.runBlock(l - 1);
        forcedStates.runBlock(l - 1);
      }
      accumulateDrift(denseStates.current(), freeStates.current(), freeRows, freeSums[l]);
      accumulateDrift(denseStates.current(), forcedStates.current(), forcedRows, forcedSums[l]);
    }
    if (progress)
      progress({"activation drift", double(last) / prompts.size(),
                std::to_string(last) + "/" + std::to_string(prompts.size()) + " prompts"});
  }

  ActivationDriftResult r;
  r.layers = L + 1;
  r.steps = opts.steps;
  r.prompts = static_cast<int64_t>(prompts.size());
  r.free = finishCurves(freeSums, std::move(freeCounts));
  r.forced = finishCurves(forcedSums, std::move(forcedCounts));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace pareto
