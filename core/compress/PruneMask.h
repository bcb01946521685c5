// Turning importance scores into a keep-mask: the one selection rule that magnitude, Wanda and SparseGPT share,
// so that they differ only in their scores.
#pragma once

#include <ATen/core/Tensor.h>

#include "compress/SparsityPattern.h"

namespace pareto {

// Where an unstructured sparsity is counted: magnitude pruning ranks the whole tensor, Wanda ranks each output
// row on its own (its paper's finding: per-output comparison works better for LLMs), SparseGPT ranks each block.
enum class UnstructuredScope { WholeTensor, PerRow };

// scores: [rows, cols] float, larger = more important. Returns bool [rows, cols], true = kept, on the scores'
// device. N:M keeps the N largest scores of every M consecutive columns (cols % M == 0); unstructured removes
// exactly floor(s · count) smallest scores in each scope; among equal scores
// the choice is arbitrary, but the count is exact (a `<= threshold` rule would over-prune on ties).
at::Tensor keepMaskFromScores(const at::Tensor& scores, const SparsityPattern& pattern, UnstructuredScope scope);

}  // namespace pareto
