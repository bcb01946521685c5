// bitmask_nm_gemv (see BitmaskNMGemv.h for the layout and GemvProblem.h for the work decomposition).
#include <type_traits>

#include "BitmaskNMGemv.h"
#include "BitmaskMetadata.cuh"
#include "GemvDriver.cuh"
#include "TensorCoreOps.cuh"

namespace pareto::kernels {
namespace {

// The driver's chunk (GemvDriver.cuh) is a part of the layout's 256-column chunk: kWords consecutive mask words
// of it (4 at K ≤ 16, 2 at K = 24), i.e. kWords of the lane's 8 mask words and kWords·K/8 of its K value pieces
// (word k's K values are values k·K ... k·K + K − 1 of the chunk, so words h·kWords ... are pieces
// h·kPieces ..., kWords·K being a multiple of 8). A whole chunk in registers is 2 + K uint4 (72 registers at
// K = 16, 104 at K = 24); the driver's double buffer holds two fragments, which at K = 16 would leave room for
// two blocks a multiprocessor and at K = 24 would not fit at all. Parts are 1 + K/2 uint4 (K ≤ 16: 4.6 KB a warp
// at K = 16) or 0.5 + 6 uint4 (K = 24: 3.3 KB), so two fit in the 128 registers of 4 blocks a multiprocessor
// (GemvProblem.h: kResidentBlocks). The layout is unchanged and the words are walked in the same order (chunk
// c = parts kParts·c ... kParts·c + kParts − 1), so the sums are accumulated in the same order.
template <int K, ActivationType T>
struct BitmaskFormat {
  static constexpr bool kFolds = false;  // the decode step's ops run beside these kernels (FoldsOf)
  static constexpr int kWords = K <= 16 ? 4 : 2;                      // mask words of a part
  static constexpr int kParts = kBitmaskWordsPerChunk / kWords;       // parts of a layout chunk
  static constexpr int kChunkCols = kBitmaskChunkCols / kParts;       // the driver's chunk: one part
  static constexpr int kPieces = kWords * K / 8;                      // kWords · K values · 2 bytes / 16 bytes
  static_assert(kWords * K % 8 == 0, "a part's values must be whole 16-byte pieces");
  struct Params {
    const uint4* masks;
    const uint4* values;
    int64_t chunks;  // the layout's 256-column chunks per row (the driver counts parts: kParts · chunks)
  };
  using MaskVector = std::conditional_t<kWords == 4, uint4, uint2>;
  struct Fragment {
    MaskVector mask;       // the part's kWords mask words
    uint4 value[kPieces];  // its kWords·K kept values
  };
  struct RowState {};

  __device__ static __forceinline__ Fragment load(const Params& w, int64_t group, int64_t part, int lane) {
    const int64_t base = group * w.chunks + part / kParts;
    const int h = int(part % kParts);
    Fragment f;
    // The lane's 8 mask words of the chunk are 32 contiguous bytes: kParts vectors of kWords words.
    f.mask = detail::loadStreaming(reinterpret_cast<const MaskVector*>(w.masks + (base * 32 + lane) * 2) + h);
#pragma unroll
    for (int i = 0; i < kPieces; ++i)
      f.value[i] = detail::loadStreaming(w.values + (base * K + h * kPieces + i) * 32 + lane);
    return f;
  }

  __device__ static __forceinline__ RowState rowBegin(const Params&, int64_t) { return {}; }

