// decode_attention: one query token per batch row against the cached keys and values of slots
// [validFrom[b], slot], grouped-query, softmax in fp32 (DecodeOps.h for the split over blocks).
//
// A block is (cache range, key-value head and up to 8 of its query heads, batch row). It walks its range in
// tiles that cp.async stages into shared memory, two tiles in flight (the next tile's keys and values load while
// the current one is used), and keeps an online softmax: a running max and sum per query head and an
// unnormalised fp32 output that is rescaled whenever the max grows. Scores are exp2-based, with scale·log2(e)
// folded into q once. Scores and probabilities stay in fp32 where transformers rounds both to the dtype, so the
// result is closer to the exact one than the CPU path's (the tests hold it to both).
//
// Each tile goes through three passes, separated by barriers:
//   scores   `parts` = 128 / tile threads per key, each over every parts-th 8-column group of the key, for all
//            the block's query heads at once (the key is read from shared memory once), then a shuffle sum;
//   softmax  one warp per query head: tile max, probabilities, rescale factor;
//   values   a thread owns one 8-column group of the output for every head and a slice of the tile's slots.
// Staged rows are padded so that the threads of a quarter-warp, which read different keys in the score pass,
// fall in different banks. A head dim that is not a multiple of 8 is staged 4 bytes at a time and padded to
// whole groups with zeros, in q and in the staged rows.
//
// Fused with RoPE and the cache write (runDecodeRopeAttention, DecodeOps.h), the same kernel takes qkv instead of
// q: a block rotates its own query heads (a few hundred FLOPs, cheaper than a launch), the blocks whose range ends
// at the slot also the new key, which replaces that slot's row in their last staged tile (so no block reads a
// cache row another block of the launch is writing), and the merge of the splits is done by the last block of a
// (row, key-value head, chunk) to arrive instead of a second kernel.
#include <cuda_pipeline.h>

#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "DecodeOps.h"
#include "GemvDriver.cuh"
#include "KernelSwitches.h"

namespace pareto::kernels {
namespace {

using detail::Act;
using detail::aligned16;
using detail::unpack8;

constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

// Shared-memory layout of a block, the same for host (launch size) and device.
struct Layout {
  int tile = 0;       // slots per staged tile
  int parts = 0;      // threads per key in the score pass (kThreads / tile)
  int padded = 0;     // head dim rounded up to whole 8-column groups
  int rowStride = 0;  // elements from one staged row to the next
  int groups = 0;     // 8-column groups per row
  int slices = 0;     // threads per group in the value pass (kThreads / groups)
  size_t qOffset = 0, scoreOffset = 0, statOffset = 0, newOffset = 0, bytes = 0;
};

// fused: room for the new key and value (dtype, padded) after the statistics.
Layout attentionLayout(int64_t headDim, int maxHeads, bool fused) {
  Layout l;
  l.tile = int(decodeAttentionTileSlots(headDim));
  l.parts = kThreads / l.tile;
  l.padded = int((headDim + 7) / 8 * 8);
  // In the score pass a quarter-warp reads 16 bytes from each of 8 / parts keys at parts consecutive groups:
  // rows 4·parts words apart (mod 32 banks) put them all in different banks.
  const int words = l.padded / 2, want = (4 * l.parts) % 32;
  l.rowStride = 2 * (words + (want - words % 32 + 32) % 32);
  l.groups = l.padded / 8;
  l.slices = kThreads / l.groups;
  const size_t stages = size_t(2) * 2 * l.tile * l.rowStride * 2;                   // 2 × (keys, values)
  const size_t reduction = size_t(l.slices) * maxHeads * l.padded * sizeof(float);  // reuses the stages
  l.qOffset = stages > reduction ? stages : reduction;
  l.scoreOffset = l.qOffset + size_t(maxHeads) * l.padded * sizeof(float);
  l.statOffset = l.scoreOffset + size_t(maxHeads) * l.tile * sizeof(float);
  l.bytes = l.statOffset + 3 * size_t(maxHeads) * sizeof(float);
  if (fused) {
    l.newOffset = (l.bytes + 15) / 16 * 16;
    l.bytes = l.newOffset + 2 * size_t(l.padded) * 2;  // fp16 / bf16 elements
  }
  return l;
}

struct AttentionArgs {
  DecodeAttentionProblem p;
  Layout l;
  int64_t slotsPerSplit = 0;
  int splits = 1;
  int headChunks = 1;
  float* partial = nullptr;  // [batch, qHeads, splits, headDim]
  float* maxes = nullptr;    // [batch, qHeads, splits]  running max (log2 units)
  float* sums = nullptr;     // [batch, qHeads, splits]
  RopeCacheProblem rope;     // fused only
  unsigned* counters = nullptr;  // fused with several splits: [batch, kvHeads · headChunks]
  bool earlyTile = false;        // fused only: the range and the first tile before the wait (earlyTileEnabled)
  bool ropePreload = true;       // fused only: every qkv value of the block loaded at once (ropePreloadEnabled)
};

// The slots row b attends: [lo, hi], both read from the device and clamped so that the range is never empty.
__device__ __forceinline__ void attendedRange(const DecodeAttentionProblem& p, int b, int64_t& lo, int64_t& hi) {
  const int64_t s = *p.slot;
  hi = s < 0 ? 0 : s >= p.capacity ? p.capacity - 1 : s;
  const int64_t f = p.validFrom != nullptr ? p.validFrom[b] : 0;
  lo = f < 0 ? 0 : f > hi ? hi : f;
}

// Starts the copy of `rows` cached keys and values (from `keys`/`values`, D elements a row) into a stage.
template <class E>
__device__ __forceinline__ void stageTile(E* kDst, E* vDst, const E* keys, const E* values, int rows, int D,
                                          int rowStride) {
  if (D % 8 == 0) {
    const int perRow = D / 8;
    for (int i = threadIdx.x; i < rows * perRow; i += kThreads) {
      const int r = i / perRow, c = (i - r * perRow) * 8;
      __pipeline_memcpy_async(kDst + r * rowStride + c, keys + int64_t(r) * D + c, 16);
      __pipeline_memcpy_async(vDst + r * rowStride + c, values + int64_t(r) * D + c, 16);
    }
  } else {  // rows only 4-byte aligned
    const int perRow = D / 2;
    for (int i = threadIdx.x; i < rows * perRow; i += kThreads) {
      const int r = i / perRow, c = (i - r * perRow) * 2;
      __pipeline_memcpy_async(kDst + r * rowStride + c, keys + int64_t(r) * D + c, 4);
      __pipeline_memcpy_async(vDst + r * rowStride + c, values + int64_t(r) * D + c, 4);
    }
  }
  __pipeline_commit();
}

__device__ __forceinline__ int64_t minSlot(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t maxSlot(int64_t a, int64_t b) { return a > b ? a : b; }

__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, off));
  return v;
}

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
  return v;
}

