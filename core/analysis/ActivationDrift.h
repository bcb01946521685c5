// Activation drift D(l, t) (DESIGN.md "Definitions"): how far a compressed model's hidden states move from its
// dense reference's over the decode steps, ‖h_c − h_d‖ / ‖h_d‖ averaged over prompts.
//
// Decode step t = 0 .. steps-1 is the forward pass that consumes generated token t, at position promptLen + t:
// up to the prompt both models have seen identical tokens, from there on each has seen its own continuation
// ("free") or both have seen the dense one ("forced", teacher-forced). The prefill of the prompt is not a step.
// An EOS token is never consumed (decoding stops when it is emitted), so a prompt whose continuation ends with
// EOS at token k contributes to steps 0 .. k-1 only; in the free variant a prompt counts at step t only when
// both models reach it. Means at each step are over the prompts that have it (counts are kept).
//
// Layer rows l = 0 .. numLayers-1 are the input hidden states of block l (row 0: the embeddings); row numLayers
// is the input of the final norm (the last block's output).
#pragma once

#include <cstdint>
#include <vector>

#include "model/LlamaModel.h"
#include "tokenizer/Tokenizer.h"
#include "util/Progress.h"

namespace pareto {

struct Continuations;

struct ActivationDriftOptions {
  int64_t steps = 128;                 // decode steps measured (each model generates this many tokens)
  int64_t batch = 0;                   // prompts per generation / forward batch; 0 picks one for the device
  std::vector<TokenId> eosTokenIds;
  // Continuations already generated for `steps` new tokens (eval/Continuations.h), shared with decode fidelity;
  // null: generated here.
  const Continuations* continuations = nullptr;
};

// Plateau and settling time of one D(l, ·) curve.
struct DriftCurveSummary {
  double plateau = 0;       // mean over the last quarter of the steps (at least one step); NaN for no steps
  int64_t stepsTo90 = -1;   // first step t with D(t) >= 0.9 * plateau; -1 for no steps
};

// curve: D at steps 0 .. n-1 (only steps some prompt reached). Pure, so its definition is testable on its own.
DriftCurveSummary summarizeDriftCurve(const std::vector<double>& curve);

struct DriftCurves {
  std::vector<std::vector<double>> drift;   // [numLayers + 1][steps]; NaN at steps no prompt reached
  std::vector<int64_t> counts;              // [steps] prompts averaged at each step
  std::vector<DriftCurveSummary> summary;   // per layer row, over the steps with counts > 0
};

// Fills c.summary from c.drift and c.counts: each layer row over the leading steps some prompt reached.
void summarizeDriftCurves(DriftCurves& c);

struct ActivationDriftResult {
  int64_t layers = 0;   // rows: numLayers + 1 (the last is the final norm input)
  int64_t steps = 0;
  int64_t prompts = 0;
  DriftCurves free;     // each model on its own greedy tokens
  DriftCurves forced;   // both on the dense model's tokens
  double seconds = 0;
};

// prompts: token ids with BOS already included, each non-empty. Throws InputError for models that cannot be
// compared (requireComparable) or bad options.
ActivationDriftResult activationDrift(const LlamaModel& dense, const LlamaModel& compressed,
                                      const std::vector<std::vector<TokenId>>& prompts,
                                      const ActivationDriftOptions& opts, const ProgressCallback& progress = {},
                                      const CancelToken* cancel = nullptr);

}  // namespace pareto
