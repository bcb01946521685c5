// spqr_gemv (see SpqrGemv.h for the layout, GemvProblem.h for the work decomposition).
#include "GemvDriver.cuh"
#include "SpqrGemv.h"
#include "TensorCoreOps.cuh"

namespace pareto::kernels {
namespace {

template <int Bits, ActivationType T>
struct SpqrFormat {
  static constexpr bool kFolds = false;  // the decode step's ops run beside these kernels (FoldsOf)
  static constexpr int kChunkCols = kSpqrChunkCols;
  static constexpr int kWords = 4 * Bits;  // 128 codes · Bits bits / 32
  // Pairs of columns whose codes sit together in one word (SpqrGemv.h); at 3 bits the last 4 take spare bits.
  static constexpr int kMainPairs = spqrPairsPerWord(Bits) * kWords;
  struct Params {
    const uint4* codes;
    const uint2* stats;
    const __half2* second;
    const int32_t* rowOffsets;
    const uint16_t* outlierColumns;
    const __half* outlierValues;
    int64_t chunks;
    int scaleGroupShift;
    int secondPerGroup;  // 32 / scaleGroup
    bool earlySearch;    // the ring's outlier searches begun before the wait (spqrEarlySearchEnabled)
  };

  // f = 0.5 + q/256 for the code of column `col` of the lane's chunk (q placed at bits 16.. under exponent 0x3F,
  // as in quant_group_gemv); `col` is a compile-time constant after unrolling.
  __device__ static __forceinline__ float codeFloat(const uint32_t (&s)[kWords], int col) {
    constexpr uint32_t kMask = (1u << Bits) - 1u;
    uint32_t t = 0;
    if (col / 2 < kMainPairs) {  // the code's bits together in one word
      const int at = spqrCodeBit(Bits, col, 0), wi = at / 32, sh = at % 32;
      t = (sh <= 16 ? s[wi] << (16 - sh) : s[wi] >> (sh - 16)) & (kMask << 16);
    } else {  // 3 bits: one spare bit of each of three words
#pragma unroll
      for (int b = 0; b < Bits; ++b) {
        const int at = spqrCodeBit(Bits, col, b), wi = at / 32, sh = at % 32;
        t |= (sh <= 16 + b ? s[wi] << (16 + b - sh) : s[wi] >> (sh - 16 - b)) & (1u << (16 + b));
      }
    }
    return __uint_as_float(t | 0x3F000000u);
  }

  // A lane's code bit stream and statistics of one chunk (GemvDriver.cuh: `load` issues them, `compute` uses
  // them); the second-level grids are small and shared by 32/scaleGroup lanes, so `compute` reads them cached.
  struct Fragment {
    uint4 code[Bits];
    uint2 stats;
  };
  // The row's outlier range [begin, end): read before x is staged, so that the outlier loads after the chunks
  // start from known indices instead of waiting one more memory latency for them.
  struct RowState {
    int32_t begin, end;
  };

  __device__ static __forceinline__ Fragment load(const Params& w, int64_t group, int64_t chunk, int lane) {
    const int64_t base = group * w.chunks + chunk;
    Fragment f;
#pragma unroll
    for (int i = 0; i < Bits; ++i) f.code[i] = detail::loadStreaming(w.codes + (base * Bits + i) * 32 + lane);
    f.stats = detail::loadStreaming(w.stats + base * 32 + lane);
    return f;
  }

  // `row` < 32·G: rowOffsets has an entry for every padded row and one more (padded rows: no outliers).
  __device__ static __forceinline__ RowState rowBegin(const Params& w, int64_t row) {
    return {__ldg(w.rowOffsets + row), __ldg(w.rowOffsets + row + 1)};
  }