// Thread i's pair (x0, x1) = (src[i], src[i + D/2]) of one head of qkv, zeros for i ≥ D/2: read apart from
// ropeHead so that a block can have every head's pairs in flight at once.
template <ActivationType T>
__device__ __forceinline__ void headPair(const typename Act<T>::type* src, int D, float& x0, float& x1) {
  using A = Act<T>;
  const int half = D / 2, i = threadIdx.x;
  x0 = i < half ? A::toFloat(src[i]) : 0.f;
  x1 = i < half ? A::toFloat(src[i + half]) : 0.f;
}

// decode_rope_cache's arithmetic for one head of the new token (transformers' roundings, see that file), by the
// whole block: thread i < D/2 owns the pair (i, i + D/2) (headPair) and gets the rotated pair in the dtype. The
// norm's sum adds the same warp sums in the same order as there (the extra warps here add zeros), so the values
// are the same bit for bit. Every thread must call it: the norm's reduction has barriers.
template <ActivationType T>
__device__ __forceinline__ void ropeHead(float x0, float x1, const typename Act<T>::type* norm, float eps, int D,
                                         float c, float s, float* warpTotals, typename Act<T>::type& out0,
                                         typename Act<T>::type& out1) {
  using A = Act<T>;
  const int half = D / 2, i = threadIdx.x;
  if (norm != nullptr) {
    const float variance = detail::blockSum(x0 * x0 + x1 * x1, warpTotals) / float(D);
    __syncthreads();  // warpTotals is written again by the next head's reduction
    const float inv = 1.f / sqrtf(variance + eps);
    if (i < half) {
      x0 = A::toFloat(A::fromFloat(A::toFloat(A::fromFloat(x0 * inv)) * A::toFloat(norm[i])));
      x1 = A::toFloat(A::fromFloat(A::toFloat(A::fromFloat(x1 * inv)) * A::toFloat(norm[i + half])));
    }
  }
  auto round = [](float v) { return A::toFloat(A::fromFloat(v)); };
  out0 = A::fromFloat(round(x0 * c) - round(x1 * s));
  out1 = A::fromFloat(round(x1 * c) + round(x0 * s));
}