  template <int B>
  __device__ static __forceinline__ void compute(const Params&, const Fragment& f, int64_t, int64_t, int,
                                                 const float* xs, int64_t xStride, const float*, int64_t,
                                                 float (&acc)[B]) {
    using A = detail::Act<T>;
    uint32_t words[kWords];
    if constexpr (kWords == 4) {
      words[0] = f.mask.x; words[1] = f.mask.y; words[2] = f.mask.z; words[3] = f.mask.w;
    } else {
      words[0] = f.mask.x; words[1] = f.mask.y;
    }
#pragma unroll
    for (int k = 0; k < kWords; ++k) {
      uint32_t mask = words[k];
      const float* xw = xs + k * 32;
      // Highest set bit first, so value j of the word runs from K-1 down to 0: its register is a constant.
#pragma unroll
      for (int j = K - 1; j >= 0; --j) {
        const int col = 31 - __clz(mask);
        mask ^= 1u << col;
        const int idx = k * K + j;            // compile-time after unrolling
        const uint4& piece = f.value[idx / 8];
        const int word = (idx % 8) / 2;
        const uint32_t bits = word == 0 ? piece.x : word == 1 ? piece.y : word == 2 ? piece.z : piece.w;
        const float value = (idx % 2 == 0) ? A::lowToFloat(bits) : A::highToFloat(bits);
#pragma unroll
        for (int b = 0; b < B; ++b) acc[b] = fmaf(value, xw[b * xStride + col], acc[b]);
      }
    }
  }

  template <int B, ActivationType TT>
  __device__ static __forceinline__ void rowExtra(const Params&, const RowState&, int64_t, int, int,
                                                  const detail::InputReader<TT>&, float (&)[B]) {}
};

// 2:4 on the sparse tensor cores (bitmaskUsesTensorCores; mma.sp), through the shared-memory ring of
// GemvDriver.cuh, from the lane-interleaved layout as it is (the float64 reference reads the same bytes).
//
// Stream: the ring's chunk is half a layout chunk (128 columns: 4 mask words, 64 kept values a row). The 32
// lanes copy its 8 value pieces (piece i: 16 bytes of each of the row group's 32 rows) and their 16 bytes of
// mask words with cp.async (values evict-first) into a slot of the warp's ring.
//
// A fragment: in 2:4 the kept values 2q and 2q + 1 of a row are those of its column group q, so value piece p
// (values 8p .. 8p + 7) holds groups 4p .. 4p + 3, i.e. columns 16p .. 16p + 15, and ldmatrix.x4 over it hands
// lane l = 4g + t the kept pair of group 4p + t of rows g, g + 8, g + 16, g + 24. That pair is exactly what
// m16n8k32 mma.sp takes as its compressed A columns 2t, 2t + 1 (pieces 2q) and 2t + 8, 2t + 9 (piece 2q + 1) of a
// k-block of 32 columns (mask word q): no expansion. The metadata of the k-block is the word's mask nibbles
// turned into index pairs (BitmaskMetadata.cuh): lane t = 0 holds the 16 bits of piece 2q, t = 1 those of piece
// 2q + 1, of the m-tile's two rows (one byte permute of the two rows' words, then sparseMetadata).
//
// B (x, batch as N) is dense in natural column order: lane t's rows of a k-block are columns 2t + (0, 1) + 8i,
// i = 0..3, so x is staged with each 32 columns' pairs in the order (0 4 8 12 | 1 5 9 13 | 2 6 10 14 | 3 7 11 15)
// and a lane's B registers are one 16-byte load a k-block and batch tile. 2 ldmatrix, 1 x load, 2 permutes,
// 2 metadata conversions (5 instructions each) and 2 MMAs a batch tile for 1024 weights.
//
// Accumulator C: two chains (even and odd k-blocks) so that consecutive MMAs do not wait on each other; lane
// (g, t) of tile (m, n) holds rows 16m + g (c0, c1) and 16m + g + 8 (c2, c3) for batch rows 8n + 2t and 8n + 2t + 1.
template <ActivationType T>
struct BitmaskMmaFormat {
  static constexpr bool kFolds = false;  // the decode step's ops run beside these kernels (FoldsOf)
  static constexpr int kChunkCols = kBitmaskMmaChunkCols;
  static constexpr int kRingStages = kBitmaskRingStages;
  static constexpr int kSlotBytes = kBitmaskSlotBytes;
  static constexpr int kPadHalves = kBitmaskSparseStagePadHalves;
  struct Params {
    const uint4* masks;
    const uint4* values;
    int64_t chunks;  // the layout's 256-column chunks a row (the ring's chunks are halves of them)
  };
  template <int B> static constexpr int kTiles = B > 8 ? 2 : 1;  // batch tiles of 8
  template <int B> struct Accumulator {
    float v[2][2][kTiles<B>][4];  // [chain][m-tile][batch tile][register]
  };