  template <int B>
  __device__ static __forceinline__ void compute(const Params& w, const Fragment& f, int64_t group, int64_t chunk,
                                                 int lane, const float* xs, int64_t xStride, const float* xsum,
                                                 int64_t sumStride, float (&acc)[B]) {
    const int64_t base = group * w.chunks + chunk;
    uint32_t s[kWords];
#pragma unroll
    for (int i = 0; i < Bits; ++i) {
      s[4 * i] = f.code[i].x; s[4 * i + 1] = f.code[i].y; s[4 * i + 2] = f.code[i].z; s[4 * i + 3] = f.code[i].w;
    }
    const uint2 st = f.stats;
#pragma unroll
    for (int g = 0; g < 8; ++g) {
      float sum[B];
#pragma unroll
      for (int b = 0; b < B; ++b) sum[b] = 0.f;
#pragma unroll
      for (int i = 0; i < 16; i += 4) {
        const int col = g * 16 + i;
        const float f0 = codeFloat(s, col), f1 = codeFloat(s, col + 1);
        const float f2 = codeFloat(s, col + 2), f3 = codeFloat(s, col + 3);
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const float4 x = *reinterpret_cast<const float4*>(xs + b * xStride + col);
          sum[b] = fmaf(f0, x.x, fmaf(f1, x.y, fmaf(f2, x.z, fmaf(f3, x.w, sum[b]))));
        }
      }
      const uint32_t statByte = ((g < 4 ? st.x : st.y) >> (8 * (g % 4))) & 0xFFu;
      const __half2 grid = __ldg(w.second + (base * 8 + g) * w.secondPerGroup + (lane >> w.scaleGroupShift));
      const float scale = fmaf(float(statByte & 0xFu), __high2float(grid), __low2float(grid));
      const float offset = 128.f + float(statByte >> 4);
#pragma unroll
      for (int b = 0; b < B; ++b)
        acc[b] = fmaf(scale, fmaf(256.f, sum[b], -offset * xsum[b * sumStride + g]), acc[b]);
    }
  }

  // The lane's outliers begin + part, begin + part + parts, ... in that order (as before), kU at a time: the
  // column and value loads of kU outliers are issued together, then their x loads, then the FMAs, so a batch of
  // kU outliers costs two dependent memory latencies instead of 2·kU. x rows past `batch` are not read (the
  // compiled B may exceed the batch; x has exactly `batch` rows) and contribute 0 to lanes nobody writes out. x
  // is read through the block's InputReader: a fused input (an RMSNorm, SiLU·mul) is computed for the outlier's
  // column as the staging computes it.
  template <int B, ActivationType TT>
  __device__ static __forceinline__ void rowExtra(const Params& w, const RowState& r, int64_t, int part, int parts,
                                                  const detail::InputReader<TT>& in, float (&acc)[B]) {
    const int batch = in.batch;
    constexpr int kU = B <= 2 ? 8 : B <= 8 ? 4 : 2;
    for (int32_t i = r.begin + part; i < r.end; i += kU * parts) {
      int32_t column[kU];
      float value[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int32_t j = i + u * parts;
        const bool live = j < r.end;
        column[u] = live ? int32_t(__ldg(w.outlierColumns + j)) : 0;
        value[u] = live ? __half2float(__ldg(w.outlierValues + j)) : 0.f;
      }
      float xv[kU][B];
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int b = 0; b < B; ++b)
          xv[u][b] = b < batch && i + u * parts < r.end ? in.at(b, column[u]) : 0.f;
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (i + u * parts < r.end)
#pragma unroll
          for (int b = 0; b < B; ++b) acc[b] = fmaf(value[u], xv[u][b], acc[b]);
    }
  }
};

