// Quantization onto llama.cpp's GGUF grids (formats/GgufQuant.h), so that the codes a solver picks are the bytes
// a GGUF file stores:
//   - round-to-nearest: each block's grid chosen from its weights, each weight's nearest code; the same bytes as
//     `export gguf --type …` writes for the dense weight;
//   - GPTQ: the OBS sweep of compress/ObsSweep.h in input order, where the grid of each block (for q4_k and q6_k
//     the whole 256-weight super-block: d, dmin and the sub-block scales together) is chosen from the current,
//     error-updated weights when the sweep reaches the block's first column, and each column then takes its
//     nearest code on exactly that stored grid. The lazy blocks of the sweep are whole GGUF blocks (the asked
//     width rounded up to a multiple of the block). No act-order: a block is a run of consecutive columns in their
//     original order, so a permuted sweep could not choose the stored codes.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "compress/Gptq.h"
#include "formats/GgufBlocks.h"

namespace pareto {

struct GgufQuantResult {
  at::Tensor blocks;        // uint8 [out, gguf::rowBytes(type, in)]: each row's blocks back to back
  at::Tensor dequantized;   // [out, in], the weight's dtype and device: what the blocks decode to (ggml's decoder)
};

// weight: [out, in] floating, in a multiple of the type's block; type a block-quantized one. InputError naming the
// module otherwise.
GgufQuantResult ggufRtnQuantize(const at::Tensor& weight, gguf::TensorType type, const std::string& moduleName = {});

struct GgufGptqOptions {
  double damp = 0.01;        // λ = damp · mean(diag H) is added to the diagonal; must be > 0
  int64_t blockSize = 128;   // columns per lazy block, rounded up to whole GGUF blocks
  int maxDampRetries = 4;    // times λ is multiplied by 10 when H + λI is not positive definite
};

struct GgufGptqResult {
  GgufQuantResult quant;
  GptqReport report;         // damping, dead inputs, the sweep's loss Σ ½ (w − q)² / U_jj²
};

// weight as for ggufRtnQuantize; hessian: [in, in] Σ x xᵀ, any floating dtype and device, never modified. The
// work runs on the weight's device in float32 (float64 for a float64 weight); grids and codes are chosen on the
// host from float32 values, as RTN chooses them. Throws InputError for bad input, Error when H stays
// non-positive-definite after every retry or the result is not finite.
GgufGptqResult ggufGptqQuantize(const at::Tensor& weight, const at::Tensor& hessian, gguf::TensorType type,
                                const GgufGptqOptions& options = {}, const std::string& moduleName = {});

}  // namespace pareto
