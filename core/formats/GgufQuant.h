// llama.cpp's quantization grids (formats/GgufBlocks.h) as Pareto uses them: a block's grid is chosen from its
// weights, each weight gets the code nearest to it on that grid, and the codes and the grid's stored fields are
// packed into ggml's bytes. Splitting it so lets a solver (GPTQ) choose the grid of a block when it reaches the
// block and then pick codes one column at a time on exactly the grid that will be stored; round-to-nearest is
// the same three steps at once (quantizeRows).
//
// Every value is decoded as ggml's dequantize_row_* defines it, from the stored fp16 and integer fields, so
// what Pareto runs and what llama.cpp reads are the same weights.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "formats/GgufBlocks.h"

namespace pareto {
namespace gguf {

// The grid of one block of one row, as stored: w = scale[s] · code − offset[s] for the weights of sub-block s
// (Q8_0 and Q4_0: one sub-block; Q4_K: 8 of 32; Q6_K: 16 of 16). Codes run over [codeMin, codeMax].
struct BlockGrid {
  TensorType type = TensorType::Q8_0;
  int subBlockWeights = 32;
  int codeMin = 0, codeMax = 0;
  Fp16Bits d = 0, dmin = 0;            // the stored super-block (or block) scales
  std::array<uint8_t, 8> sc{}, m{};    // Q4_K: 6-bit sub-block scales and mins
  std::array<int8_t, 16> sc6{};        // Q6_K: int8 sub-block scales

  // The value code `code` stands for at weight `position` of the block, exactly as the decoder computes it.
  float value(int position, int code) const;
  // The code whose value is nearest to x at `position` (ties to the lower code), within [codeMin, codeMax].
  int nearestCode(int position, float x) const;
};

// The type a row too narrow for whole 256-weight super-blocks takes instead (q4_k → q4_0, q6_k → q8_0, about the
// same size, as llama-quantize falls back); a 32-weight type is its own.
TensorType narrowRowType(TensorType type);

// The round-to-nearest grid of one block of weights (traits(type).weightsPerBlock of them): each (sub-)block's
// range mapped onto its codes, the sub-block scales then quantized as the type stores them.
BlockGrid chooseGrid(TensorType type, const float* weights);
// Packs a block: codes[i] in [grid.codeMin, grid.codeMax] for each of its weights.
void encodeBlock(const BlockGrid& grid, const int* codes, uint8_t* out);
// The weights a stored block stands for.
void decodeBlock(TensorType type, const uint8_t* block, float* out);

// A [rows, cols] float matrix (row-major) quantized to nearest, row by row; cols a multiple of the block.
std::vector<uint8_t> quantizeRows(TensorType type, const float* weights, int64_t rows, int64_t cols);
void dequantizeRows(TensorType type, const uint8_t* data, int64_t rows, int64_t cols, float* out);

}  // namespace gguf
}  // namespace pareto
