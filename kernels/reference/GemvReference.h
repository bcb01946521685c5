// CPU references of the packed-weight GEMV kernels. Each reads exactly the kernel layout its kernel reads (the
// headers beside the .cu files), dequantizes every weight by the format's definition (not by the kernels'
// tricks) and accumulates in float64: y[b, r] = Σ_c x[b, c] · Ŵ[r, c]. Host pointers; x in the problem's
// activation type; the result is float64 [batch, rows]. The tests compare each kernel with these, and the
// LibTorch wrappers use them as the CPU path. They accept exactly the problems their kernel accepts (its check
// function) and throw std::invalid_argument with that check's message otherwise.
#pragma once

#include <vector>

#include "BitmaskInt4Gemv.h"
#include "BitmaskNMGemv.h"
#include "QuantGroupGemv.h"
#include "SpqrGemv.h"

namespace pareto::kernels {

std::vector<double> bitmaskNMGemvReference(const GemvProblem& p, const BitmaskNMGemvWeight& w);
std::vector<double> quantGroupGemvReference(const GemvProblem& p, const QuantGroupGemvWeight& w);
std::vector<double> spqrGemvReference(const GemvProblem& p, const SpqrGemvWeight& w);
std::vector<double> bitmaskInt4GemvReference(const GemvProblem& p, const BitmaskInt4GemvWeight& w);

// The activation x[b, c] of a problem as float (fp16 or bf16 bits).
float activationAt(const GemvProblem& p, int b, int64_t c);

}  // namespace pareto::kernels
