// Host-side checks ("can implement") and split choices of the packed-weight GEMV kernels. They live apart from
// the .cu files so that the CPU references, which accept exactly what the kernels accept, use them on machines
// without nvcc.
#include <cstdint>
#include <string>

#include "BitmaskInt4Gemv.h"
#include "BitmaskNMGemv.h"
#include "KernelSwitches.h"
#include "QuantGroupGemv.h"
#include "SpqrGemv.h"

namespace pareto::kernels {

std::string checkBitmaskNMGemv(const GemvProblem& p, const BitmaskNMGemvWeight& w) {
  if (auto e = checkGemvProblem(p); !e.empty()) return e;
  if (foldsWork(p))
    return "the bitmask N:M kernels take no folded input or accumulate (their step measured slower folded)";
  if (w.m <= 0 || w.n <= 0 || w.n > w.m || 32 % w.m != 0)
    return "pattern " + std::to_string(w.n) + ":" + std::to_string(w.m) + " is not N:M with M dividing 32";
  const int k = bitmaskKeptPerWord(w.n, w.m);
  if (k != 8 && k != 16 && k != 24)
    return "pattern " + std::to_string(w.n) + ":" + std::to_string(w.m) + " keeps " + std::to_string(k) +
           " of 32 columns; the kernel is compiled for 8, 16 and 24 (25%, 50%, 75% density)";
  if (p.cols % 32 != 0) return "columns (" + std::to_string(p.cols) + ") must be a multiple of 32";
  if (w.masks == nullptr || w.values == nullptr) return "missing mask or value pointer";
  if (reinterpret_cast<uintptr_t>(w.masks) % 16 != 0 || reinterpret_cast<uintptr_t>(w.values) % 16 != 0)
    return "masks and values must be 16-byte aligned (the kernel reads them with 16-byte loads)";
  return {};
}

bool bitmaskUsesTensorCores(int n, int m, int compiledBatch) {
  // PARETO_BITMASK_MMA: unset = the policy, 0 = the FFMA path everywhere, 1 = the tensor cores wherever they can.
  static const SwitchSetting mode = kernelSwitch("PARETO_BITMASK_MMA");
  if (mode == SwitchSetting::Off) return false;
  if (n == 2 && m == 4) return compiledBatch >= 4 || mode == SwitchSetting::On;
  if (bitmaskKeptPerWord(n, m) == 16) return compiledBatch >= kBitmaskScatterMinBatch || mode == SwitchSetting::On;
  return false;
}

GemvSplit bitmaskNMGemvSplit(const GemvProblem& p, const BitmaskNMGemvWeight& w, int multiprocessors) {
  const int batch = compiledBatch(p.batch);
  if (bitmaskUsesTensorCores(w.n, w.m, batch)) {
    // 16-bit rows of x padded by kBitmaskSparseStagePadHalves (2:4) or kBitmaskStagePadHalves, the scatter path's
    // dense tiles after them, and the warps' rings (+16 bytes of alignment). The scatter path's chunks are longer
    // (the scatter costs about as much as the rest of a chunk) and its tiles leave room for 3 staged chunks at
    // batch 16: the default minimum of 2.
    const bool scatter = !(w.n == 2 && w.m == 4);
    const size_t pad = size_t(scatter ? kBitmaskStagePadHalves : kBitmaskSparseStagePadHalves);
    return chooseRingSplit(p.rows, ceilDiv(p.cols, kBitmaskMmaChunkCols), kBitmaskMmaChunkCols, batch, 0,
                           multiprocessors, kRingMaxSharedBytes, 2 * size_t(batch),
                           2 * size_t(batch) * pad + (scatter ? kBitmaskScatterTilesBytes : 0) + 16 + kBitmaskRingBytes,
                           scatter ? 2 : kBitmaskRingMinChunksPerWarp);
  }
  // At batch 1 a row of at most kBitmaskFfmaShortRowChunks layout chunks in splits of kBitmaskFfmaChunksPerSplit.
  const int64_t chunks = bitmaskChunks(p.cols);
  const bool shortRow = compiledBatch(p.batch) == 1 && chunks <= kBitmaskFfmaShortRowChunks;
  return chooseGemvSplit(p.rows, chunks, kBitmaskChunkCols, compiledBatch(p.batch), 0, multiprocessors, kMaxStagedBytes,
                         0, 0, 0, shortRow ? kBitmaskFfmaChunksPerSplit : 0);
}

std::string checkQuantGroupGemv(const GemvProblem& p, const QuantGroupGemvWeight& w) {
  if (auto e = checkGemvProblem(p); !e.empty()) return e;
  if (w.bits != 4 && w.bits != 8) return std::to_string(w.bits) + "-bit codes: the kernel reads 4 and 8 bits";
  const int64_t chunk = quantChunkCols(w.bits);
  const bool perChannel = w.groupSize == p.cols;
  if (w.groupSize <= 0 || p.cols % w.groupSize != 0)
    return "group size " + std::to_string(w.groupSize) + " does not divide the " + std::to_string(p.cols) +
           " columns";
  if (!perChannel && (w.groupSize % 32 != 0 || (w.groupSize < chunk ? chunk % w.groupSize : w.groupSize % chunk)))
    return "group size " + std::to_string(w.groupSize) + " must be 32, 64, 128, a multiple of " +
           std::to_string(chunk) + ", or the whole row";
  if (w.bits == 4 && p.cols % 2 != 0) return "4-bit codes need an even number of columns";
  if (w.scaleColumns != quantScaleColumns(p.cols, w.groupSize, w.bits)) return "scale layout does not match the shape";
  if (w.codes == nullptr || w.scales == nullptr || (!w.symmetric && w.zeros == nullptr))
    return "missing code, scale or zero pointer";
  if (reinterpret_cast<uintptr_t>(w.codes) % 16 != 0 || reinterpret_cast<uintptr_t>(w.scales) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(w.zeros) % 16 != 0)
    return "codes, scales and zeros must be 16-byte aligned (the kernel copies them 16 bytes at a time)";
  return {};
}

bool quantUsesTensorCores(int bits, ActivationType type, int compiledBatch) {
  // PARETO_QUANT_MMA: unset = the policy, 0 = the FFMA path everywhere, 1 = the tensor cores wherever they can.
  static const SwitchSetting mode = kernelSwitch("PARETO_QUANT_MMA");
  if (mode == SwitchSetting::Off) return false;
  return bits == 4 || (type == ActivationType::Float16 && (compiledBatch >= 2 || mode == SwitchSetting::On));
}

bool quantOddExponent() {
  static const bool enabled = kernelSwitch("PARETO_QUANT_ODD") != SwitchSetting::Off;
  return enabled;
}

bool quantDeepRing(int bits, ActivationType type, int compiledBatch) {
  static const bool enabled = kernelSwitch("PARETO_QUANT_DEEP_RING") == SwitchSetting::On;
  return enabled && bits == 4 && type == ActivationType::Float16 && compiledBatch <= kQuantDeepRingMaxBatch &&
         quantUsesTensorCores(bits, type, compiledBatch);
}

int quantRingHalves(int bits, ActivationType type, int compiledBatch) {
  // PARETO_QUANT_HALVES=0: whole chunks everywhere (the kernel compiles halves for batch 8 and 16, and with v7d for
  // int4 fp16 at 1-4).
  static const bool enabled = kernelSwitch("PARETO_QUANT_HALVES") != SwitchSetting::Off;
  if (!enabled) return 1;
  if (quantDeepRing(bits, type, compiledBatch)) return 2;
  return quantUsesTensorCores(bits, type, compiledBatch) && compiledBatch >= quantHalvesMinBatch(bits) ? 2 : 1;
}

int quantRingStages(int bits, ActivationType type, int compiledBatch) {
  if (quantRingHalves(bits, type, compiledBatch) == 1) return kQuantRingStages;
  return quantDeepRing(bits, type, compiledBatch) ? kQuantDeepRingStages : kQuantHalfRingStages;
}

bool quantZeroMmaApplies(const QuantGroupGemvWeight& w, ActivationType type, int compiledBatch) {
  if (type != ActivationType::Float16 || !quantUsesTensorCores(w.bits, type, compiledBatch)) return false;
  const int halves = quantRingHalves(w.bits, type, compiledBatch);
  const int64_t unit = quantRingSumUnit(w.groupSize, w.bits, halves);
  // The loop that runs it knows its unit at compile time (QuantGroupFormats.cuh kCommonUnitShift).
  if (w.bits == 4) return quantOddExponent() && unit == 128;
  return unit == quantChunkCols(8) / halves;
}

bool quantZeroOnTensorCores(const QuantGroupGemvWeight& w, ActivationType type, int compiledBatch) {
  // On wherever it applies (bench/NOTES.md "seventh session": −7 to −14% at batch 1-8, v6r; −6% at 16, v6v);
  // PARETO_QUANT_ZERO_MMA=0 turns it off.
  static const bool enabled = kernelSwitch("PARETO_QUANT_ZERO_MMA") != SwitchSetting::Off;
  // 8-bit codes too (int8 −5 to −7.5% at batch 2-16: bench/NOTES.md "v6w, v6x and v6y measured"), unless
  // PARETO_QUANT_ZERO_MMA_8=0.
  static const bool eight = kernelSwitch("PARETO_QUANT_ZERO_MMA_8") != SwitchSetting::Off;
  return enabled && (w.bits == 4 || eight) && quantZeroMmaApplies(w, type, compiledBatch);
}

bool quantZeroRowEnabled() {
  static const bool on = kernelSwitch("PARETO_QUANT_ZERO_ROW") != SwitchSetting::Off;
  return on;
}

GemvSplit quantGroupGemvSplit(const GemvProblem& p, const QuantGroupGemvWeight& w, int multiprocessors) {
  const int batch = compiledBatch(p.batch);
  if (quantUsesTensorCores(w.bits, p.type, batch)) {
    // 16-bit rows of x padded by quantStagePadHalves, and the warps' rings after them (+16 bytes of alignment).
    // The split counts the ring's chunks (halves of layout chunks from quantHalvesMinBatch), at least a whole
    // chunk's worth a warp.
    const size_t pad = size_t(quantStagePadHalves(w.bits));
    const int halves = quantRingHalves(w.bits, p.type, batch);
    // No sum floats where the zero point is on the tensor cores.
    const int sumUnit = quantZeroOnTensorCores(w, p.type, batch) ? 0 : int(quantRingSumUnit(w.groupSize, w.bits, halves));
    // At least a whole chunk a warp. Two (the rule through the ninth session: one measured slower at batch 8-16 when
    // qkv then split 11 ways, bench/NOTES.md "short warps") kept o from its fastest split under the refitted cost,
    // 4 × 4 at batch 8 and 16 (the sweep: 9.4 → 8.3 and 13.1 → 11.8 µs alone); qkv keeps 4 × 2.
    const size_t rings = quantRingBytes(halves, quantRingStages(w.bits, p.type, batch));
    return chooseRingSplit(p.rows, quantChunks(p.cols, w.bits) * halves, quantChunkCols(w.bits) / halves, batch,
                           sumUnit, multiprocessors, kRingMaxSharedBytes,
                           2 * size_t(batch), 2 * size_t(batch) * pad + 16 + rings, halves,
                           0, w.bits == 4 ? kRingBalanceMaxBatchInt4 : kRingBalanceMaxBatch);
  }
  return chooseGemvSplit(p.rows, quantChunks(p.cols, w.bits), quantChunkCols(w.bits), batch,
                         int(quantSumUnit(w.groupSize, w.bits)), multiprocessors, kMaxStagedBytes);
}

std::string checkSpqrGemv(const GemvProblem& p, const SpqrGemvWeight& w) {
  if (auto e = checkGemvProblem(p); !e.empty()) return e;
  if (foldsWork(p))
    return "the SpQR kernels take no folded input or accumulate (their step measured slower folded)";
  if (w.bits < 2 || w.bits > 4) return std::to_string(w.bits) + "-bit codes: the kernel reads 2, 3 and 4 bits";
  if (w.scaleGroup <= 0 || 32 % w.scaleGroup != 0)
    return "second-level groups of " + std::to_string(w.scaleGroup) + " rows: the kernel needs a divisor of 32";
  if (p.cols % kSpqrGroupCols != 0) return "columns (" + std::to_string(p.cols) + ") must be a multiple of 16";
  if (p.cols > 65536) return "more than 65536 columns: outlier columns are 16-bit in the kernel layout";
  if (!w.codes || !w.stats || !w.second || !w.rowOffsets || !w.outlierColumns || !w.outlierValues)
    return "missing pointer in the SpQR weight";
  if (reinterpret_cast<uintptr_t>(w.codes) % 16 != 0 || reinterpret_cast<uintptr_t>(w.stats) % 8 != 0)
    return "codes must be 16-byte and stats 8-byte aligned";
  return {};
}

bool spqrEarlySearchEnabled() {
  static const bool on = kernelSwitch("PARETO_SPQR_EARLY_SEARCH") != SwitchSetting::Off;
  return on;
}

bool spqrUsesTensorCores(int scaleGroup, int compiledBatch) {
  // PARETO_SPQR_MMA: unset = the policy, 0 = the FFMA path everywhere, 1 = the tensor cores wherever they can.
  static const SwitchSetting mode = kernelSwitch("PARETO_SPQR_MMA");
  if (mode == SwitchSetting::Off || scaleGroup < kSpqrMmaMinScaleGroup) return false;
  return compiledBatch >= kSpqrMmaMinBatch || mode == SwitchSetting::On;
}

GemvSplit spqrGemvSplit(const GemvProblem& p, const SpqrGemvWeight& w, int multiprocessors) {
  const int batch = compiledBatch(p.batch);
  if (spqrUsesTensorCores(w.scaleGroup, batch)) {
    // 16-bit rows of x padded by kSpqrStagePadHalves, the warps' dense tiles, their rings (+16 bytes of alignment).
    // A warp a row group: each warp's outlier search starts at its split's first chunk (spqr_gemv.cu computeSlot).
    const size_t pad = size_t(kSpqrStagePadHalves);
    return chooseRingSplit(p.rows, spqrChunks(p.cols), kSpqrChunkCols, batch, 0, multiprocessors, kRingMaxSharedBytes,
                           2 * size_t(batch), 2 * size_t(batch) * pad + kSpqrTilesBytes + 16 + spqrRingBytes(w.bits),
                           2, 1);
  }
  return chooseGemvSplit(p.rows, spqrChunks(p.cols), kSpqrChunkCols, compiledBatch(p.batch), kSpqrGroupCols,
                         multiprocessors, kMaxStagedBytes);
}

std::string checkBitmaskInt4Gemv(const GemvProblem& p, const BitmaskInt4GemvWeight& w) {
  if (auto e = checkGemvProblem(p); !e.empty()) return e;
  if (p.cols % 32 != 0) return "columns (" + std::to_string(p.cols) + ") must be a multiple of 32";
  const int64_t kept = p.cols / 2;
  const int64_t g = w.groupSize;
  const bool ok = g == kept || (g >= 16 && g < 128 && 128 % g == 0) || (g >= 128 && g % 128 == 0 && kept % g == 0);
  if (!ok)
    return "groups of " + std::to_string(g) + " kept values: the kernel needs 16, 32, 64, a multiple of 128 " +
           "dividing the row, or the whole row";
  if (w.scaleColumns != bitmaskInt4ScaleColumns(p.cols, g)) return "scale layout does not match the shape";
  // The masks, or their metadata, or both: which of them a reader needs is its own check (the reference and the
  // FFMA kernel read the masks, the tensor-core kernel the metadata).
  if ((!w.masks && !w.metadata) || !w.codes || !w.scales || (!w.symmetric && !w.zeros))
    return "missing pointer in the weight";
  if (reinterpret_cast<uintptr_t>(w.masks) % 16 != 0 || reinterpret_cast<uintptr_t>(w.metadata) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(w.codes) % 16 != 0 || reinterpret_cast<uintptr_t>(w.scales) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(w.zeros) % 16 != 0)
    return "masks, metadata, codes, scales and zeros must be 16-byte aligned (the kernel copies them 16 bytes at a "
           "time)";
  return {};
}

void bitmaskInt4MmaMetadata(const uint32_t* masks, int64_t rowGroups, int64_t chunks, uint32_t* metadata) {
  // A nibble's two indices, as sparseMetadata (BitmaskMetadata.cuh) gives them on the device: its lowest kept
  // column (2 when neither of the first two is kept) and its highest (1 when neither of the last two is), i.e. the
  // two columns of a 2-of-4 nibble, and pairs mma.sp accepts for the padding's 0000 and 1111 (over zero values and x).
  uint32_t indices[16];
  for (uint32_t n = 0; n < 16; ++n) {
    const uint32_t low = n & 1 ? 0 : n & 2 ? 1 : 2, high = n & 8 ? 3 : n & 4 ? 2 : 1;
    indices[n] = low | high << 2;
  }
  constexpr int kWordsPerChunk = 8;  // mask words of a row and 256-column layout chunk
  for (int64_t gc = 0; gc < rowGroups * chunks; ++gc) {
    const uint32_t* rows = masks + gc * kRowsPerGroup * kWordsPerChunk;  // [32 rows][8 words]
    uint32_t* out = metadata + gc * kRowsPerGroup * kWordsPerChunk;      // [2 halves][128 words]
    for (int half = 0; half < 2; ++half)
      for (int g = 0; g < 8; ++g)
        for (int t = 0; t < 2; ++t)
          for (int piece = 0; piece < 2; ++piece)
            for (int kb = 0; kb < 2; ++kb)
              for (int m = 0; m < 2; ++m) {
                uint32_t word = 0;
                for (int hi = 0; hi < 2; ++hi) {
                  const uint32_t* row = rows + (16 * m + 8 * hi + g) * kWordsPerChunk + 4 * half + 2 * piece;
                  for (int i = 0; i < 4; ++i) {
                    const int group = 4 * i + 2 * kb + t;  // of the piece's 16
                    const uint32_t nibble = (row[group / 8] >> (4 * (group % 8))) & 0xF;
                    word |= indices[nibble] << (16 * hi + 4 * i);
                  }
                }
                out[half * 128 + ((g * 2 + t) * 2 + piece) * 4 + kb * 2 + m] = word;
              }
  }
}

bool bitmaskInt4UsesTensorCores(int n, int m, int64_t groupSize, int64_t cols) {
  // PARETO_BITMASK_INT4_MMA=0: the FFMA path everywhere (A/B timing).
  static const bool disabled = kernelSwitch("PARETO_BITMASK_INT4_MMA") == SwitchSetting::Off;
  if (disabled || n != 2 || m != 4) return false;
  return groupSize == cols / 2 || groupSize % 32 == 0;
}

GemvSplit bitmaskInt4GemvSplit(const GemvProblem& p, const BitmaskInt4GemvWeight& w, int multiprocessors) {
  if (bitmaskInt4UsesTensorCores(w.n, w.m, w.groupSize, p.cols)) {
    // 16-bit rows of x padded by kBitmaskInt4StagePadHalves (as many as the kernel is compiled for: two at batch
    // 1), and the warps' rings after them (+16 bytes of alignment).
    const int batch = bitmaskInt4MmaBatch(p.batch);
    const size_t pad = size_t(kBitmaskInt4StagePadHalves);
    return chooseRingSplit(p.rows, ceilDiv(p.cols, kBitmaskInt4MmaChunkCols), kBitmaskInt4MmaChunkCols, batch, 0,
                           multiprocessors, kRingMaxSharedBytes, 2 * size_t(batch),
                           2 * size_t(batch) * pad + 16 + kBitmaskInt4RingBytes, 2, 0, kRingBalanceMaxBatchInt4);
  }
  return chooseGemvSplit(p.rows, ceilDiv(p.cols, 256), 256, compiledBatch(p.batch), 0, multiprocessors,
                         kMaxStagedBytes);
}

}  // namespace pareto::kernels