// SpQR on the tensor cores (spqrUsesTensorCores), through the shared-memory ring of GemvDriver.cuh, from the
// layout as it is (the float64 reference reads the same bytes).
//
// Stream: a slot holds the chunk's Bits code pieces (cp.async, evict-first), the 32 lanes' statistics (8 bytes
// each) and the chunk's second-level grids (8 groups × 32 / scaleGroup pairs of 4 bytes).
//
// A fragment: the codes of a row are a bit stream in its own lane, and a group's scale belongs to the row, so
// each lane dequantizes its own row: for each 32 columns (two groups), a pair of columns at a time, the two codes
// go into the low and high 16 bits under the exponent of 1024 (fp16) or 128 (bf16) and one HSUB2 of (exponent +
// z) makes them (q − z), exact in both types; 4 16-byte stores put the row into the warp's dense 32 × 32 tile in
// shared memory, and after a __syncwarp ldmatrix.x4 reads it as the A fragments of the two m-tiles and two
// k-blocks (a k-block is one group). Each group's MMA starts from zero and its C fragment is added to the
// accumulator times its rows' scales (fp32, computed by their own lanes and passed by shuffles): the result is
// Σ_group ŝ · Σ (q − z) · x, as the reference defines it. x is staged with each 16 columns in the order
// (0 1 8 9 | 2 3 10 11 | 4 5 12 13 | 6 7 14 15), so a lane's B fragment of a group is one 8-byte load.
//
// Outliers: each block adds those of its own columns after the chunks, with x from the staging (the FFMA path's
// gather from global memory, 32 scattered addresses a warp load, went to L2 here, where the ring leaves little
// L1: NOTES v6f). The lane finds its row's outliers of the block's columns by two binary searches over the
// row's sorted columns, one step a chunk (Accumulator, searchStep). Each step waits for the column the last one
// loaded (an L2 round trip), and a row's search takes bit_width(outliers) + 1 steps: 7 at 41 outliers, 9 at 143, so
// a warp of fewer chunks (o at batch 2-16: 2) finishes the search after its last chunk, several round trips on the
// GEMV's critical path. Unless PARETO_SPQR_EARLY_SEARCH=0, the steps the chunks cannot take are done before the wait
// (ringRowStart), where the block's start ahead of its release hides them.
template <int Bits, ActivationType T>
struct SpqrMmaFormat {
  static constexpr bool kFolds = false;  // the decode step's ops run beside these kernels (FoldsOf)
  using Plain = SpqrFormat<Bits, T>;
  using Params = typename Plain::Params;
  static constexpr int kChunkCols = kSpqrChunkCols;
  static constexpr int kRingStages = kSpqrRingStages;
  static constexpr int kSlotBytes = spqrSlotBytes(Bits);
  static constexpr int kCodeBytes = Bits * 512;
  static constexpr int kPadHalves = kSpqrStagePadHalves;
  static constexpr int kTileRowBytes = kSpqrTileBytes / 32;
  static constexpr int kWords = 4 * Bits;  // the lane's code stream of a chunk, 32-bit words
  // 1024 (fp16) or 128 (bf16): every code and zero (< 16) is an exact integer above it.
  static constexpr uint32_t kExponent = T == ActivationType::Float16 ? 0x6400u : 0x4300u;
  template <int B> static constexpr int kTiles = B > 8 ? 2 : 1;  // batch tiles of 8
  // The lane's binary searches for the first of its row's outliers at or after the block's first column (k = 0) and
  // past its last (k = 1): one step a chunk (searchStep), so that each column load's latency passes under a chunk's
  // work; ringRowExtra finishes them. Begun before the wait unless PARETO_SPQR_EARLY_SEARCH=0 (GemvDriver.cuh
  // RingRowStartOf: ringRowStart, then ringRowAdopt hands it to the accumulator).
  struct RowStart {
    int32_t lo[2], hi[2];
    uint32_t probe[2];  // the column at (lo + hi) / 2 loaded by the last step, when `probing`
    bool probing;
    bool started;       // the range was read and the search begun before the wait
  };
  template <int B> struct Accumulator {
    float v[2][kTiles<B>][4];  // [m-tile][batch tile][register]
    RowStart search;
  };
  static constexpr bool kRingRowExtra = true;

  // The row's outlier range; the first step only loads.
  __device__ static __forceinline__ void beginSearch(const Params& w, RowStart& s, int64_t row) {
    s.lo[0] = s.lo[1] = __ldg(w.rowOffsets + row);
    s.hi[0] = s.hi[1] = __ldg(w.rowOffsets + row + 1);
    s.probing = false;
  }
  // One step of both searches.
  __device__ static __forceinline__ void searchStep(const Params& w, RowStart& s, const int64_t (&target)[2]) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if (s.probing && s.lo[k] < s.hi[k]) {
        const int32_t mid = (s.lo[k] + s.hi[k]) >> 1;
        if (int64_t(s.probe[k]) < target[k]) s.lo[k] = mid + 1;
        else s.hi[k] = mid;
      }
    }
