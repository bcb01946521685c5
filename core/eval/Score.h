// Teacher-forced scoring of one token sequence: the summed negative log-likelihood of each next token and the
// distribution after the last one (what `pareto-cli score` reports and the golden files record).
#pragma once

#include <ATen/core/Tensor.h>
#include <vector>

#include "model/LlamaModel.h"
#include "tokenizer/Tokenizer.h"

namespace pareto {

struct ScoreResult {
  double nllSum = 0;               // over the ids.size()-1 next-token predictions
  at::Tensor lastLogits;           // float32 [vocab] on the CPU
  std::vector<TokenId> lastTop10;  // ids of the ten largest last logits, largest first
};

ScoreResult scoreSequence(const LlamaModel& model, const std::vector<TokenId>& ids);

}  // namespace pareto