  template <int B> __host__ __device__ static constexpr int64_t stagedWords(int64_t sliceCols) {
    return int64_t(B) * (sliceCols + kPadHalves) / 2;
  }
  // Columns col .. col + 7 are pairs 4c .. 4c + 3 (c = (col mod 32) / 8) of their 32 columns; pair 4i + t goes to
  // word 4t + i of the 32 columns' 16 words.
  template <int B>
  __device__ static __forceinline__ void stage(uint32_t* xs, int64_t b, int64_t col, int64_t sliceCols,
                                               const uint4& v) {
    uint32_t* block = xs + b * ((sliceCols + kPadHalves) / 2) + (col & ~int64_t(31)) / 2 + ((col & 31) >> 3);
    block[0] = v.x, block[4] = v.y, block[8] = v.z, block[12] = v.w;
  }

  __device__ static __forceinline__ void copyChunk(const Params& w, int64_t group, int64_t chunk, int lane,
                                                   uint32_t slot, uint64_t evictFirst) {
    const int64_t base = group * w.chunks + chunk / 2;
    const int half = int(chunk % 2);
    const uint4* values = w.values + (base * 16 + half * 8) * 32 + lane;
#pragma unroll
    for (int i = 0; i < 8; ++i) detail::copyAsyncEvictFirst(slot + i * 512 + lane * 16, values + i * 32, evictFirst);
    // The lane's 8 mask words of the layout chunk are 32 contiguous bytes; the half's 4 are one 16-byte vector.
    detail::copyAsyncEvictFirst(slot + kBitmaskValueBytes + lane * 16, w.masks + (base * 32 + lane) * 2 + half,
                                evictFirst);
  }

  template <int B>
  __device__ static __forceinline__ void computeSlot(const Params&, const uint8_t* slot, int64_t, int64_t,
                                                     int64_t localChunk, int lane, const uint32_t* xs,
                                                     int64_t sliceCols, const float*, int64_t, Accumulator<B>& acc) {
    constexpr int kN = kTiles<B>;
    const int g = lane >> 2, t = lane & 3;
    const int64_t rowWords = (sliceCols + kPadHalves) / 2;
    const uint32_t* xRow[kN];
#pragma unroll
    for (int n = 0; n < kN; ++n)
      xRow[n] = 8 * n + g < B ? xs + (8 * n + g) * rowWords + localChunk * (kChunkCols / 2) + 4 * t : nullptr;
    // The 4 mask words of the lane's rows g + 8j.
    uint4 mw[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) mw[j] = *reinterpret_cast<const uint4*>(slot + kBitmaskValueBytes + (g + 8 * j) * 16);
    // Lane t = 0 of a quad gives the metadata of piece 2q (bits 0-15 of word q), t = 1 that of piece 2q + 1.
    const uint32_t rowHalves = (t & 1) ? 0x7632u : 0x5410u;
    const uint32_t slotAddress = detail::sharedAddressOf(slot);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      uint32_t a0[4], a1[4];
      detail::ldmatrixX4(a0, slotAddress + (2 * q) * 512 + lane * 16);
      detail::ldmatrixX4(a1, slotAddress + (2 * q + 1) * 512 + lane * 16);
      uint4 xb[kN];
#pragma unroll
      for (int n = 0; n < kN; ++n)
        xb[n] = xRow[n] ? *reinterpret_cast<const uint4*>(xRow[n] + 16 * q) : make_uint4(0, 0, 0, 0);
      const uint32_t word[4] = {q == 0 ? mw[0].x : q == 1 ? mw[0].y : q == 2 ? mw[0].z : mw[0].w,
                                q == 0 ? mw[1].x : q == 1 ? mw[1].y : q == 2 ? mw[1].z : mw[1].w,
                                q == 0 ? mw[2].x : q == 1 ? mw[2].y : q == 2 ? mw[2].z : mw[2].w,
                                q == 0 ? mw[3].x : q == 1 ? mw[3].y : q == 2 ? mw[3].z : mw[3].w};
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const uint32_t metadata = detail::sparseMetadata(__byte_perm(word[2 * m], word[2 * m + 1], rowHalves));
#pragma unroll
        for (int n = 0; n < kN; ++n)
          detail::mmaSparse16832<T>(acc.v[q % 2][m][n], a0[2 * m], a0[2 * m + 1], a1[2 * m], a1[2 * m + 1],
                                    xb[n].x, xb[n].y, xb[n].z, xb[n].w, metadata);
      }
    }
  }

