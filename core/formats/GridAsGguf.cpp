#include "formats/GridAsGguf.h"

#include <ATen/ATen.h>

#include <cstring>
#include <vector>

#include "formats/GgufQuant.h"
#include "util/Error.h"

namespace pareto {

std::optional<gguf::TensorType> ggufTypeOfGrid(const QuantGroupWeight& q) {
  // A per-tensor grid has one scale row for every row; ggml's blocks each carry their own.
  if (!q.symmetric || q.groupSize != 32 || q.scales.size(0) != q.rows) return std::nullopt;
  if (q.bits == 8) return gguf::TensorType::Q8_0;
  if (q.bits == 4) return gguf::TensorType::Q4_0;
  return std::nullopt;
}

at::Tensor gridAsGgufBlocks(const QuantGroupWeight& q) {
  const std::optional<gguf::TensorType> type = ggufTypeOfGrid(q);
  if (!type)
    throw InputError("int" + std::to_string(q.bits) + (q.symmetric ? "" : " asymmetric") + " groups of " +
                     std::to_string(q.groupSize) + " are no ggml block type (q8_0 and q4_0 are symmetric groups of 32)");
  q.checkConsistent();
  const at::Tensor codes = q.unpackCodes().to(at::kCPU, at::kInt).contiguous();
  const at::Tensor scales = q.scales.to(at::kCPU, at::kHalf).contiguous();
  const int64_t blocks = q.cols / 32, rowBytes = gguf::rowBytes(*type, q.cols);
  const int64_t blockBytes = gguf::traits(*type).bytesPerBlock;
  at::Tensor out = at::empty({q.rows, rowBytes}, at::TensorOptions().dtype(at::kByte));
  const int32_t* c = codes.data_ptr<int32_t>();
  const at::Half* s = scales.data_ptr<at::Half>();
  uint8_t* o = out.data_ptr<uint8_t>();
  gguf::BlockGrid grid;
  grid.type = *type;
  grid.subBlockWeights = 32;
  grid.codeMin = *type == gguf::TensorType::Q8_0 ? -128 : 0;
  grid.codeMax = *type == gguf::TensorType::Q8_0 ? 127 : 15;
  const int bias = *type == gguf::TensorType::Q4_0 ? 8 : 0;
  std::vector<int> block(32);
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      grid.d = s[r * blocks + b].x;
      for (int i = 0; i < 32; ++i) block[size_t(i)] = c[r * q.cols + b * 32 + i] + bias;
      gguf::encodeBlock(grid, block.data(), o + r * rowBytes + b * blockBytes);
    }
  return out;
}

}  // namespace pareto