// The fused kernel's merge of the splits [first, first + n) of heads head0.. of row b, by one block: V adjacent
// columns a thread (16-byte loads when V = 4), the partials of 8 splits loaded before any is used (one L2 round
// trip for 8, as combineKernel learned), and per column the same operations in the same order as combineKernel,
// so the output is the same bit for bit (its padding entries past the last split add exact zeros).
template <ActivationType T, int V>
__device__ __forceinline__ void mergeSplits(const AttentionArgs& a, int b, int head0, int heads, int first, int n,
                                            const float* sMax, const float* sSum) {
  using A = Act<T>;
  const int D = int(a.p.headDim), perHead = D / V;
  constexpr int kLoads = 8;
  for (int item = threadIdx.x; item < heads * perHead; item += kThreads) {
    const int h = item / perHead, d = (item - h * perHead) * V;
    const float* mx = sMax + h * n;
    const float* sm = sSum + h * n;
    float m = -INFINITY;
    for (int k = 0; k < n; ++k) m = fmaxf(m, mx[k]);
    const int64_t row = int64_t(b) * a.p.qHeads + head0 + h;
    const float* part = a.partial + (row * a.splits + first) * D + d;
    float sum = 0.f, o[V];
#pragma unroll
    for (int v = 0; v < V; ++v) o[v] = 0.f;
    for (int k0 = 0; k0 < n; k0 += kLoads) {
      float pv[kLoads][V];
#pragma unroll
      for (int k = 0; k < kLoads; ++k) {
        if (k0 + k >= n) continue;
        if constexpr (V == 4) {
          const float4 x = __ldcg(reinterpret_cast<const float4*>(part + int64_t(k0 + k) * D));
          pv[k][0] = x.x; pv[k][1] = x.y; pv[k][2] = x.z; pv[k][3] = x.w;
        } else {
          pv[k][0] = __ldcg(part + int64_t(k0 + k) * D);
        }
      }
#pragma unroll
      for (int k = 0; k < kLoads; ++k) {
        if (k0 + k >= n) continue;
        const float w = exp2f(mx[k0 + k] - m);
        sum = fmaf(sm[k0 + k], w, sum);
#pragma unroll
        for (int v = 0; v < V; ++v) o[v] = fmaf(pv[k][v], w, o[v]);
      }
    }
    typename A::type* out = static_cast<typename A::type*>(a.p.out) + row * D + d;
#pragma unroll
    for (int v = 0; v < V; ++v) out[v] = A::fromFloat(o[v] / sum);
  }
}