  template <int B>
  __device__ static __forceinline__ void finish(const Accumulator<B>& acc, int lane, float (&total)[B]) {
    float c[2][kTiles<B>][4];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < kTiles<B>; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) c[m][n][i] = acc.v[0][m][n][i] + acc.v[1][m][n][i];
    detail::rowsOfFragments<B, kTiles<B>>(c, lane, total);
  }
};

// The other patterns of 16 kept values a 32-column word (16:32, 8:16, 4:8) on the tensor cores
// (bitmaskUsesTensorCores), through the same ring and slots as BitmaskMmaFormat (the layout as it is; the float64
// reference reads the same bytes). A word's kept values may lie anywhere in it, so there is no fixed place for
// them in a fragment: for each of the chunk's 4 words, each lane zeroes its row of the warp's dense 32 × 32 tile
// in shared memory (4 16-byte stores) and scatters its 16 kept values into it (bit-scan from the highest set bit,
// one 16-bit store each; value j of the word is the j-th set bit, a compile-time register after unrolling); after
// a __syncwarp, ldmatrix.x4 reads the tile as the A fragments of the two m-tiles and two k-blocks, in natural
// column order. x is staged with each 16 columns in the order (0 1 8 9 | 2 3 10 11 | 4 5 12 13 | 6 7 14 15), so
// that the lane's B fragment of a k-block (k slots 2t, 2t + 1, 2t + 8, 2t + 9) is one 8-byte load. Per word and
// lane: 2 value loads, 4 zeroing stores, 16 bit-scans and stores, 4 ldmatrix, 1 x load and 4 MMAs a batch tile.
template <ActivationType T>
struct BitmaskScatterMmaFormat {
  static constexpr bool kFolds = false;  // the decode step's ops run beside these kernels (FoldsOf)
  using Slots = BitmaskMmaFormat<T>;
  static constexpr int kChunkCols = kBitmaskMmaChunkCols;
  static constexpr int kRingStages = kBitmaskRingStages;
  static constexpr int kSlotBytes = kBitmaskSlotBytes;
  static constexpr int kPadHalves = kBitmaskStagePadHalves;
  static constexpr int kTileRowBytes = kBitmaskScatterTileBytes / 32;
  using Params = typename Slots::Params;
  template <int B> static constexpr int kTiles = B > 8 ? 2 : 1;  // batch tiles of 8
  template <int B> struct Accumulator {
    float v[2][2][kTiles<B>][4];  // [chain: k-block][m-tile][batch tile][register]
  };

