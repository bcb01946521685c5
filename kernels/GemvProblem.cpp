#include "GemvProblem.h"

#include <algorithm>

namespace pareto::kernels {

GemvSplit chooseGemvSplit(int64_t rows, int64_t chunks, int64_t chunkCols, int batch, int sumUnitCols,
                          int multiprocessors, size_t maxSharedBytes) {
  GemvSplit s;
  const int64_t groups = rowGroups(rows);
  const int64_t targetBlocks = 4 * std::max(1, multiprocessors);
  // At least two chunks per warp, so that a warp's loads of one chunk overlap the arithmetic of the previous.
  const int64_t maxSplits = std::max<int64_t>(1, chunks / (2 * kWarpsPerBlock));
  int64_t splits = std::clamp<int64_t>(ceilDiv(targetBlocks, groups), 1, maxSplits);
  const auto sharedFor = [&](int64_t sp) {
    const int64_t perSplit = ceilDiv(chunks, sp);
    const int64_t slice = perSplit * chunkCols;
    size_t bytes = sizeof(float) * size_t(batch) * size_t(slice);
    if (sumUnitCols > 0) bytes += sizeof(float) * size_t(batch) * size_t(ceilDiv(slice, sumUnitCols));
    return bytes;
  };
  while (sharedFor(splits) > maxSharedBytes && splits < chunks) ++splits;
  s.splits = int(splits);
  s.chunksPerSplit = ceilDiv(chunks, splits);
  s.splits = int(ceilDiv(chunks, s.chunksPerSplit));  // no empty split at the end
  s.sliceCols = s.chunksPerSplit * chunkCols;
  s.sharedBytes = sharedFor(s.splits);
  return s;
}

size_t gemvPartialFloats(const GemvProblem& p, const GemvSplit& s) {
  if (s.splits <= 1) return 0;
  return size_t(s.splits) * size_t(p.batch) * size_t(rowGroups(p.rows) * kRowsPerGroup);
}

std::string checkGemvProblem(const GemvProblem& p) {
  if (p.rows <= 0 || p.cols <= 0)
    return "empty weight (" + std::to_string(p.rows) + " x " + std::to_string(p.cols) + ")";
  if (p.batch < 1 || p.batch > kMaxBatch)
    return "batch " + std::to_string(p.batch) + " is outside 1.." + std::to_string(kMaxBatch);
  if (p.cols % 8 != 0)
    return "columns (" + std::to_string(p.cols) + ") must be a multiple of 8 (activations are read 16 bytes at a time)";
  if (p.x == nullptr || p.y == nullptr) return "missing activation or output pointer";
  if (reinterpret_cast<uintptr_t>(p.x) % 16 != 0 || reinterpret_cast<uintptr_t>(p.y) % 2 != 0)
    return "activations must be 16-byte aligned and outputs 2-byte aligned";
  return {};
}

}  // namespace pareto::kernels
