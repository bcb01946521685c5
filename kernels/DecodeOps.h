// decode_*: the small fused ops of one decode step (core/runtime/DecodeOps.h says what each computes and in
// which order it rounds). Plain entry points on raw device pointers and a stream, like the GEMV kernels.
//
// None of them reads a host value that changes from step to step (positions and the cache slot are read from
// device memory inside the kernels) or allocates, so a decode step made of them can be captured in a CUDA graph
// once and replayed with new positions. The checks are inline here, not in a .cu, so that the LibTorch wrapper
// rejects the same shapes on the CPU, where no kernel is built.
//
// Element types are fp16 or bf16 (ActivationType); every pointer is 16-byte aligned and every tensor contiguous.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "GemvProblem.h"  // ActivationType, ceilDiv
#include "KernelSwitches.h"

struct CUstream_st;

namespace pareto::kernels {

inline constexpr int kDecodeMaxBatch = 64;
inline constexpr int64_t kDecodeMaxHidden = 32768;  // one block of ≤ 1024 threads, ≤ 4 vectors of 8 a thread
inline constexpr int64_t kDecodeMaxHeadDim = 256;

namespace detail {
inline std::string checkBatch(int batch) {
  if (batch < 1 || batch > kDecodeMaxBatch)
    return "batch " + std::to_string(batch) + " is outside 1.." + std::to_string(kDecodeMaxBatch);
  return {};
}
inline std::string checkHeadDim(int64_t d) {
  if (d < 2 || d % 2 != 0 || d > kDecodeMaxHeadDim)
    return "head dim " + std::to_string(d) + " must be even and at most " + std::to_string(kDecodeMaxHeadDim);
  return {};
}
inline std::string checkHeads(int64_t qHeads, int64_t kvHeads) {
  if (qHeads < 1 || kvHeads < 1 || qHeads % kvHeads != 0)
    return std::to_string(qHeads) + " query heads are not a whole number of groups of " + std::to_string(kvHeads) +
           " key-value heads";
  return {};
}
}  // namespace detail

// ---- add + RMSNorm: residual += delta; out = weight ⊙ rmsnorm(residual) ------------------------------------

struct AddRmsNormProblem {
  int batch = 1;
  int64_t hidden = 0;
  ActivationType type = ActivationType::Float16;
  float eps = 1e-6f;
  void* residual = nullptr;      // [batch, hidden], updated in place
  const void* delta = nullptr;   // [batch, hidden]; null: residual is used as it is
  const void* weight = nullptr;  // [hidden]
  void* out = nullptr;           // [batch, hidden]
};

inline std::string checkAddRmsNorm(const AddRmsNormProblem& p) {
  if (auto e = detail::checkBatch(p.batch); !e.empty()) return e;
  if (p.hidden < 8 || p.hidden % 8 != 0 || p.hidden > kDecodeMaxHidden)
    return "hidden size " + std::to_string(p.hidden) + " must be a multiple of 8 (16-byte loads) and at most " +
           std::to_string(kDecodeMaxHidden);
  if (!(p.eps >= 0.f)) return "eps must be ≥ 0";
  return {};
}

std::string runAddRmsNorm(const AddRmsNormProblem& p, CUstream_st* stream);

// ---- RoPE + per-head RMSNorm + KV-cache write ----------------------------------------------------------------

struct RopeCacheProblem {
  int batch = 1;
  int64_t qHeads = 0, kvHeads = 0, headDim = 0;
  int64_t capacity = 0;                   // C: cache slots
  ActivationType type = ActivationType::Float16;
  float eps = 1e-6f;                      // of the optional per-head norms
  const void* qkv = nullptr;              // [batch, (qHeads + 2·kvHeads)·headDim]: q heads, k heads, v heads
  const void* qNorm = nullptr;            // [headDim] or null (no norm of q heads)
  const void* kNorm = nullptr;            // [headDim] or null
  const int64_t* positions = nullptr;     // [batch], device
  const float* invFreq = nullptr;         // [headDim / 2]
  const int64_t* slot = nullptr;          // one value, device; slots outside [0, C) write nothing
  void* q = nullptr;                      // [batch, qHeads, headDim]
  void* keys = nullptr;                   // [batch, kvHeads, C, headDim]
  void* values = nullptr;                 // [batch, kvHeads, C, headDim]
};

inline std::string checkRopeCache(const RopeCacheProblem& p) {
  if (auto e = detail::checkBatch(p.batch); !e.empty()) return e;
  if (auto e = detail::checkHeadDim(p.headDim); !e.empty()) return e;
  if (auto e = detail::checkHeads(p.qHeads, p.kvHeads); !e.empty()) return e;
  if (p.qHeads + 2 * p.kvHeads > 65535) return "too many heads (" + std::to_string(p.qHeads) + " + 2·" +
                                               std::to_string(p.kvHeads) + ") for one grid dimension";
  if (p.capacity < 1) return "cache capacity must be at least 1";
  if (!(p.eps >= 0.f)) return "eps must be ≥ 0";
  return {};
}

std::string runRopeCache(const RopeCacheProblem& p, CUstream_st* stream);

// ---- attention of one new token over the cache ---------------------------------------------------------------
//
// Split-K ("flash-decoding"): the slots [0, C) are cut into `splits` ranges of `slotsPerSplit`, and one block
// takes one (batch row, key-value head, range) with all of that head's query heads (up to
// kDecodeAttentionHeadsPerBlock; more are spread over several blocks), so each key and value is read once.
// A range past the current slot, or before validFrom, is skipped by its block. With several splits each block
// leaves an unnormalised fp32 partial (and its running max and sum) in the workspace and a second small kernel
// combines them; with one split the block writes the output directly.

inline constexpr int kDecodeAttentionHeadsPerBlock = 8;

struct DecodeAttentionProblem {
  int batch = 1;
  int64_t qHeads = 0, kvHeads = 0, headDim = 0;
  int64_t capacity = 0;
  ActivationType type = ActivationType::Float16;
  float scale = 1.f;                     // applied to q·k
  const void* q = nullptr;               // [batch, qHeads, headDim]
  const void* keys = nullptr;            // [batch, kvHeads, C, headDim]
  const void* values = nullptr;          // [batch, kvHeads, C, headDim]
  const int64_t* slot = nullptr;         // the last slot attended (clamped to [0, C)), device
  const int64_t* validFrom = nullptr;    // [batch] first slot attended (clamped to [0, slot]), or null: 0
  void* out = nullptr;                   // [batch, qHeads · headDim]
};

struct DecodeAttentionSplit {
  int splits = 1;
  int64_t slotsPerSplit = 0;
};

inline std::string checkDecodeAttention(const DecodeAttentionProblem& p) {
  if (auto e = detail::checkBatch(p.batch); !e.empty()) return e;
  if (auto e = detail::checkHeadDim(p.headDim); !e.empty()) return e;
  if (auto e = detail::checkHeads(p.qHeads, p.kvHeads); !e.empty()) return e;
  if (p.capacity < 1) return "cache capacity must be at least 1";
  if (!(p.scale > 0.f) || p.scale > 1e30f) return "scale must be positive and finite";
  return {};
}

// Slots a block stages in shared memory at a time (keys and values, double-buffered): ≤ 8 KB of keys a tile.
inline int64_t decodeAttentionTileSlots(int64_t headDim) {
  const int64_t padded = (headDim + 7) / 8 * 8;
  return padded <= 64 ? 64 : padded <= 128 ? 32 : 16;
}

inline int64_t decodeAttentionHeadChunks(const DecodeAttentionProblem& p) {
  return ceilDiv(p.qHeads / p.kvHeads, kDecodeAttentionHeadsPerBlock);
}

// Blocks of the attention kernel a multiprocessor holds at once where the device is not asked
// (decodeAttentionResidentBlocks): the fused kernel's registers (~127 a thread at 4 query heads) allow 4.
inline constexpr int kDecodeAttentionResidentBlocks = 4;

// Chosen from the capacity, never from the slot (which only the device knows while a graph replays): as many
// ranges as one wave of `residentBlocks` blocks on every multiprocessor holds (never more: a grid a few blocks
// past the wave runs them as a second wave, each as long as the first, at a fraction of the bandwidth), each
// range a whole number of tiles. Blocks whose range lies past the slot leave at once, so a short prefix of a long
// cache costs only their launch.
inline DecodeAttentionSplit decodeAttentionSplit(const DecodeAttentionProblem& p, int multiprocessors,
                                                 int residentBlocks = kDecodeAttentionResidentBlocks) {
  const int64_t tile = decodeAttentionTileSlots(p.headDim);
  const int64_t blocks = int64_t(p.batch) * p.kvHeads * decodeAttentionHeadChunks(p);
  const int64_t sms = std::max(1, multiprocessors);
  // PARETO_ATTENTION_WAVE=0: the split as it was (about four blocks a multiprocessor, rounded up), for the A/B.
  static const bool oneWave = kernelSwitch("PARETO_ATTENTION_WAVE") != SwitchSetting::Off;
  const int64_t wanted =
      oneWave ? std::max<int64_t>(1, std::max(1, residentBlocks) * sms / blocks) : ceilDiv(4 * sms, blocks);
  DecodeAttentionSplit s;
  s.slotsPerSplit = ceilDiv(ceilDiv(p.capacity, wanted), tile) * tile;
  s.splits = int(ceilDiv(p.capacity, s.slotsPerSplit));
  return s;
}

// Bytes of scratch a launch needs (0 with one split): per (row, query head, split) the partial output
// (headDim floats), its running max and its sum.
inline size_t decodeAttentionWorkspaceBytes(const DecodeAttentionProblem& p, const DecodeAttentionSplit& s) {
  if (s.splits <= 1) return 0;
  return size_t(p.batch) * size_t(p.qHeads) * size_t(s.splits) * size_t(p.headDim + 2) * sizeof(float);
}

std::string runDecodeAttention(const DecodeAttentionProblem& p, const DecodeAttentionSplit& s, void* workspace,
                               CUstream_st* stream);

// The blocks of the attention kernel for `p` (fused with RoPE or not) that one multiprocessor of the current
// device holds at once (its registers, shared memory and threads), for the split; kDecodeAttentionResidentBlocks
// if the device cannot say.
int decodeAttentionResidentBlocks(const DecodeAttentionProblem& p, bool fused);

// ---- RoPE + cache write + attention in one launch -------------------------------------------------------------
//
// decode_rope_cache and decode_attention (with its combine) as one kernel, so that a layer's attention is one
// launch instead of three. Each attention block computes its own query heads' RoPE (and per-head norm) from qkv
// with decode_rope_cache's arithmetic; the blocks whose range ends at the slot compute the new key and value, use
// them from shared memory, and the first of the head's query chunks writes them to the cache; with several splits
// the last block of a (batch row, key-value head, query chunk) to finish merges the partials as the combine kernel
// does, found by a counter that it sets back to zero. Results are bit for bit those of the two ops in sequence.

struct RopeAttentionProblem {
  RopeCacheProblem rope;             // qkv, norms, positions, frequencies, slot, keys, values; its q is unused
  DecodeAttentionProblem attention;  // shape, scale, validFrom, out; its q is unused; keys/values/slot as rope's
  unsigned* counters = nullptr;      // [decodeRopeAttentionCounters()] zeros on the device, left at zero
};

// The merging block keeps every split's max and sum of its heads in shared memory (≤ 16 KB at 8 heads).
inline constexpr int kDecodeRopeAttentionMaxSplits = 256;

// decodeAttentionSplit, with at most kDecodeRopeAttentionMaxSplits ranges.
inline DecodeAttentionSplit decodeRopeAttentionSplit(const DecodeAttentionProblem& p, int multiprocessors,
                                                     int residentBlocks = kDecodeAttentionResidentBlocks) {
  DecodeAttentionSplit s = decodeAttentionSplit(p, multiprocessors, residentBlocks);
  if (s.splits > kDecodeRopeAttentionMaxSplits) {
    const int64_t tile = decodeAttentionTileSlots(p.headDim);
    s.slotsPerSplit = ceilDiv(ceilDiv(p.capacity, kDecodeRopeAttentionMaxSplits), tile) * tile;
    s.splits = int(ceilDiv(p.capacity, s.slotsPerSplit));
  }
  return s;
}

inline int64_t decodeRopeAttentionCounters(const DecodeAttentionProblem& p) {
  return int64_t(p.batch) * p.kvHeads * decodeAttentionHeadChunks(p);
}

std::string runDecodeRopeAttention(const RopeAttentionProblem& p, const DecodeAttentionSplit& s, void* workspace,
                                   CUstream_st* stream);

// ---- the greedy end of a step: argmax and the next step's inputs ---------------------------------------------

struct NextTokenProblem {
  int batch = 1;
  int64_t vocab = 0;
  ActivationType type = ActivationType::Float16;
  const void* logits = nullptr;     // [batch, vocab]
  int64_t* next = nullptr;          // [batch]: the argmax (the first maximum; a NaN above every number)
  int64_t* ids = nullptr;           // [batch]: the same token, the next step's input
  int64_t* positions = nullptr;     // [batch], += 1
  int64_t* slot = nullptr;          // one value, += 1 once every row is done
  int64_t* generated = nullptr;     // [batch, generatedColumns]: [b][slot + 1] = the token (slot before the += 1)
  int64_t generatedColumns = 0;
  unsigned* counter = nullptr;      // one, zero on the device, left at zero
};

inline std::string checkNextToken(const NextTokenProblem& p) {
  if (auto e = detail::checkBatch(p.batch); !e.empty()) return e;
  if (p.vocab < 1) return "vocabulary must have at least one token";
  if (p.generatedColumns < 1) return "generated must have at least one column";
  return {};
}

std::string runNextToken(const NextTokenProblem& p, CUstream_st* stream);

// ---- SiLU · mul ---------------------------------------------------------------------------------------------

struct SiluMulProblem {
  int batch = 1;
  int64_t width = 0;  // F: gateUp is [batch, 2F], out [batch, F]
  ActivationType type = ActivationType::Float16;
  const void* gateUp = nullptr;
  void* out = nullptr;
};

inline std::string checkSiluMul(const SiluMulProblem& p) {
  if (auto e = detail::checkBatch(p.batch); !e.empty()) return e;
  if (p.width < 8 || p.width % 8 != 0)
    return "width " + std::to_string(p.width) + " must be a positive multiple of 8 (16-byte loads)";
  return {};
}

std::string runSiluMul(const SiluMulProblem& p, CUstream_st* stream);

}  // namespace pareto::kernels