#pragma unroll
    for (int k = 0; k < 2; ++k)
      if (s.lo[k] < s.hi[k]) s.probe[k] = __ldg(w.outlierColumns + ((s.lo[k] + s.hi[k]) >> 1));
    s.probing = true;
  }

  // spqrEarlySearchEnabled: the row's outlier range and the search steps its `chunks` chunks will not take.
  // Nothing where the chunks take every step any row of the weight can need (a row of n columns has at most n
  // outliers): there, reading the range before the wait would only hold the warp for its load.
  __device__ static __forceinline__ void ringRowStart(const Params& w, RowStart& s, int64_t row, int64_t col0,
                                                      int64_t sliceCols, int chunks) {
    if (!w.earlySearch || chunks >= 33 - __clz(unsigned(w.chunks * kChunkCols))) return;
    beginSearch(w, s, row);
    s.started = true;
    const int64_t target[2] = {col0, col0 + sliceCols};
    const int outliers = s.hi[0] - s.lo[0];
    const int steps = (outliers > 0 ? 33 - __clz(outliers) : 0) - chunks;  // the search's bit_width + 1 steps
    for (int i = 0; i < steps; ++i) searchStep(w, s, target);
  }
  template <int B>
  __device__ static __forceinline__ void ringRowAdopt(Accumulator<B>& acc, const RowStart& s) {
    acc.search = s;
  }

  template <int B> __host__ __device__ static constexpr int64_t xWords(int64_t sliceCols) {
    return int64_t(B) * (sliceCols + kPadHalves) / 2;
  }
  template <int B> __host__ __device__ static constexpr int64_t stagedWords(int64_t sliceCols) {
    return xWords<B>(sliceCols) + int64_t(kSpqrTilesBytes) / 4;
  }
  template <int B>
  __device__ static __forceinline__ void stage(uint32_t* xs, int64_t b, int64_t col, int64_t sliceCols,
                                               const uint4& v) {
    uint32_t* block = xs + b * ((sliceCols + kPadHalves) / 2) + (col & ~int64_t(15)) / 2 + ((col & 8) ? 1 : 0);
    block[0] = v.x, block[2] = v.y, block[4] = v.z, block[6] = v.w;
  }

  __device__ static __forceinline__ void copyChunk(const Params& w, int64_t group, int64_t chunk, int lane,
                                                   uint32_t slot, uint64_t evictFirst) {
    const int64_t base = group * w.chunks + chunk;
#pragma unroll
    for (int i = 0; i < Bits; ++i)
      detail::copyAsyncEvictFirst(slot + i * 512 + lane * 16, w.codes + (base * Bits + i) * 32 + lane, evictFirst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(slot + kCodeBytes + lane * 8),
                 "l"(w.stats + base * 32 + lane)
                 : "memory");
    if (lane < 8 * w.secondPerGroup)
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(slot + kCodeBytes + kSpqrStatBytes + lane * 4),
                   "l"(w.second + base * 8 * w.secondPerGroup + lane)
                   : "memory");
  }

  // Columns 2i and 2i + 1 of the chunk (i compile-time) at bits 0 and 16 under kExponent: the layout keeps a pair's
  // two codes 16 bits apart in one word (SpqrGemv.h), so this is a shift and one LOP3 (the last 4 pairs at 3 bits
  // gather a bit from each of three words' spare bits 15 and 31).
  __device__ static __forceinline__ uint32_t codePair(const uint32_t (&s)[kWords], int i) {
    constexpr uint32_t kMask = (1u << Bits) - 1u;
    if (i < Plain::kMainPairs) {
      const int at = spqrCodeBit(Bits, 2 * i, 0), wi = at / 32, sh = at % 32;
      return ((s[wi] >> sh) & (kMask * 0x10001u)) | (kExponent * 0x10001u);
    }
    uint32_t v = kExponent * 0x10001u;
#pragma unroll
    for (int b = 0; b < Bits; ++b) {
      const int at = spqrCodeBit(Bits, 2 * i, b), wi = at / 32, sh = at % 32;
      v |= (s[wi] >> (sh - b)) & (0x10001u << b);
    }
    return v;
  }
  __device__ static __forceinline__ uint32_t subtractPair(uint32_t a, uint32_t b) {
    if constexpr (T == ActivationType::Float16) {
      const __half2 r = __hsub2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
      return *reinterpret_cast<const uint32_t*>(&r);
    } else {
      const __nv_bfloat162 r =
          __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
      return *reinterpret_cast<const uint32_t*>(&r);
    }
  }

  template <int B>
  __device__ static __forceinline__ void computeSlot(const Params& w, const uint8_t* slot, int64_t group,
                                                     int64_t chunk, int64_t localChunk, int lane, const uint32_t* xs,
                                                     int64_t sliceCols, const float*, int64_t, Accumulator<B>& acc) {
    constexpr int kN = kTiles<B>;
    const int g = lane >> 2, t = lane & 3;
    if (localChunk == 0 && !acc.search.started) {
      beginSearch(w, acc.search, group * kRowsPerGroup + lane);  // stepped by the next chunk, or by ringRowExtra
    } else {
      const int64_t col0 = (chunk - localChunk) * kChunkCols;
      searchStep(w, acc.search, {col0, col0 + sliceCols});
    }
    const int64_t rowWords = (sliceCols + kPadHalves) / 2;
    const uint32_t* xRow[kN];
#pragma unroll
    for (int n = 0; n < kN; ++n)
      xRow[n] = 8 * n + g < B ? xs + (8 * n + g) * rowWords + localChunk * (kChunkCols / 2) + 2 * t : nullptr;
    uint8_t* tile = reinterpret_cast<uint8_t*>(const_cast<uint32_t*>(xs) + xWords<B>(sliceCols)) +
                    (threadIdx.x / 32) * kSpqrTileBytes;
    uint4* myRow = reinterpret_cast<uint4*>(tile + lane * kTileRowBytes);
    // ldmatrix.x4 of m-tile m, k-block kb: lane i names row 16m + i % 16, columns 16kb + 8 (i / 16) ..
    const uint32_t fragmentAddress = detail::sharedAddressOf(tile) + (lane & 15) * kTileRowBytes + (lane >> 4) * 16;

    // The lane's row: its 8 groups' scales (fp32, as the FFMA path computes them) and zeros, and its codes.
    const uint2 st = *reinterpret_cast<const uint2*>(slot + kCodeBytes + lane * 8);
    const __half2* grids = reinterpret_cast<const __half2*>(slot + kCodeBytes + kSpqrStatBytes);
    float scale[8];
    uint32_t zero[8];
#pragma unroll
    for (int gi = 0; gi < 8; ++gi) {
      const uint32_t statByte = ((gi < 4 ? st.x : st.y) >> (8 * (gi % 4))) & 0xFFu;
      const __half2 grid = grids[gi * w.secondPerGroup + (lane >> w.scaleGroupShift)];
      scale[gi] = fmaf(float(statByte & 0xFu), __high2float(grid), __low2float(grid));
      zero[gi] = (kExponent + (statByte >> 4)) * 0x10001u;
    }
    uint32_t s[kWords];
#pragma unroll
    for (int i = 0; i < Bits; ++i) {
      const uint4 v = *reinterpret_cast<const uint4*>(slot + i * 512 + lane * 16);
      s[4 * i] = v.x, s[4 * i + 1] = v.y, s[4 * i + 2] = v.z, s[4 * i + 3] = v.w;
    }
#pragma unroll
    for (int h = 0; h < 4; ++h) {  // columns 32h .. 32h + 31: groups 2h and 2h + 1
      uint32_t word[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) word[i] = subtractPair(codePair(s, 16 * h + i), zero[2 * h + i / 8]);
      if (h > 0) __syncwarp();  // every lane has read the previous columns' tile
#pragma unroll
      for (int q = 0; q < 4; ++q)
        myRow[q] = make_uint4(word[4 * q], word[4 * q + 1], word[4 * q + 2], word[4 * q + 3]);
      __syncwarp();  // every lane's row is in the tile
#pragma unroll
      for (int kb = 0; kb < 2; ++kb) {
        const int gi = 2 * h + kb;
        uint32_t a[2][4];
#pragma unroll
        for (int m = 0; m < 2; ++m) detail::ldmatrixX4(a[m], fragmentAddress + m * 16 * kTileRowBytes + kb * 32);
        uint2 xb[kN];
#pragma unroll
        for (int n = 0; n < kN; ++n)
          xb[n] = xRow[n] ? *reinterpret_cast<const uint2*>(xRow[n] + 16 * h + 8 * kb) : make_uint2(0, 0);
        // C rows g and g + 8 of m-tile m are rows 16m + g and 16m + g + 8 of the group.
        float rowScale[2][2];
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          rowScale[m][0] = __shfl_sync(0xFFFFFFFFu, scale[gi], 16 * m + g);
          rowScale[m][1] = __shfl_sync(0xFFFFFFFFu, scale[gi], 16 * m + g + 8);
        }
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int n = 0; n < kN; ++n) {
            float d[4] = {0.f, 0.f, 0.f, 0.f};
            detail::mma16816<T>(d, a[m][0], a[m][1], a[m][2], a[m][3], xb[n].x, xb[n].y);
            acc.v[m][n][0] = fmaf(rowScale[m][0], d[0], acc.v[m][n][0]);
            acc.v[m][n][1] = fmaf(rowScale[m][0], d[1], acc.v[m][n][1]);
            acc.v[m][n][2] = fmaf(rowScale[m][1], d[2], acc.v[m][n][2]);
            acc.v[m][n][3] = fmaf(rowScale[m][1], d[3], acc.v[m][n][3]);
          }
      }
    }
    // The ring kernel's __syncwarp after this chunk orders the last ldmatrix before the next chunk's tile stores.
  }

  template <int B>
  __device__ static __forceinline__ void finish(const Accumulator<B>& acc, int lane, float (&total)[B]) {
    detail::rowsOfFragments<B, kTiles<B>>(acc.v, lane, total);
  }

  // The row's outliers in the block's columns, x read from the staging (zero for batch rows past the batch; a
  // column c of the slice sits at (c & ~15) + its place in the 16-column order above).
  template <int B, ActivationType TT>
  __device__ static __forceinline__ void ringRowExtra(const Params& w, Accumulator<B>& acc, int64_t, int64_t col0,
                                                      int64_t sliceCols, const uint32_t* xs, float (&total)[B]) {
    const int64_t target[2] = {col0, col0 + sliceCols};
    RowStart& search = acc.search;
    while (!search.probing || search.lo[0] < search.hi[0] || search.lo[1] < search.hi[1]) searchStep(w, search, target);
    const auto* xh = reinterpret_cast<const unsigned short*>(xs);
    const int64_t rowHalves = sliceCols + kPadHalves;
    constexpr int kU = 4;
    for (int32_t i = search.lo[0]; i < search.lo[1]; i += kU) {
      int local[kU];
      float value[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const bool live = i + u < search.lo[1];
        local[u] = live ? int(__ldg(w.outlierColumns + i + u) - col0) : 0;
        value[u] = live ? __half2float(__ldg(w.outlierValues + i + u)) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        // Columns outside the slice only where the row's columns are not increasing (not a valid weight): skipped,
        // never read outside the staging.
        const int l = local[u], c = l & 15;
        if (unsigned(l) >= unsigned(sliceCols)) continue;
        const int at = (l & ~15) + ((c & 7) >> 1) * 4 + (c >> 3) * 2 + (c & 1);
#pragma unroll
        for (int b = 0; b < B; ++b)
          total[b] = fmaf(value[u], detail::Act<TT>::lowToFloat(xh[b * rowHalves + at]), total[b]);
      }
    }
  }
};