// MaxHeads: the query heads a block holds in registers (a power of two ≥ its heads; the rest have q = 0).
template <ActivationType T, int MaxHeads, bool kFused>
__global__ void __launch_bounds__(kThreads) decodeAttentionKernel(const AttentionArgs a) {
  static_assert(MaxHeads <= 8, "the softmax pass gives a warp at most two heads");
  using A = Act<T>;
  using E = typename A::type;
  const DecodeAttentionProblem& p = a.p;
  const Layout& l = a.l;
  const int split = blockIdx.x;
  const int kvHead = int(blockIdx.y) / a.headChunks, chunk = int(blockIdx.y) % a.headChunks;
  const int b = blockIdx.z;
  detail::allowDependentLaunch();
  // Unfused, the query and this step's cache entry come from the RoPE kernel just before (ProgrammaticLaunch.cuh):
  // wait first. Fused with `earlyTile`, the block's range and its first tile are read before the wait, so that the
  // tile's memory latency passes under the qkv GEMV's tail: the slot, validFrom and the cached rows before the slot
  // were written by earlier steps, all finished before this step's first kernel (the embedding gather, an
  // ordinary launch) started; the slot's own row, which this launch writes, is replaced from the block's newKV
  // before it is read. Either way every block waits before it may return, so that it takes part in the chain.
  const bool early = kFused && a.earlyTile;
  if (!early) detail::waitForPreviousGrid();

  int64_t lo, hi;
  attendedRange(p, b, lo, hi);
  const int64_t start = maxSlot(int64_t(split) * a.slotsPerSplit, lo);
  const int64_t end = minSlot(int64_t(split + 1) * a.slotsPerSplit, hi + 1);
  if (start >= end) {  // the whole block: the range lies past the slot or before validFrom
    if (early) detail::waitForPreviousGrid();
    return;
  }

  const int D = int(p.headDim);
  const int group = int(p.qHeads / p.kvHeads);
  const int head0 = kvHead * group + chunk * kDecodeAttentionHeadsPerBlock;
  const int heads = min(kDecodeAttentionHeadsPerBlock, group - chunk * kDecodeAttentionHeadsPerBlock);

  extern __shared__ __align__(16) unsigned char shared[];
  E* stages = reinterpret_cast<E*>(shared);  // [2][keys, values][tile][rowStride]
  float* qs = reinterpret_cast<float*>(shared + l.qOffset);        // [MaxHeads][padded]
  float* scores = reinterpret_cast<float*>(shared + l.scoreOffset);  // [MaxHeads][tile]
  float* rescale = reinterpret_cast<float*>(shared + l.statOffset);  // [MaxHeads]
  float* headSums = rescale + MaxHeads;                              // [MaxHeads]
  float* headMaxes = headSums + MaxHeads;                            // [MaxHeads]
  const int stageElems = l.tile * l.rowStride;

  const int64_t headBase = (int64_t(b) * p.kvHeads + kvHead) * p.capacity * D;
  const E* keys = static_cast<const E*>(p.keys) + headBase;
  const E* values = static_cast<const E*>(p.values) + headBase;
  const int tiles = int((end - start + l.tile - 1) / l.tile);

  // The first tile's loads go out before anything else so that they overlap staging q (early: and the wait).
  stageTile(stages, stages + stageElems, keys + start * D, values + start * D, int(minSlot(l.tile, end - start)),
            D, l.rowStride);
  // Fused: the rotation's angle, float32(position) · invFreq with precise cosf / sinf rounded to the dtype, as
  // decode_rope_cache. The position was written by earlier steps (as the slot): with `early` it is read before the
  // wait too.
  float ropeCos = 0.f, ropeSin = 0.f;
  if constexpr (kFused) {
    if (int(threadIdx.x) < D / 2) {
      const float angle = float(a.rope.positions[b]) * a.rope.invFreq[threadIdx.x];
      ropeCos = A::toFloat(A::fromFloat(cosf(angle)));
      ropeSin = A::toFloat(A::fromFloat(sinf(angle)));
    }
  }
  if (early) detail::waitForPreviousGrid();
  if (D != l.padded) {  // the pad columns of every staged row: never copied, read as zeros
    const int pad = l.padded - D;
    for (int i = threadIdx.x; i < 4 * l.tile * pad; i += kThreads)
      stages[(i / pad) * l.rowStride + D + i % pad] = A::fromFloat(0.f);
  }
  const float qScale = p.scale * kLog2e;
  // fused: whether this block's range ends at the slot, whose new key and value it then holds in newKV.
  bool newRow = false;
  E* newKV = reinterpret_cast<E*>(shared + l.newOffset);  // [2][padded]: key, value
  if constexpr (!kFused) {
    const E* q = static_cast<const E*>(p.q) + (int64_t(b) * p.qHeads + head0) * D;
    for (int i = threadIdx.x; i < MaxHeads * l.padded; i += kThreads) {
      const int h = i / l.padded, d = i - h * l.padded;
      qs[i] = h < heads && d < D ? A::toFloat(q[h * D + d]) * qScale : 0.f;
    }
  } else {
    __shared__ float warpTotals[kThreads / 32];
    const RopeCacheProblem& r = a.rope;
    const int half = D / 2, i = threadIdx.x;
    const int64_t slot = *r.slot;
    const bool slotInCache = slot >= 0 && slot < p.capacity;  // then hi == slot
    const float c = ropeCos, sn = ropeSin;
    const E* src = static_cast<const E*>(r.qkv) + int64_t(b) * (p.qHeads + 2 * p.kvHeads) * D;
    for (int j = threadIdx.x; j < MaxHeads * l.padded; j += kThreads) {  // entries no head writes below
      const int h = j / l.padded, d = j - h * l.padded;
      if (h >= heads || d >= D) qs[j] = 0.f;
    }
    newRow = slotInCache && end == hi + 1;
    // Every qkv value the block uses goes in flight together (`ropePreload`): one L2 round trip after the wait
    // instead of one a head, each behind the previous head's arithmetic (and its norm's barriers). Off, each head's
    // pair is read where it is used, as before, for the A/B. Not at 8 heads a block, where the pairs' registers
    // made ptxas spill (168 registers).
    const bool preload = MaxHeads <= 4 && a.ropePreload;
    const E* kSrc = src + (p.qHeads + kvHead) * D;
    const E* vSrc = src + (p.qHeads + p.kvHeads + kvHead) * D;
    float qPair[MaxHeads][2], kPair[2] = {0.f, 0.f}, vPair[2] = {0.f, 0.f};
    if (preload) {
#pragma unroll
      for (int h = 0; h < MaxHeads; ++h)
        if (h < heads) headPair<T>(src + int64_t(head0 + h) * D, D, qPair[h][0], qPair[h][1]);
      if (newRow) {
        headPair<T>(kSrc, D, kPair[0], kPair[1]);
        headPair<T>(vSrc, D, vPair[0], vPair[1]);
      }
    }
#pragma unroll
    for (int h = 0; h < MaxHeads; ++h) {
      if (h >= heads) break;  // the same count in every thread: ropeHead's barriers
      if (!preload) headPair<T>(src + int64_t(head0 + h) * D, D, qPair[h][0], qPair[h][1]);
      E o0, o1;
      ropeHead<T>(qPair[h][0], qPair[h][1], static_cast<const E*>(r.qNorm), r.eps, D, c, sn, warpTotals, o0, o1);
      if (i < half) {
        qs[h * l.padded + i] = A::toFloat(o0) * qScale;
        qs[h * l.padded + i + half] = A::toFloat(o1) * qScale;
      }
    }
    if (newRow) {
      if (!preload) headPair<T>(kSrc, D, kPair[0], kPair[1]);
      E k0, k1;
      ropeHead<T>(kPair[0], kPair[1], static_cast<const E*>(r.kNorm), r.eps, D, c, sn, warpTotals, k0, k1);
      if (!preload) headPair<T>(vSrc, D, vPair[0], vPair[1]);
      if (i < half) {
        const E v[2] = {A::fromFloat(vPair[0]), A::fromFloat(vPair[1])};  // the dtype's values, exactly
        newKV[i] = k0;
        newKV[i + half] = k1;
        newKV[l.padded + i] = v[0];
        newKV[l.padded + i + half] = v[1];
        if (chunk == 0) {  // one block writes the cache; the others of the head use their own copy
          const int64_t at = ((int64_t(b) * p.kvHeads + kvHead) * p.capacity + slot) * D;
          E* kc = static_cast<E*>(r.keys) + at;
          E* vc = static_cast<E*>(r.values) + at;
          kc[i] = k0;
          kc[i + half] = k1;
          vc[i] = v[0];
          vc[i + half] = v[1];
        }
      }
    }
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int key = threadIdx.x / l.parts, part = threadIdx.x % l.parts;          // score pass
  const int column = (threadIdx.x % l.groups) * 8, slice = threadIdx.x / l.groups;  // value pass
  float acc[MaxHeads][8];
#pragma unroll
  for (int h = 0; h < MaxHeads; ++h)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[h][e] = 0.f;
  float runMax[2] = {-INFINITY, -INFINITY}, runSum[2] = {0.f, 0.f};  // heads warp and warp + 4

  for (int t = 0; t < tiles; ++t) {
    const int64_t tileStart = start + int64_t(t) * l.tile;
    const int n = int(minSlot(l.tile, end - tileStart));
    if (t + 1 < tiles) {
      E* next = stages + ((t + 1) & 1) * 2 * stageElems;
      const int64_t nextStart = tileStart + l.tile;
      stageTile(next, next + stageElems, keys + nextStart * D, values + nextStart * D,
                int(minSlot(l.tile, end - nextStart)), D, l.rowStride);
      __pipeline_wait_prior(1);
    } else {
      __pipeline_wait_prior(0);
    }
    __syncthreads();
    const E* kTile = stages + (t & 1) * 2 * stageElems;
    const E* vTile = kTile + stageElems;
    if constexpr (kFused) {
      if (newRow && t == tiles - 1) {  // the slot is the last of this block's range: its row as just computed
        const int row = int(hi - tileStart);
        E* kRow = const_cast<E*>(kTile) + row * l.rowStride;
        E* vRow = const_cast<E*>(vTile) + row * l.rowStride;
        for (int d = threadIdx.x; d < D; d += kThreads) {
          kRow[d] = newKV[d];
          vRow[d] = newKV[l.padded + d];
        }
        __syncthreads();
      }
    }

    // Scores (log2 units) of every head for this thread's key.
    float dot[MaxHeads];
#pragma unroll
    for (int h = 0; h < MaxHeads; ++h) dot[h] = 0.f;
    if (key < n) {
      for (int g = part; g < l.groups; g += l.parts) {
        float k[8];
        unpack8<T>(*reinterpret_cast<const uint4*>(kTile + key * l.rowStride + g * 8), k);
#pragma unroll
        for (int h = 0; h < MaxHeads; ++h) {
          const float4 q0 = *reinterpret_cast<const float4*>(qs + h * l.padded + g * 8);
          const float4 q1 = *reinterpret_cast<const float4*>(qs + h * l.padded + g * 8 + 4);
          float s = dot[h];
          s = fmaf(q0.x, k[0], s); s = fmaf(q0.y, k[1], s); s = fmaf(q0.z, k[2], s); s = fmaf(q0.w, k[3], s);
          s = fmaf(q1.x, k[4], s); s = fmaf(q1.y, k[5], s); s = fmaf(q1.z, k[6], s); s = fmaf(q1.w, k[7], s);
          dot[h] = s;
        }
      }
    }
    for (int off = l.parts / 2; off > 0; off /= 2)  // the parts of a key are adjacent lanes of one warp
#pragma unroll
      for (int h = 0; h < MaxHeads; ++h) dot[h] += __shfl_xor_sync(0xFFFFFFFFu, dot[h], off);
    if (part == 0 && key < n)
#pragma unroll
      for (int h = 0; h < MaxHeads; ++h) scores[h * l.tile + key] = dot[h];
    __syncthreads();

    // Online softmax: scores become probabilities relative to the new running max (tiles are ≤ 64 slots).
#pragma unroll
    for (int k2 = 0; k2 < 2; ++k2) {
      const int h = warp + 4 * k2;
      if (h >= MaxHeads) continue;
      float* row = scores + h * l.tile;
      const float s0 = lane < n ? row[lane] : -INFINITY;
      const float s1 = lane + 32 < n ? row[lane + 32] : -INFINITY;
      const float newMax = fmaxf(runMax[k2], warpMax(fmaxf(s0, s1)));
      const float p0 = lane < n ? exp2f(s0 - newMax) : 0.f;
      const float p1 = lane + 32 < n ? exp2f(s1 - newMax) : 0.f;
      if (lane < n) row[lane] = p0;
      if (lane + 32 < n) row[lane + 32] = p1;
      const float factor = exp2f(runMax[k2] - newMax);  // 0 on the first tile (max −∞)
      runSum[k2] = runSum[k2] * factor + warpSum(p0 + p1);
      runMax[k2] = newMax;
      if (lane == 0) rescale[h] = factor;
    }
    __syncthreads();

    // Values: acc = acc · factor + Σ p · v over this thread's slice of the tile's slots.
    if (slice < l.slices) {
#pragma unroll
      for (int h = 0; h < MaxHeads; ++h) {
        const float f = rescale[h];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[h][e] *= f;
      }
      for (int j = slice; j < n; j += l.slices) {
        float v[8];
        unpack8<T>(*reinterpret_cast<const uint4*>(vTile + j * l.rowStride + column), v);
#pragma unroll
        for (int h = 0; h < MaxHeads; ++h) {
          const float pr = scores[h * l.tile + j];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[h][e] = fmaf(pr, v[e], acc[h][e]);
        }
      }
    }
    __syncthreads();  // the stage just read is the one the next iteration starts loading into
  }

  // Sum the slices (the stages are free now), then write the output or this range's partial.
  float* reduction = reinterpret_cast<float*>(shared);  // [slices][MaxHeads][padded]
  if (slice < l.slices) {
#pragma unroll
    for (int h = 0; h < MaxHeads; ++h) {
      float4* dst = reinterpret_cast<float4*>(reduction + (slice * MaxHeads + h) * l.padded + column);
      dst[0] = make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
      dst[1] = make_float4(acc[h][4], acc[h][5], acc[h][6], acc[h][7]);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int k2 = 0; k2 < 2; ++k2) {
      const int h = warp + 4 * k2;
      if (h < MaxHeads) {
        headSums[h] = runSum[k2];
        headMaxes[h] = runMax[k2];
      }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < heads * D; i += kThreads) {
    const int h = i / D, d = i - h * D;
    float o = 0.f;
    for (int s = 0; s < l.slices; ++s) o += reduction[(s * MaxHeads + h) * l.padded + d];
    const int64_t row = int64_t(b) * p.qHeads + head0 + h;  // (batch row, query head)
    if (a.splits == 1) {
      static_cast<E*>(p.out)[row * D + d] = A::fromFloat(o / headSums[h]);
    } else {
      const int64_t at = row * a.splits + split;
      a.partial[at * D + d] = o;
      if (d == 0) {
        a.maxes[at] = headMaxes[h];
        a.sums[at] = headSums[h];
      }
    }
  }
  if constexpr (kFused) {
    if (a.splits == 1) return;
    // The last block of this (row, key-value head, chunk) to arrive merges the partials of every split the row
    // attended, in ascending order as combineKernel does (the same value bit for bit), and resets the counter for
    // the next launch. Each thread fences its own partials before the block's arrival is counted.
    __shared__ bool lastBlock;
    const int first = int(lo / a.slotsPerSplit), n = int(hi / a.slotsPerSplit) - first + 1;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned* counter = a.counters + (int64_t(b) * gridDim.y + blockIdx.y);
      lastBlock = atomicAdd(counter, 1u) + 1u == unsigned(n);
      if (lastBlock) *counter = 0u;
    }
    __syncthreads();
    if (!lastBlock) return;
    __threadfence();
    // Every split's max and sum of this block's heads into shared memory at once (the stages and the reduction
    // are free now; the host caps the splits so that they fit), read from L2: other blocks wrote them.
    float* sMax = reinterpret_cast<float*>(shared);  // [heads][n]
    float* sSum = sMax + MaxHeads * n;
    for (int j = threadIdx.x; j < heads * n; j += kThreads) {
      const int h = j / n, k = j - h * n;
      const int64_t at = (int64_t(b) * p.qHeads + head0 + h) * a.splits + first + k;
      sMax[h * n + k] = __ldcg(a.maxes + at);
      sSum[h * n + k] = __ldcg(a.sums + at);
    }
    __syncthreads();
    if (D % 4 == 0)
      mergeSplits<T, 4>(a, b, head0, heads, first, n, sMax, sSum);
    else
      mergeSplits<T, 1>(a, b, head0, heads, first, n, sMax, sSum);
  }
}

// One block per (query head, batch row), one thread per output column: merges the ranges that the row attended
// (the same ones whose blocks did not leave early) by their maxes.
template <ActivationType T>
__global__ void __launch_bounds__(kDecodeMaxHeadDim) combineKernel(const AttentionArgs a) {
  using A = Act<T>;
  const DecodeAttentionProblem& p = a.p;
  const int d = threadIdx.x;
  const int D = int(p.headDim);
  detail::allowDependentLaunch();
  detail::waitForPreviousGrid();  // the partials come from the attention kernel just before
  if (d >= D) return;
  const int b = blockIdx.y;
  int64_t lo, hi;
  attendedRange(p, b, lo, hi);
  const int first = int(lo / a.slotsPerSplit), last = int(hi / a.slotsPerSplit);
  const int64_t row = int64_t(b) * p.qHeads + blockIdx.x;
  const int64_t base = row * a.splits;
  // The splits' values are loaded kLoads at a time, all in flight together, before any is used: a loop that
  // loads and uses one split per iteration waited one L2 latency per split (Nsight Compute: ~15 warps stalled
  // on loads per issued instruction, 8 µs at 17 splits, longer than the attention kernel itself). Entries past
  // `last` read as max −∞ (weight 0) and sum/partial 0, which leave m, sum and o exactly as they are, so the
  // result is the same as adding the splits one by one in ascending order.
  constexpr int kLoads = 8;
  float m = -INFINITY;
  for (int s0 = first; s0 <= last; s0 += kLoads) {
    float v[kLoads];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) v[k] = s0 + k <= last ? a.maxes[base + s0 + k] : -INFINITY;
#pragma unroll
    for (int k = 0; k < kLoads; ++k) m = fmaxf(m, v[k]);
  }
  float sum = 0.f, o = 0.f;
  for (int s0 = first; s0 <= last; s0 += kLoads) {
    float mx[kLoads], sm[kLoads], pv[kLoads];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      const bool in = s0 + k <= last;
      mx[k] = in ? a.maxes[base + s0 + k] : -INFINITY;
      sm[k] = in ? a.sums[base + s0 + k] : 0.f;
      pv[k] = in ? a.partial[(base + s0 + k) * D + d] : 0.f;
    }
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      const float w = exp2f(mx[k] - m);
      sum = fmaf(sm[k], w, sum);
      o = fmaf(pv[k], w, o);
    }
  }
  static_cast<typename A::type*>(p.out)[row * D + d] = A::fromFloat(o / sum);
}