  // The staged x (16-bit rows padded by kPadHalves, in the k order above), then the warps' tiles.
  template <int B> __host__ __device__ static constexpr int64_t xWords(int64_t sliceCols) {
    return int64_t(B) * (sliceCols + kPadHalves) / 2;
  }
  template <int B> __host__ __device__ static constexpr int64_t stagedWords(int64_t sliceCols) {
    return xWords<B>(sliceCols) + int64_t(kBitmaskScatterTilesBytes) / 4;
  }
  template <int B>
  __device__ static __forceinline__ void stage(uint32_t* xs, int64_t b, int64_t col, int64_t sliceCols,
                                               const uint4& v) {
    uint32_t* block = xs + b * ((sliceCols + kPadHalves) / 2) + (col & ~int64_t(15)) / 2 + ((col & 8) ? 1 : 0);
    block[0] = v.x, block[2] = v.y, block[4] = v.z, block[6] = v.w;
  }

  __device__ static __forceinline__ void copyChunk(const Params& w, int64_t group, int64_t chunk, int lane,
                                                   uint32_t slot, uint64_t evictFirst) {
    Slots::copyChunk(w, group, chunk, lane, slot, evictFirst);
  }

  template <int B>
  __device__ static __forceinline__ void computeSlot(const Params&, const uint8_t* slot, int64_t, int64_t,
                                                     int64_t localChunk, int lane, const uint32_t* xs,
                                                     int64_t sliceCols, const float*, int64_t, Accumulator<B>& acc) {
    constexpr int kN = kTiles<B>;
    const int g = lane >> 2, t = lane & 3;
    const int64_t rowWords = (sliceCols + kPadHalves) / 2;
    const uint32_t* xRow[kN];
#pragma unroll
    for (int n = 0; n < kN; ++n)
      xRow[n] = 8 * n + g < B ? xs + (8 * n + g) * rowWords + localChunk * (kChunkCols / 2) + 2 * t : nullptr;
    uint8_t* tile = reinterpret_cast<uint8_t*>(const_cast<uint32_t*>(xs) + xWords<B>(sliceCols)) +
                    (threadIdx.x / 32) * kBitmaskScatterTileBytes;
    uint8_t* myRow = tile + lane * kTileRowBytes;
    const uint32_t tileAddress = detail::sharedAddressOf(tile);
    // ldmatrix.x4 of m-tile m, k-block kb: lane i names row 16m + i % 16, columns 16kb + 8 (i / 16) ..
    const uint32_t fragmentAddress = tileAddress + (lane & 15) * kTileRowBytes + (lane >> 4) * 16;
    const uint4 masks = *reinterpret_cast<const uint4*>(slot + kBitmaskValueBytes + lane * 16);
    const uint32_t maskWords[4] = {masks.x, masks.y, masks.z, masks.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint4 lo = *reinterpret_cast<const uint4*>(slot + (2 * k) * 512 + lane * 16);
      const uint4 hi = *reinterpret_cast<const uint4*>(slot + (2 * k + 1) * 512 + lane * 16);
      const uint32_t values[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      if (k > 0) __syncwarp();  // every lane has read the previous word's tile
#pragma unroll
      for (int q = 0; q < 4; ++q) reinterpret_cast<uint4*>(myRow)[q] = make_uint4(0, 0, 0, 0);
      uint32_t mask = maskWords[k];
#pragma unroll
      for (int j = 15; j >= 0; --j) {
        const int col = 31 - __clz(mask);
        mask ^= 1u << col;
        const uint32_t bits = values[j / 2];
        *reinterpret_cast<unsigned short*>(myRow + 2 * col) = static_cast<unsigned short>(j % 2 == 0 ? bits : bits >> 16);
      }
      __syncwarp();  // every lane's row is in the tile
#pragma unroll
      for (int kb = 0; kb < 2; ++kb) {
        uint32_t a[2][4];
#pragma unroll
        for (int m = 0; m < 2; ++m) detail::ldmatrixX4(a[m], fragmentAddress + m * 16 * kTileRowBytes + kb * 32);
        uint2 xb[kN];
#pragma unroll
        for (int n = 0; n < kN; ++n)
          xb[n] = xRow[n] ? *reinterpret_cast<const uint2*>(xRow[n] + 16 * k + 8 * kb) : make_uint2(0, 0);
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int n = 0; n < kN; ++n)
            detail::mma16816<T>(acc.v[kb][m][n], a[m][0], a[m][1], a[m][2], a[m][3], xb[n].x, xb[n].y);
      }
    }
    // The ring kernel's __syncwarp after this chunk orders the last word's ldmatrix before the next chunk's
    // zeroing of the tile.
  }

