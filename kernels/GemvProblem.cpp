#include "GemvProblem.h"

#include <algorithm>
#include <optional>

#include "KernelSwitches.h"

namespace pareto::kernels {
namespace {
std::optional<GemvSplitForce> gForce;  // forceGemvSplit
}  // namespace

void forceGemvSplit(const GemvSplitForce* force) {
  if (force) gForce = *force;
  else gForce.reset();
}

bool isForcedSplit(const GemvSplit& s, const GemvSplitForce& force) {
  return s.chunksPerSplit == force.chunksPerSplit && s.ringGroupWarps == force.groupWarps &&
         (s.ringBlocks > 0) == force.balanced;
}

GemvSplit chooseGemvSplit(int64_t rows, int64_t chunks, int64_t chunkCols, int batch, int sumUnitCols,
                          int multiprocessors, size_t maxSharedBytes, size_t stagedBytesPerColumn,
                          size_t stagedFixedBytes, int blocksPerMultiprocessor, int64_t chunksPerSplit) {
  GemvSplit s;
  const int64_t groups = rowGroups(rows);
  // One wave: residentBlocks(batch) blocks on every multiprocessor. The kernel (GemvDriver.cuh) issues each
  // warp's first two chunks of weight loads before it stages x and keeps the next chunk in flight while it
  // computes one, so bytes in flight grow with the resident warps: at batch 1, 16 warps of two int4 chunks are
  // 128 KB a multiprocessor, twice what Little's law asks for at full bandwidth.
  //   - Splits only while the grid stays within the wave (floor): a grid a little larger than the wave runs its
  //     last blocks as a second wave, which for a GEMV of a few microseconds nearly doubles it.
  //   - v2 also kept every warp at least two chunks long, which left the 4096-row shapes at 2 blocks (8 warps)
  //     a multiprocessor. Now a warp may get a single chunk when the row groups are too few for the wave
  //     otherwise: its loads are issued before the staging, so they still overlap it (the second buffer goes
  //     unused). Shapes with more row groups keep 2 or more chunks a warp (qkv 6144 × 4096 at int4, batch 1: 2
  //     splits, 2 chunks a warp).
  //   - Row groups that fill the wave by themselves are not split (no partial-sum round trip).
  const int blocks = blocksPerMultiprocessor > 0 ? blocksPerMultiprocessor : residentBlocks(batch);
  const int64_t wave = int64_t(blocks) * std::max(1, multiprocessors);
  const int64_t maxSplits = std::max<int64_t>(1, chunks / kWarpsPerBlock);  // every warp of a full split: ≥ 1 chunk
  int64_t splits = std::clamp<int64_t>(wave / groups, 1, maxSplits);
  const auto sharedFor = [&](int64_t sp) {
    const int64_t perSplit = ceilDiv(chunks, sp);
    const int64_t slice = perSplit * chunkCols;
    const size_t perColumn = stagedBytesPerColumn > 0 ? stagedBytesPerColumn : sizeof(float) * size_t(batch);
    size_t bytes = perColumn * size_t(slice) + stagedFixedBytes;
    if (sumUnitCols > 0) bytes += sizeof(float) * size_t(batch) * size_t(ceilDiv(slice, sumUnitCols));
    return bytes;
  };
  while (sharedFor(splits) > maxSharedBytes && splits < chunks) ++splits;
  if (chunksPerSplit > 0 && sharedFor(ceilDiv(chunks, chunksPerSplit)) <= maxSharedBytes)
    splits = ceilDiv(chunks, chunksPerSplit);
  if (gForce && gForce->groupWarps == 1 && !gForce->balanced) {
    const int64_t per = gForce->chunksPerSplit, forced = per > 0 ? ceilDiv(chunks, per) : 0;
    if (per >= std::min<int64_t>(chunks, kWarpsPerBlock) && per <= chunks && sharedFor(forced) <= maxSharedBytes)
      splits = forced;
  }
  s.splits = int(splits);
  s.chunksPerSplit = ceilDiv(chunks, splits);
  s.splits = int(ceilDiv(chunks, s.chunksPerSplit));  // no empty split at the end
  s.sliceCols = s.chunksPerSplit * chunkCols;
  s.sharedBytes = sharedFor(s.splits);
  return s;
}

// The 16-byte vectors of x a ring block stages in one round of loads (GemvDriver.cuh stageSliceAs: 4 a thread).
constexpr int64_t kStageVectorsPerRound = int64_t(kRowsPerGroup) * kRingWarpsPerBlock * 4;

GemvSplit chooseRingSplit(int64_t rows, int64_t chunks, int64_t chunkCols, int batch, int sumUnitCols,
                          int multiprocessors, size_t maxSharedBytes, size_t stagedBytesPerColumn,
                          size_t stagedFixedBytes, int64_t minChunksPerWarp, int maxGroupWarps, int balanceMaxBatch) {
  const int64_t groups = rowGroups(rows);
  const int64_t wave = int64_t(kRingResidentBlocks) * std::max(1, multiprocessors);
  const int groupWarpsLimit = std::min(kRingWarpsPerBlock, maxGroupWarps > 0 ? maxGroupWarps : ringMaxGroupWarps());
  const auto sharedFor = [&](int64_t perSplit) {
    const int64_t slice = perSplit * chunkCols;
    size_t bytes = stagedBytesPerColumn * size_t(slice) + stagedFixedBytes;
    if (sumUnitCols > 0) bytes += sizeof(float) * size_t(batch) * size_t(ceilDiv(slice, sumUnitCols));
    return bytes;
  };
  int64_t best = 0, bestSplits = 0;
  int bestWarps = 1;
  double bestCost = 0;
  // At least minChunksPerWarp (2 by default) chunks a warp where there are that many: a block's fixed cost is
  // about 2 chunks' worth of instructions (Nsight Compute, NOTES v6c), and o (4096 × 4096) measured 10.0 µs at 1
  // chunk a warp against 8.8 at 2. Warps sharing a row group each get at least that many.
  const int64_t minPerWarp = std::max<int64_t>(1, minChunksPerWarp);
  for (int groupWarps = 1; groupWarps <= groupWarpsLimit; groupWarps *= 2) {
    const int64_t blocks = ceilDiv(groups, kRingWarpsPerBlock / groupWarps);
    const int64_t minPerSplit = groupWarps == 1 ? std::min(minPerWarp, chunks) : minPerWarp * groupWarps;
    if (minPerSplit > chunks) break;
    for (int64_t perSplit = chunks; perSplit >= minPerSplit; --perSplit) {
      // A warp a row group takes its least split even where it does not fit (the caller's problem then); shared
      // row groups only where it fits.
      if (sharedFor(perSplit) > maxSharedBytes && (groupWarps > 1 || perSplit > minPerSplit)) continue;
      const int64_t splits = ceilDiv(chunks, perSplit);
      // In chunks of a warp's chain (bench/NOTES.md "the split sweep": the weights that chose best over every split
      // of the Llama-3.1-8B shapes, five formats, batch 1-16): the warp's chunks, a block's fixed cost (2), a split
      // combine's (2, and 1/8 a split for the partial sums), each staging round of x past the first (1/2), and one
      // less where warps share a row group (their parts end together and meet in shared memory).
      double cost = double(ceilDiv(perSplit, groupWarps) + 2);
      if (splits > 1) cost += 2.0 + 0.125 * double(splits);
      const int64_t vectors = int64_t(batch) * perSplit * chunkCols / 8;
      cost += 0.5 * double(std::max<int64_t>(0, ceilDiv(vectors, kStageVectorsPerRound) - 1));
      if (groupWarps > 1) cost -= 1.0;
      cost *= double(ceilDiv(blocks * splits, wave));
      // Ties go to fewer splits (with a warp a row group, the first found: perSplit falls, splits grow).
      if (best == 0 || cost < bestCost || (cost == bestCost && splits < bestSplits))
        best = perSplit, bestSplits = splits, bestWarps = groupWarps, bestCost = cost;
    }
  }
  bool balanced = ringBalancedEnabled() && batch <= balanceMaxBatch;
  if (gForce) {
    const int warps = gForce->groupWarps;
    const int64_t per = gForce->chunksPerSplit;
    if (warps >= 1 && warps <= groupWarpsLimit && (warps & (warps - 1)) == 0 && per >= warps && per <= chunks &&
        sharedFor(per) <= maxSharedBytes)
      best = per, bestWarps = warps, balanced = gForce->balanced;
  }
  GemvSplit s;
  s.chunksPerSplit = best;
  s.splits = int(ceilDiv(chunks, s.chunksPerSplit));  // no empty split at the end
  s.sliceCols = s.chunksPerSplit * chunkCols;
  s.sharedBytes = sharedFor(s.chunksPerSplit);
  s.ringGroupWarps = bestWarps;
  if (balanced)
    s.ringBlocks = ringBalancedBlocks(groups, bestWarps, s.splits, wave);
  return s;
}

int64_t ringBalancedBlocks(int64_t groups, int groupWarps, int splits, int64_t wave) {
  const int64_t perBlock = kRingWarpsPerBlock / std::max(1, groupWarps);
  const int64_t uniform = ceilDiv(groups, perBlock);
  const int64_t places = wave / std::max(1, splits);  // blocks a split in one wave
  const int64_t multiprocessors = wave / kRingResidentBlocks;
  // Uniform blocks that fill 90% of the wave or more leave too little to even out for the extra stagings of x that
  // more, smaller blocks cost (down at batch 4-8, 32 → 33 blocks a split: +1 to +5%; bench/NOTES.md "v6w, v6x and
  // v6y measured").
  if (perBlock < 2 || 10 * uniform * splits > 9 * wave || uniform * splits <= multiprocessors) return 0;
  const int64_t blocks = std::min(places, groups);
  return blocks > uniform ? blocks : 0;
}

bool ringBalancedEnabled() {
  static const bool on = kernelSwitch("PARETO_RING_BALANCED") != SwitchSetting::Off;
  return on;
}

bool ringSpreadEnabled() {
  static const bool on = kernelSwitch("PARETO_RING_SPREAD") == SwitchSetting::On;
  return on;
}

bool splitCombineWideEnabled() {
  static const bool on = kernelSwitch("PARETO_SPLIT_COMBINE_WIDE") != SwitchSetting::Off;
  return on;
}

bool normInStagingEnabled() {
  static const bool enabled = kernelSwitch("PARETO_NORM_ONE_ROUND") != SwitchSetting::Off;
  return enabled;
}

int ringMaxGroupWarps() {
  static const int warps = kernelSwitch("PARETO_RING_GROUP_WARPS") == SwitchSetting::Off ? 1 : kRingWarpsPerBlock;
  return warps;
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
  // Blocks stage x while others already store y: an output over its own input would be read half written.
  if (p.x == p.y) return "the output must not be the input (blocks still read x while others store y)";
  if (p.input == GemvInput::RmsNorm) {
    if (p.normWeight == nullptr || reinterpret_cast<uintptr_t>(p.normWeight) % 16 != 0)
      return "the RMSNorm weight is missing or not 16-byte aligned";
    if (p.cols > kGemvMaxNormCols)
      return "an RMSNorm folded into the GEMV takes at most " + std::to_string(kGemvMaxNormCols) + " columns, not " +
             std::to_string(p.cols);
    if (!(p.eps >= 0.f)) return "RMSNorm eps must be ≥ 0";
  }
  return {};
}

}  // namespace pareto::kernels