template <ActivationType T, int MaxHeads, bool kFused>
cudaError_t launch(const AttentionArgs& a, cudaStream_t stream) {
  const dim3 grid(unsigned(a.splits), unsigned(a.p.kvHeads * a.headChunks), unsigned(a.p.batch));
  auto kernel = decodeAttentionKernel<T, MaxHeads, kFused>;
  if (a.l.bytes > 48 * 1024) {  // not with the tiles of DecodeOps.h (≤ 46 KB), but never launch short of memory
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(a.l.bytes));
    if (e != cudaSuccess) return e;
  }
  if (const cudaError_t e = detail::launchKernel(kernel, grid, dim3(kThreads), a.l.bytes, stream, a);
      e != cudaSuccess || a.splits == 1 || kFused)
    return e;
  const int threads = int((a.p.headDim + 31) / 32 * 32);
  return detail::launchKernel(combineKernel<T>, dim3(unsigned(a.p.qHeads), unsigned(a.p.batch)), dim3(threads), 0,
                              stream, a);
}

// f(std::integral_constant<int, MaxHeads>) for the kernel instance that holds `maxHeads` query heads (blockMaxHeads:
// 1, 2, 4 or 8): the one place that maps the runtime count to the compiled instances, for the launch and the
// occupancy query alike.
template <class F>
auto withMaxHeads(int maxHeads, F&& f) {
  switch (maxHeads) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

template <ActivationType T, bool kFused>
cudaError_t launchFor(const AttentionArgs& a, int maxHeads, cudaStream_t stream) {
  return withMaxHeads(maxHeads, [&](auto heads) { return launch<T, decltype(heads)::value, kFused>(a, stream); });
}

// The query heads a block holds in registers (the kernel's MaxHeads): a power of two ≥ its heads.
int blockMaxHeads(const DecodeAttentionProblem& p) {
  const int64_t group = p.kvHeads > 0 ? p.qHeads / p.kvHeads : 1;
  const int64_t perBlock = group < kDecodeAttentionHeadsPerBlock ? group : kDecodeAttentionHeadsPerBlock;
  return perBlock <= 1 ? 1 : perBlock <= 2 ? 2 : perBlock <= 4 ? 4 : 8;
}

// The attention arguments both entry points share (the problem already checked): heads a block, layout, split.
std::string prepare(const DecodeAttentionProblem& p, const DecodeAttentionSplit& s, void* workspace, bool fused,
                    AttentionArgs& a, int& maxHeads) {
  if (s.splits < 1 || s.slotsPerSplit < 1 || int64_t(s.splits) * s.slotsPerSplit < p.capacity)
    return "the split does not cover the cache capacity";
  if (s.splits > 1 && (workspace == nullptr || !aligned16(workspace)))
    return "several splits need a 16-byte aligned workspace of decodeAttentionWorkspaceBytes()";
  a.p = p;
  a.headChunks = int(decodeAttentionHeadChunks(p));
  if (p.kvHeads * a.headChunks > 65535) return "too many key-value heads for one grid dimension";
  maxHeads = blockMaxHeads(p);
  a.l = attentionLayout(p.headDim, maxHeads, fused);
  a.slotsPerSplit = s.slotsPerSplit;
  a.splits = s.splits;
  if (s.splits > 1) {
    const size_t entries = size_t(p.batch) * size_t(p.qHeads) * size_t(s.splits);
    a.partial = static_cast<float*>(workspace);
    a.maxes = a.partial + entries * size_t(p.headDim);
    a.sums = a.maxes + entries;
  }
  return {};
}

// The fused kernel's range and first tile before its wait (bench/NOTES.md "the fused attention's first tile before
// the wait": the attention part 0.428 → 0.371 ms a step on an H100); PARETO_ATTENTION_EARLY_TILE=0 waits first.
bool earlyTileEnabled() {
  static const bool enabled = kernelSwitch("PARETO_ATTENTION_EARLY_TILE") != SwitchSetting::Off;
  return enabled;
}
// PARETO_ATTENTION_ROPE_PRELOAD=0: the fused kernel reads each head's qkv values where it rotates them (one L2
// round trip a head after the wait) instead of all at once (bench/NOTES.md "the fused attention's qkv reads").
bool ropePreloadEnabled() {
  static const bool enabled = kernelSwitch("PARETO_ATTENTION_ROPE_PRELOAD") != SwitchSetting::Off;
  return enabled;
}

}  // namespace