  template <int B>
  __device__ static __forceinline__ void finish(const Accumulator<B>& acc, int lane, float (&total)[B]) {
    float c[2][kTiles<B>][4];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < kTiles<B>; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) c[m][n][i] = acc.v[0][m][n][i] + acc.v[1][m][n][i];
    detail::rowsOfFragments<B, kTiles<B>>(c, lane, total);
  }
};

template <int K, ActivationType T>
std::string launch(const GemvProblem& p, const BitmaskNMGemvWeight& w, const GemvSplit& s, float* partials,
                   int* counters, cudaStream_t stream) {
  if constexpr (K == 16) {
    if (bitmaskUsesTensorCores(w.n, w.m, compiledBatch(p.batch))) {
      using M = BitmaskMmaFormat<T>;
      const typename M::Params params{reinterpret_cast<const uint4*>(w.masks), static_cast<const uint4*>(w.values),
                                      bitmaskChunks(p.cols)};
      // The split (bitmaskNMGemvSplit) counts the ring's 128-column chunks and sized the shared memory for them.
      const auto a = detail::makeLaunch(p, s, ceilDiv(p.cols, kBitmaskMmaChunkCols), 0, partials, counters);
      const cudaError_t e = w.n == 2 && w.m == 4
                                ? detail::launchPackedGemv<M, T, false>(params, a, s.sharedBytes, stream)
                                : detail::launchPackedGemv<BitmaskScatterMmaFormat<T>, T, false>(params, a,
                                                                                                 s.sharedBytes, stream);
      return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "bitmask_nm_gemv launch");
    }
  }
  using F = BitmaskFormat<K, T>;
  typename F::Params params{reinterpret_cast<const uint4*>(w.masks), static_cast<const uint4*>(w.values),
                            bitmaskChunks(p.cols)};
  // The split counts the layout's 256-column chunks; the kernel walks parts of them (see BitmaskFormat): the
  // same slices of columns, kParts times as many chunks of 1/kParts the width.
  GemvSplit parts = s;
  parts.chunksPerSplit = F::kParts * s.chunksPerSplit;
  const auto a = detail::makeLaunch(p, parts, F::kParts * params.chunks, 0, partials, counters);
  const cudaError_t e = detail::launchPackedGemv<F, T, false>(params, a, s.sharedBytes, stream);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "bitmask_nm_gemv launch");
}

template <int K>
std::string launchTyped(const GemvProblem& p, const BitmaskNMGemvWeight& w, const GemvSplit& s, float* partials,
                        int* counters, cudaStream_t stream) {
  return p.type == ActivationType::Float16 ? launch<K, ActivationType::Float16>(p, w, s, partials, counters, stream)
                                           : launch<K, ActivationType::BFloat16>(p, w, s, partials, counters, stream);
}

}  // namespace



std::string runBitmaskNMGemv(const GemvProblem& p, const BitmaskNMGemvWeight& w, const GemvSplit& s,
                             float* partials, int* counters, CUstream_st* stream) {
  if (auto e = checkBitmaskNMGemv(p, w); !e.empty()) return e;
  switch (bitmaskKeptPerWord(w.n, w.m)) {
    case 8: return launchTyped<8>(p, w, s, partials, counters, stream);
    case 16: return launchTyped<16>(p, w, s, partials, counters, stream);
    default: return launchTyped<24>(p, w, s, partials, counters, stream);
  }
}

}  // namespace pareto::kernels