template <int Bits, ActivationType T>
std::string launch(const GemvProblem& p, const SpqrGemvWeight& w, const GemvSplit& s, float* partials,
                   int* counters, cudaStream_t stream) {
  using F = SpqrFormat<Bits, T>;
  typename F::Params params{static_cast<const uint4*>(w.codes),
                            reinterpret_cast<const uint2*>(w.stats),
                            reinterpret_cast<const __half2*>(w.second),
                            w.rowOffsets,
                            w.outlierColumns,
                            reinterpret_cast<const __half*>(w.outlierValues),
                            spqrChunks(p.cols),
                            __builtin_ctz(unsigned(w.scaleGroup)),
                            32 / w.scaleGroup,
                            spqrEarlySearchEnabled()};
  if (spqrUsesTensorCores(w.scaleGroup, compiledBatch(p.batch))) {
    // The split (spqrGemvSplit) sized the shared memory for the ring; no activation sums (the zeros are subtracted
    // before the MMA).
    const auto a = detail::makeLaunch(p, s, params.chunks, 0, partials, counters);
    const cudaError_t e =
        detail::launchPackedGemv<SpqrMmaFormat<Bits, T>, T, false>(params, a, s.sharedBytes, stream);
    return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "spqr_gemv launch");
  }
  const auto a = detail::makeLaunch(p, s, params.chunks, kSpqrGroupCols, partials, counters);
  const cudaError_t e = detail::launchPackedGemv<F, T, false>(params, a, s.sharedBytes, stream);
  return e == cudaSuccess ? std::string() : detail::cudaErrorText(e, "spqr_gemv launch");
}

template <int Bits>
std::string launchTyped(const GemvProblem& p, const SpqrGemvWeight& w, const GemvSplit& s, float* partials,
                        int* counters, cudaStream_t stream) {
  return p.type == ActivationType::Float16
             ? launch<Bits, ActivationType::Float16>(p, w, s, partials, counters, stream)
             : launch<Bits, ActivationType::BFloat16>(p, w, s, partials, counters, stream);
}

}  // namespace



std::string runSpqrGemv(const GemvProblem& p, const SpqrGemvWeight& w, const GemvSplit& s, float* partials,
                        int* counters, CUstream_st* stream) {
  if (auto e = checkSpqrGemv(p, w); !e.empty()) return e;
  switch (w.bits) {
    case 2: return launchTyped<2>(p, w, s, partials, counters, stream);
    case 3: return launchTyped<3>(p, w, s, partials, counters, stream);
    default: return launchTyped<4>(p, w, s, partials, counters, stream);
  }
}

}  // namespace pareto::kernels