std::string runDecodeAttention(const DecodeAttentionProblem& p, const DecodeAttentionSplit& s, void* workspace,
                               CUstream_st* stream) {
  if (auto e = checkDecodeAttention(p); !e.empty()) return e;
  if (p.q == nullptr || p.keys == nullptr || p.values == nullptr || p.slot == nullptr || p.out == nullptr)
    return "missing query, cache, slot or output pointer";
  if (!aligned16(p.q) || !aligned16(p.keys) || !aligned16(p.values) || !aligned16(p.out))
    return "tensors must be 16-byte aligned";
  AttentionArgs a;
  int maxHeads = 1;
  if (auto e = prepare(p, s, workspace, /*fused=*/false, a, maxHeads); !e.empty()) return e;
  (void)cudaGetLastError();  // a stale error of an unrelated call must not be reported as this launch's
  const cudaError_t e = p.type == ActivationType::Float16 ? launchFor<ActivationType::Float16, false>(a, maxHeads, stream)
                                                          : launchFor<ActivationType::BFloat16, false>(a, maxHeads, stream);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "decode_attention launch");
}

namespace {

// The blocks of the kernel instance a multiprocessor holds, or 0 when the device cannot say.
template <ActivationType T, bool kFused>
int residentBlocksFor(int maxHeads, size_t sharedBytes) {
  const void* kernel = withMaxHeads(maxHeads, [](auto heads) {
    return reinterpret_cast<const void*>(decodeAttentionKernel<T, decltype(heads)::value, kFused>);
  });
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, sharedBytes) != cudaSuccess) {
    (void)cudaGetLastError();  // not this process's error to keep
    return 0;
  }
  return blocks;
}

}  // namespace

int decodeAttentionResidentBlocks(const DecodeAttentionProblem& p, bool fused) {
  // Asked once a (device, kernel instance, head dim): the eager decode loop calls this for every layer and step.
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return kDecodeAttentionResidentBlocks;
  }
  const int maxHeads = blockMaxHeads(p);
  const bool f16 = p.type == ActivationType::Float16;
  const auto key = std::make_tuple(device, f16, fused, maxHeads, p.headDim);
  static std::mutex mutex;
  static std::map<decltype(key), int> known;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  const size_t bytes = attentionLayout(p.headDim, maxHeads, fused).bytes;
  const int blocks = fused ? (f16 ? residentBlocksFor<ActivationType::Float16, true>(maxHeads, bytes)
                                  : residentBlocksFor<ActivationType::BFloat16, true>(maxHeads, bytes))
                           : (f16 ? residentBlocksFor<ActivationType::Float16, false>(maxHeads, bytes)
                                  : residentBlocksFor<ActivationType::BFloat16, false>(maxHeads, bytes));
  if (blocks < 1) return kDecodeAttentionResidentBlocks;  // asked again next time, not remembered
  known.emplace(key, blocks);
  return blocks;
}

std::string runDecodeRopeAttention(const RopeAttentionProblem& f, const DecodeAttentionSplit& s, void* workspace,
                                   CUstream_st* stream) {
  const RopeCacheProblem& r = f.rope;
  const DecodeAttentionProblem& p = f.attention;
  if (auto e = checkRopeCache(r); !e.empty()) return e;
  if (auto e = checkDecodeAttention(p); !e.empty()) return e;
  if (r.batch != p.batch || r.qHeads != p.qHeads || r.kvHeads != p.kvHeads || r.headDim != p.headDim ||
      r.capacity != p.capacity || r.type != p.type)
    return "the RoPE and attention parts describe different shapes or dtypes";
  if (r.qkv == nullptr || r.positions == nullptr || r.invFreq == nullptr || r.slot == nullptr || r.keys == nullptr ||
      r.values == nullptr || p.out == nullptr)
    return "missing input, position, frequency, slot, cache or output pointer";
  if (p.slot != r.slot || p.keys != r.keys || p.values != r.values)
    return "the attention must read the slot and the cache the RoPE part writes";
  if (!aligned16(r.qkv) || !aligned16(r.keys) || !aligned16(r.values) || !aligned16(p.out))
    return "tensors must be 16-byte aligned";
  AttentionArgs a;
  int maxHeads = 1;
  if (auto e = prepare(p, s, workspace, /*fused=*/true, a, maxHeads); !e.empty()) return e;
  if (s.splits > 1 && f.counters == nullptr)
    return "several splits need decodeRopeAttentionCounters() zeroed counters";
  if (s.splits > kDecodeRopeAttentionMaxSplits || size_t(2) * maxHeads * s.splits * sizeof(float) > a.l.qOffset)
    return "the fused attention merges at most " + std::to_string(kDecodeRopeAttentionMaxSplits) +
           " splits (decodeRopeAttentionSplit), got " + std::to_string(s.splits);
  a.rope = r;
  a.counters = f.counters;
  a.earlyTile = earlyTileEnabled();
  a.ropePreload = ropePreloadEnabled();
  (void)cudaGetLastError();  // a stale error of an unrelated call must not be reported as this launch's
  const cudaError_t e = p.type == ActivationType::Float16 ? launchFor<ActivationType::Float16, true>(a, maxHeads, stream)
                                                          : launchFor<ActivationType::BFloat16, true>(a, maxHeads, stream);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "decode_rope_attention launch");
}

}  // namespace pareto::kernels
