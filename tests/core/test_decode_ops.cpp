// The fused decode ops (runtime/DecodeOps.h): their CPU paths against independent float64 formulations (every
// machine), and the CUDA kernels against the CPU paths on the same inputs (only where a CUDA device and a
// PARETO_CUDA build exist; skipped otherwise). Attention on CUDA is also held to the float64 result, since its
// fp32 scores and probabilities are closer to it than the CPU path's 16-bit ones.
//
// CPU: small random shapes, both 16-bit dtypes, with and without the optional parts (delta, q/k norms,
// validFrom), slots at the start, middle and end of the cache; what the op rounds by contract (the residual) is
// compared exactly, the rest within a bound fitting the dtype's roundings. GPU: fresh random inputs, outputs
// poisoned with NaN, cache slots outside the attended range set to NaN (so a kernel that reads them fails),
// ‖out − ref‖ / ‖ref‖ < 2e-3, and every cache slot but the written one compared bit for bit.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "InputErrors.h"
#include "kernels/DecodeOps.h"
#include "runtime/DecodeOps.h"
#include "util/Error.h"

#ifdef PARETO_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace pareto {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using test::inputErrorOf;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

uint64_t freshSeed() {
  static std::random_device device;
  return (uint64_t(device()) << 32) | device();
}

std::string dtypeName(at::ScalarType t) { return c10::toString(t); }

at::Tensor randomTensor(at::IntArrayRef sizes, at::ScalarType dtype, double scale = 1.0) {
  return (at::randn(sizes, at::TensorOptions().dtype(at::kFloat)) * scale).to(dtype);
}

double relativeError(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor o = out.to(at::kCPU).to(at::kDouble), r = ref.to(at::kCPU).to(at::kDouble);
  return (o - r).norm().item<double>() / r.norm().item<double>();
}

// The CPU paths round like transformers (each op's result to the dtype) while the references keep float64: a
// few roundings of 2^-11 (fp16) or 2^-8 (bf16) relative each. Over 300 random seeds the largest errors were
// 8e-4 / 6.2e-3 (RoPE with norms); attention, whose scores and probabilities are rounded too, reached
// 2.2e-3 / 1.1e-2 on the smallest shapes.
double cpuTolerance(at::ScalarType dtype) { return dtype == at::kBFloat16 ? 1.2e-2 : 2e-3; }
double cpuAttentionTolerance(at::ScalarType dtype) { return dtype == at::kBFloat16 ? 2.5e-2 : 5e-3; }

// RoPE inverse frequencies as transformers computes them (float32).
at::Tensor inverseFrequencies(int64_t headDim, double theta) {
  const at::Tensor exponents = at::arange(0, headDim, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) / float(headDim);
  return (1.0 / at::pow(at::scalar_tensor(theta, at::kFloat), exponents)).to(at::kFloat);
}

// ---- float64 formulations -----------------------------------------------------------------------------------

at::Tensor rmsNorm64(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xd = x.to(at::kDouble);
  return weight.to(at::kDouble) * xd / at::sqrt(xd.pow(2).mean(-1, true) + eps);
}

// x·cos(θ) + rotate_half(x)·sin(θ), θ[i] = position · invFreq[i mod D/2], written out per half.
at::Tensor rope64(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& invFreq) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor angle = (positions.to(at::kDouble).unsqueeze(-1) * invFreq.to(at::kDouble)).unsqueeze(1);
  const at::Tensor c = at::cos(angle), s = at::sin(angle);  // [B, 1, D/2]
  const at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
}

// Attention of row b, query head h over slots [lo, hi] of key-value head h / (Hq / Hkv), one head at a time.
at::Tensor attention64(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values, int64_t slot,
                       const std::vector<int64_t>& validFrom, double scale) {
  const int64_t B = q.size(0), Hq = q.size(1), D = q.size(2), Hkv = keys.size(1);
  at::Tensor out = at::empty({B, Hq * D}, at::TensorOptions().dtype(at::kDouble));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t lo = std::min(std::max<int64_t>(validFrom.empty() ? 0 : validFrom[size_t(b)], 0), slot);
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kv = h / (Hq / Hkv);
      const at::Tensor k = keys[b][kv].narrow(0, lo, slot - lo + 1).to(at::kDouble);
      const at::Tensor v = values[b][kv].narrow(0, lo, slot - lo + 1).to(at::kDouble);
      const at::Tensor scores = k.matmul(q[b][h].to(at::kDouble)) * scale;
      const at::Tensor e = at::exp(scores - scores.max());
      out[b].narrow(0, h * D, D).copy_((e / e.sum()).matmul(v));
    }
  }
  return out;
}

at::Tensor siluMul64(const at::Tensor& gateUp) {
  const int64_t F = gateUp.size(1) / 2;
  const at::Tensor g = gateUp.narrow(1, 0, F).to(at::kDouble), u = gateUp.narrow(1, F, F).to(at::kDouble);
  return g / (1 + at::exp(-g)) * u;
}

// Every slot of `cache` but `slot` equals `before`'s.
bool othersUntouched(const at::Tensor& cache, const at::Tensor& before, int64_t slot) {
  const int64_t C = cache.size(2);
  std::vector<int64_t> keep;
  for (int64_t s = 0; s < C; ++s)
    if (s != slot) keep.push_back(s);
  if (keep.empty()) return true;
  const at::Tensor index = at::tensor(keep, at::TensorOptions().dtype(at::kLong)).to(cache.device());
  return at::equal(cache.index_select(2, index).to(at::kCPU), before.index_select(2, index.to(before.device())).to(at::kCPU));
}

// Sets the cache slots a row does not attend (before validFrom[b], after slot) to NaN.
void poisonUnattended(at::Tensor& cache, int64_t slot, const std::vector<int64_t>& validFrom) {
  const int64_t C = cache.size(2);
  for (int64_t b = 0; b < cache.size(0); ++b) {
    const int64_t lo = std::min(std::max<int64_t>(validFrom.empty() ? 0 : validFrom[size_t(b)], 0), slot);
    if (lo > 0) cache[b].narrow(1, 0, lo).fill_(kNaN);
    if (slot + 1 < C) cache[b].narrow(1, slot + 1, C - slot - 1).fill_(kNaN);
  }
}

at::Tensor longTensor(const std::vector<int64_t>& v) { return at::tensor(v, at::TensorOptions().dtype(at::kLong)); }

const at::ScalarType kDtypes[] = {at::kHalf, at::kBFloat16};

// ---- CPU: the ATen paths against float64 --------------------------------------------------------------------

TEST(DecodeOpsCpu, AddRmsNormMatchesFloat64) {
  at::manual_seed(11);
  for (auto dtype : kDtypes) {
    for (int64_t B : {1, 3}) {
      for (int64_t H : {64, 96}) {
        for (bool withDelta : {true, false}) {
          const std::string label = dtypeName(dtype) + " B=" + std::to_string(B) + " H=" + std::to_string(H) +
                                    (withDelta ? " +delta" : " no delta");
          const at::Tensor residual = randomTensor({B, H}, dtype);
          const at::Tensor delta = withDelta ? randomTensor({B, H}, dtype, 0.5) : at::Tensor();
          const at::Tensor weight = (1 + randomTensor({H}, at::kDouble, 0.1)).to(dtype);
          const double eps = 1e-5;
          const at::Tensor summed = withDelta ? (residual.to(at::kDouble) + delta.to(at::kDouble)).to(dtype) : residual;
          at::Tensor r = residual.clone();
          at::Tensor out = at::full({B, H}, kNaN, residual.options());
          addRmsNorm(r, delta, weight, eps, out);
          EXPECT_TRUE(at::equal(r, summed)) << label << ": residual is not x + delta rounded once";
          EXPECT_LT(relativeError(out, rmsNorm64(summed, weight, eps)), cpuTolerance(dtype)) << label;
        }
      }
    }
  }
}

TEST(DecodeOpsCpu, RopeAndCacheWriteMatchesFloat64) {
  at::manual_seed(12);
  struct Heads { int64_t q, kv; };
  for (auto dtype : kDtypes) {
    for (int64_t B : {1, 3}) {
      for (Heads heads : {Heads{4, 2}, Heads{4, 4}}) {
        for (int64_t D : {16, 32}) {
          for (bool norms : {false, true}) {
            for (int64_t slot : {0, 5, 9}) {
              const std::string label = dtypeName(dtype) + " B=" + std::to_string(B) + " Hq=" + std::to_string(heads.q) +
                                        " Hkv=" + std::to_string(heads.kv) + " D=" + std::to_string(D) +
                                        (norms ? " q/k norms" : "") + " slot " + std::to_string(slot);
              const int64_t C = 10, Hq = heads.q, Hkv = heads.kv;
              const double eps = 1e-6;
              const at::Tensor qkv = randomTensor({B, (Hq + 2 * Hkv) * D}, dtype);
              const at::Tensor qNorm = norms ? (1 + randomTensor({D}, at::kDouble, 0.2)).to(dtype) : at::Tensor();
              const at::Tensor kNorm = norms ? (1 + randomTensor({D}, at::kDouble, 0.2)).to(dtype) : at::Tensor();
              const at::Tensor positions = longTensor({slot, slot + 1000, 3}).narrow(0, 0, B).contiguous();
              const at::Tensor invFreq = inverseFrequencies(D, 10000.0);
              const at::Tensor keysBefore = randomTensor({B, Hkv, C, D}, dtype);
              const at::Tensor valuesBefore = randomTensor({B, Hkv, C, D}, dtype);
              at::Tensor q = at::full({B, Hq, D}, kNaN, qkv.options());
              at::Tensor keys = keysBefore.clone(), values = valuesBefore.clone();
              ropeAndCacheWrite(qkv, qNorm, kNorm, eps, positions, invFreq, longTensor({slot}), q, keys, values);

              const at::Tensor heads64 = qkv.to(at::kDouble).view({B, Hq + 2 * Hkv, D});
              at::Tensor qh = heads64.narrow(1, 0, Hq), kh = heads64.narrow(1, Hq, Hkv);
              if (norms) {
                qh = rmsNorm64(qh, qNorm, eps);
                kh = rmsNorm64(kh, kNorm, eps);
              }
              EXPECT_LT(relativeError(q, rope64(qh, positions, invFreq)), cpuTolerance(dtype)) << label << ": q";
              EXPECT_LT(relativeError(keys.select(2, slot), rope64(kh, positions, invFreq)), cpuTolerance(dtype))
                  << label << ": key";
              EXPECT_TRUE(at::equal(values.select(2, slot), qkv.view({B, Hq + 2 * Hkv, D}).narrow(1, Hq + Hkv, Hkv)))
                  << label << ": the value must be stored unchanged";
              EXPECT_TRUE(othersUntouched(keys, keysBefore, slot)) << label << ": keys of other slots changed";
              EXPECT_TRUE(othersUntouched(values, valuesBefore, slot)) << label << ": values of other slots changed";
            }
          }
        }
      }
    }
  }
}

TEST(DecodeOpsCpu, DecodeAttentionMatchesFloat64) {
  at::manual_seed(13);
  struct Heads { int64_t q, kv; };
  for (auto dtype : kDtypes) {
    for (int64_t B : {1, 3}) {
      for (Heads heads : {Heads{4, 2}, Heads{4, 4}}) {
        for (int64_t D : {16, 32}) {
          for (int64_t slot : {0, 5, 9}) {
            for (bool padded : {false, true}) {
              const std::string label = dtypeName(dtype) + " B=" + std::to_string(B) + " Hq=" + std::to_string(heads.q) +
                                        " Hkv=" + std::to_string(heads.kv) + " D=" + std::to_string(D) + " slot " +
                                        std::to_string(slot) + (padded ? " left-padded" : "");
              const int64_t C = 10, Hq = heads.q, Hkv = heads.kv;
              // validFrom past the slot (row 1 at slot 0) is clamped: the row still attends its own slot.
              std::vector<int64_t> validFrom;
              if (padded) validFrom = std::vector<int64_t>{0, 3, 1};
              validFrom.resize(padded ? size_t(B) : 0);
              const at::Tensor q = randomTensor({B, Hq, D}, dtype);
              at::Tensor keys = randomTensor({B, Hkv, C, D}, dtype, 2.0);  // scores of a few units, not all ≈ 0
              at::Tensor values = randomTensor({B, Hkv, C, D}, dtype);
              const double scale = 1.0 / std::sqrt(double(D));
              const at::Tensor ref = attention64(q, keys, values, slot, validFrom, scale);
              poisonUnattended(keys, slot, validFrom);
              poisonUnattended(values, slot, validFrom);
              at::Tensor out = at::full({B, Hq * D}, kNaN, q.options());
              decodeAttention(q, keys, values, longTensor({slot}), padded ? longTensor(validFrom) : at::Tensor(), scale,
                              out);
              ASSERT_FALSE(out.isnan().any().item<bool>()) << label << ": reads unattended slots";
              EXPECT_LT(relativeError(out, ref), cpuAttentionTolerance(dtype)) << label;
            }
          }
        }
      }
    }
  }
}

// The fused op on the CPU is the two ops in sequence (the reference the CUDA kernel is held to); its own checks
// name it and its counters.
TEST(DecodeOpsCpu, RopeAttentionIsRopeThenAttention) {
  at::manual_seed(17);
  const int64_t B = 2, Hq = 4, Hkv = 2, D = 16, C = 10, slot = 6;
  for (auto dtype : kDtypes) {
    const at::Tensor qkv = randomTensor({B, (Hq + 2 * Hkv) * D}, dtype);
    const at::Tensor positions = longTensor({6, 3}), invFreq = inverseFrequencies(D, 10000.0);
    const at::Tensor keys0 = randomTensor({B, Hkv, C, D}, dtype), values0 = randomTensor({B, Hkv, C, D}, dtype);
    const at::Tensor validFrom = longTensor({0, 2});
    at::Tensor q = at::empty({B, Hq, D}, qkv.options()), k1 = keys0.clone(), v1 = values0.clone();
    at::Tensor out1 = at::empty({B, Hq * D}, qkv.options());
    ropeAndCacheWrite(qkv, {}, {}, 1e-6, positions, invFreq, longTensor({slot}), q, k1, v1);
    decodeAttention(q, k1, v1, longTensor({slot}), validFrom, 0.25, out1);
    at::Tensor k2 = keys0.clone(), v2 = values0.clone(), out2 = at::full({B, Hq * D}, kNaN, qkv.options());
    const at::Tensor counters = at::zeros({decodeAttentionCounters(B, Hq, Hkv)}, at::kInt);
    ropeAttention(qkv, {}, {}, 1e-6, positions, invFreq, longTensor({slot}), k2, v2, validFrom, 0.25, counters, out2);
    EXPECT_TRUE(at::equal(out1, out2)) << dtypeName(dtype);
    EXPECT_TRUE(at::equal(k1, k2)) << dtypeName(dtype);
    EXPECT_TRUE(at::equal(v1, v2)) << dtypeName(dtype);
    EXPECT_THAT(inputErrorOf([&] {
                  ropeAttention(qkv, {}, {}, 1e-6, positions, invFreq, longTensor({slot}), k2, v2, validFrom, 0.25,
                                at::zeros({3}, at::kInt), out2);
                }),
                AllOf(HasSubstr("ropeAttention"), HasSubstr("counters")));
  }
}

// The end of a greedy step: the first maximum of each row, and the next step's inputs moved on once.
TEST(DecodeOpsCpu, GreedyNextTokenTakesTheFirstMaximumAndMovesTheInputsOn) {
  for (auto dtype : kDtypes) {
    at::Tensor logits = at::zeros({3, 40}, dtype);
    logits[0][7] = 2;
    logits[0][30] = 2;   // a tie: the first wins
    logits[1][39] = -1;
    logits.select(0, 1).fill_(-3);
    logits[1][39] = -1;
    logits[2][5] = 1;
    at::Tensor next = at::zeros({3}, at::kLong), ids = at::zeros({3}, at::kLong);
    at::Tensor positions = longTensor({4, 9, 0}), slot = longTensor({4}), generated = at::zeros({3, 8}, at::kLong);
    greedyNextToken(logits, next, ids, positions, slot, generated, at::zeros({1}, at::kInt));
    EXPECT_TRUE(at::equal(next, longTensor({7, 39, 5}))) << dtypeName(dtype);
    EXPECT_TRUE(at::equal(ids, next));
    EXPECT_TRUE(at::equal(positions, longTensor({5, 10, 1})));
    EXPECT_EQ(slot.item<int64_t>(), 5);
    EXPECT_TRUE(at::equal(generated.select(1, 5), next));
    EXPECT_EQ(generated.sum().item<int64_t>(), 7 + 39 + 5);
    EXPECT_THAT(inputErrorOf([&] { greedyNextToken(logits, next, ids, positions, slot, generated, at::zeros({2}, at::kInt)); }),
                AllOf(HasSubstr("greedyNextToken"), HasSubstr("counter")));
  }
}

TEST(DecodeOpsCpu, SiluMulMatchesFloat64) {
  at::manual_seed(14);
  for (auto dtype : kDtypes) {
    for (int64_t B : {1, 3}) {
      for (int64_t F : {64, 96}) {
        const at::Tensor gateUp = randomTensor({B, 2 * F}, dtype, 3.0);
        at::Tensor out = at::full({B, F}, kNaN, gateUp.options());
        siluMul(gateUp, out);
        EXPECT_LT(relativeError(out, siluMul64(gateUp)), cpuTolerance(dtype))
            << dtypeName(dtype) << " B=" << B << " F=" << F;
      }
    }
  }
}

// The attention's split over the cache: whole tiles, every slot in exactly one range, no empty range, and never
// more blocks than one wave of the blocks a multiprocessor holds (unless the (row, head) blocks alone exceed it:
// then one range). Llama-3.1-8B at batch 8 and context 4096 + 256 on an H200 (4 fused blocks a multiprocessor)
// is the case that ran 9 ranges (576 blocks for 528 places, a second wave as long as the first) and takes 8.
TEST(DecodeOpsCpu, AttentionSplitFillsOneWaveOfTheMultiprocessorsAndNoMore) {
  namespace k = kernels;
  for (int resident : {3, 4, 5}) {
    for (int batch : {1, 2, 3, 4, 8, 16, 64}) {
      for (int64_t capacity : {int64_t(1), int64_t(31), int64_t(768), int64_t(4352), int64_t(131072)}) {
        k::DecodeAttentionProblem p;
        p.batch = batch;
        p.qHeads = 32;
        p.kvHeads = 8;
        p.headDim = 128;
        p.capacity = capacity;
        const int sms = 132;
        const std::string what = "batch " + std::to_string(batch) + ", capacity " + std::to_string(capacity) +
                                 ", " + std::to_string(resident) + " blocks a multiprocessor";
        for (bool fused : {false, true}) {
          const k::DecodeAttentionSplit s =
              fused ? k::decodeRopeAttentionSplit(p, sms, resident) : k::decodeAttentionSplit(p, sms, resident);
          const int64_t blocks = int64_t(batch) * p.kvHeads * k::decodeAttentionHeadChunks(p);
          EXPECT_EQ(s.slotsPerSplit % k::decodeAttentionTileSlots(p.headDim), 0) << what;
          EXPECT_GE(int64_t(s.splits) * s.slotsPerSplit, capacity) << what;
          EXPECT_LT(int64_t(s.splits - 1) * s.slotsPerSplit, capacity) << what;
          EXPECT_LE(blocks * s.splits, std::max<int64_t>(blocks, int64_t(resident) * sms)) << what;
          if (fused) EXPECT_LE(s.splits, k::kDecodeRopeAttentionMaxSplits) << what;
          if (batch == 8 && capacity == 4352 && resident == 4) EXPECT_EQ(s.splits, 8) << what;
        }
      }
    }
  }
}

TEST(DecodeOpsCpu, RejectsBadShapesDtypesAndDevicesNamingTheOp) {
  const auto half = at::TensorOptions().dtype(at::kHalf);
  const auto meta = half.device(at::kMeta);
  auto longs = [](std::vector<int64_t> v) { return longTensor(v); };

  // addRmsNorm
  const at::Tensor r = at::zeros({2, 64}, half), w = at::ones({64}, half), o = at::empty({2, 64}, half);
  EXPECT_THAT(inputErrorOf([&] { addRmsNorm(r.to(at::kFloat), {}, w, 1e-6, o); }),
              AllOf(HasSubstr("addRmsNorm"), HasSubstr("residual"), HasSubstr("float16 or bfloat16")));
  EXPECT_THAT(inputErrorOf([&] { addRmsNorm(r, {}, at::ones({63}, half), 1e-6, o); }),
              AllOf(HasSubstr("addRmsNorm"), HasSubstr("weight")));
  EXPECT_THAT(inputErrorOf([&] { addRmsNorm(r, {}, w, 1e-6, at::empty({2, 64}, at::kBFloat16)); }),
              AllOf(HasSubstr("addRmsNorm"), HasSubstr("out")));
  EXPECT_THAT(inputErrorOf([&] { addRmsNorm(r, at::zeros({2, 64}, meta), w, 1e-6, o); }),
              AllOf(HasSubstr("addRmsNorm"), HasSubstr("delta"), HasSubstr("meta")));
  EXPECT_THAT(inputErrorOf([&] { addRmsNorm(at::zeros({2, 64}, meta), {}, w, 1e-6, o); }),
              AllOf(HasSubstr("addRmsNorm"), HasSubstr("CPU or a CUDA device")));
  EXPECT_THAT(inputErrorOf([&] { addRmsNorm(at::zeros({64, 2}, half).t(), {}, w, 1e-6, o); }),
              AllOf(HasSubstr("addRmsNorm"), HasSubstr("contiguous")));
  EXPECT_THAT(inputErrorOf([&] { addRmsNorm(at::zeros({2, 60}, half), {}, at::ones({60}, half), 1e-6,
                                            at::empty({2, 60}, half)); }),
              AllOf(HasSubstr("addRmsNorm"), HasSubstr("multiple of 8")));
  EXPECT_THAT(inputErrorOf([&] { addRmsNorm(at::zeros({65, 64}, half), {}, w, 1e-6, at::empty({65, 64}, half)); }),
              AllOf(HasSubstr("addRmsNorm"), HasSubstr("batch")));

  // ropeAndCacheWrite: B = 2, Hq = 4, Hkv = 2, D = 16, C = 10 unless broken on purpose
  const at::Tensor qkv = at::zeros({2, 8 * 16}, half), q = at::empty({2, 4, 16}, half);
  const at::Tensor keys = at::zeros({2, 2, 10, 16}, half), values = at::zeros({2, 2, 10, 16}, half);
  const at::Tensor positions = longs({0, 0}), invFreq = inverseFrequencies(16, 10000.0), slot = longs({3});
  EXPECT_NO_THROW(ropeAndCacheWrite(qkv, {}, {}, 1e-6, positions, invFreq, slot, q, keys, values));
  EXPECT_THAT(inputErrorOf([&] {
                ropeAndCacheWrite(qkv, {}, {}, 1e-6, positions.to(at::kInt), invFreq, slot, q, keys, values);
              }),
              AllOf(HasSubstr("ropeAndCacheWrite"), HasSubstr("positions"), HasSubstr("Long")));
  EXPECT_THAT(inputErrorOf([&] {
                ropeAndCacheWrite(qkv, {}, {}, 1e-6, positions, invFreq.to(at::kDouble), slot, q, keys, values);
              }),
              AllOf(HasSubstr("ropeAndCacheWrite"), HasSubstr("invFreq")));
  EXPECT_THAT(inputErrorOf([&] { ropeAndCacheWrite(qkv, {}, {}, 1e-6, positions, invFreq, longs({1, 2}), q, keys, values); }),
              AllOf(HasSubstr("ropeAndCacheWrite"), HasSubstr("slot")));
  EXPECT_THAT(inputErrorOf([&] { ropeAndCacheWrite(qkv, {}, {}, 1e-6, positions, invFreq, longs({10}), q, keys, values); }),
              AllOf(HasSubstr("ropeAndCacheWrite"), HasSubstr("slot 10"), HasSubstr("10 slots")));
  EXPECT_THAT(inputErrorOf([&] {
                ropeAndCacheWrite(qkv, at::ones({15}, half), {}, 1e-6, positions, invFreq, slot, q, keys, values);
              }),
              AllOf(HasSubstr("ropeAndCacheWrite"), HasSubstr("qNorm")));
  EXPECT_THAT(inputErrorOf([&] {
                ropeAndCacheWrite(at::zeros({2, 7 * 16}, half), {}, {}, 1e-6, positions, invFreq, slot, q, keys, values);
              }),
              AllOf(HasSubstr("ropeAndCacheWrite"), HasSubstr("qkv")));
  EXPECT_THAT(inputErrorOf([&] {  // 3 query heads over 2 key-value heads
                ropeAndCacheWrite(at::zeros({2, 7 * 16}, half), {}, {}, 1e-6, positions, invFreq, slot,
                                  at::empty({2, 3, 16}, half), keys, values);
              }),
              AllOf(HasSubstr("ropeAndCacheWrite"), HasSubstr("groups")));
  EXPECT_THAT(inputErrorOf([&] {  // odd head dim
                ropeAndCacheWrite(at::zeros({2, 8 * 15}, half), {}, {}, 1e-6, positions, inverseFrequencies(15, 1e4),
                                  slot, at::empty({2, 4, 15}, half), at::zeros({2, 2, 10, 15}, half),
                                  at::zeros({2, 2, 10, 15}, half));
              }),
              AllOf(HasSubstr("ropeAndCacheWrite"), HasSubstr("head dim 15")));
  EXPECT_THAT(inputErrorOf([&] {  // head dim over 256
                ropeAndCacheWrite(at::zeros({1, 3 * 258}, half), {}, {}, 1e-6, longs({0}), inverseFrequencies(258, 1e4),
                                  slot, at::empty({1, 1, 258}, half), at::zeros({1, 1, 10, 258}, half),
                                  at::zeros({1, 1, 10, 258}, half));
              }),
              AllOf(HasSubstr("ropeAndCacheWrite"), HasSubstr("head dim 258")));
  EXPECT_THAT(inputErrorOf([&] {
                ropeAndCacheWrite(qkv, {}, {}, 1e-6, positions, invFreq, slot, q, keys.to(at::kBFloat16), values);
              }),
              AllOf(HasSubstr("ropeAndCacheWrite"), HasSubstr("keys")));
  EXPECT_THAT(inputErrorOf([&] {
                ropeAndCacheWrite(qkv, {}, {}, 1e-6, positions, invFreq, slot, q, keys, at::zeros({2, 2, 10, 16}, meta));
              }),
              AllOf(HasSubstr("ropeAndCacheWrite"), HasSubstr("values"), HasSubstr("meta")));

  // decodeAttention
  const at::Tensor aq = at::zeros({2, 4, 16}, half), aout = at::empty({2, 64}, half);
  EXPECT_NO_THROW(decodeAttention(aq, keys, values, slot, longs({0, 2}), 0.25, aout));
  EXPECT_THAT(inputErrorOf([&] { decodeAttention(aq, at::zeros({2, 2, 10, 8}, half), values, slot, {}, 0.25, aout); }),
              AllOf(HasSubstr("decodeAttention"), HasSubstr("keys")));
  EXPECT_THAT(inputErrorOf([&] { decodeAttention(aq, keys, values, slot, longs({0}), 0.25, aout); }),
              AllOf(HasSubstr("decodeAttention"), HasSubstr("validFrom")));
  EXPECT_THAT(inputErrorOf([&] { decodeAttention(aq, keys, values, slot, {}, 0.25, at::empty({2, 4, 16}, half)); }),
              AllOf(HasSubstr("decodeAttention"), HasSubstr("out")));
  EXPECT_THAT(inputErrorOf([&] { decodeAttention(aq, keys, values, slot, {}, 0.0, aout); }),
              AllOf(HasSubstr("decodeAttention"), HasSubstr("scale")));
  EXPECT_THAT(inputErrorOf([&] { decodeAttention(aq, keys, values, longs({-1}), {}, 0.25, aout); }),
              AllOf(HasSubstr("decodeAttention"), HasSubstr("slot -1")));
  EXPECT_THAT(inputErrorOf([&] { decodeAttention(at::zeros({2, 3, 16}, half), keys, values, slot, {}, 0.25,
                                                 at::empty({2, 48}, half)); }),
              AllOf(HasSubstr("decodeAttention"), HasSubstr("groups")));
  EXPECT_THAT(inputErrorOf([&] { decodeAttention(aq, keys, values, slot.to(at::kDouble), {}, 0.25, aout); }),
              AllOf(HasSubstr("decodeAttention"), HasSubstr("slot"), HasSubstr("int64")));

  // siluMul
  EXPECT_THAT(inputErrorOf([&] { siluMul(at::zeros({2, 130}, half), at::empty({2, 64}, half)); }),
              AllOf(HasSubstr("siluMul"), HasSubstr("gateUp")));
  EXPECT_THAT(inputErrorOf([&] { siluMul(at::zeros({2, 120}, half), at::empty({2, 60}, half)); }),
              AllOf(HasSubstr("siluMul"), HasSubstr("multiple of 8")));
  EXPECT_THAT(inputErrorOf([&] { siluMul(at::zeros({2, 128}, half), at::empty({2, 64}, at::kFloat)); }),
              AllOf(HasSubstr("siluMul"), HasSubstr("out")));
  EXPECT_THAT(inputErrorOf([&] { siluMul(at::zeros({2, 128}, half), at::Tensor()); }),
              AllOf(HasSubstr("siluMul"), HasSubstr("out")));
}

// ---- CUDA: the kernels against the CPU paths ----------------------------------------------------------------

bool cudaKernelsAvailable() { return decodeKernelsBuilt() && torch::cuda::is_available(); }

#define SKIP_WITHOUT_CUDA()                                                                        \
  if (!cudaKernelsAvailable())                                                                     \
  GTEST_SKIP() << (decodeKernelsBuilt() ? "no CUDA device" : "built without CUDA kernels (PARETO_CUDA=OFF)")

constexpr double kCudaTolerance = 2e-3;

at::Tensor onCuda(const at::Tensor& t) { return t.defined() ? t.to(at::kCUDA) : t; }

// The CUDA result against the CPU path's (both in the dtype), after checking that every element was written.
void expectMatches(const at::Tensor& cuda, const at::Tensor& cpu, const std::string& label) {
  ASSERT_FALSE(cuda.isnan().any().item<bool>()) << label << ": output not fully written (or NaN read)";
  EXPECT_LT(relativeError(cuda, cpu), kCudaTolerance) << label;
}

struct AttentionShape {
  const char* name;
  int64_t qHeads, kvHeads, headDim, capacity;
  bool qkNorm;
  std::vector<int64_t> batches = {1, 4, 16};
};

// Llama-3.1-8B, a Qwen3-8B-like shape (q/k norms), D = 64 (Llama-3.2-1B), and corners: grouped heads that need
// two blocks (12 per key-value head), three per group, a head dim that is not a multiple of 8, a long cache
// (many tiles per block at B = 16), enough rows and heads that the cache is not split (one launch, several tiles
// per block), and a cache of one slot.
std::vector<AttentionShape> attentionShapes() {
  return {{"llama-3.1-8b", 32, 8, 128, 768, false}, {"qwen3-8b", 32, 8, 128, 768, true},
          {"llama-3.2-1b", 32, 8, 64, 768, false},  {"gqa-12", 24, 2, 64, 300, true},
          {"gqa-3", 6, 2, 256, 200, false},         {"d20", 4, 2, 20, 100, true},
          {"long", 8, 2, 128, 5000, false, {1, 16}},         {"unsplit-mha", 16, 16, 64, 300, false, {64}},
          {"one-slot", 4, 1, 64, 1, false}};
}

std::vector<int64_t> slotsFor(int64_t capacity) {
  std::vector<int64_t> s = {0, capacity - 1};
  if (capacity > 600) s.push_back(600);
  else if (capacity > 2) s.push_back(capacity / 2 + 1);
  return s;
}

TEST(DecodeOpsCuda, AddRmsNormMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  const uint64_t seed = freshSeed();
  at::manual_seed(seed);
  for (auto dtype : kDtypes) {
    for (int64_t B : {1, 4, 16, 64}) {
      for (int64_t H : {4096, 2048, 8192, 16384, 1536, 200}) {
        for (bool withDelta : {true, false}) {
          const std::string label = dtypeName(dtype) + " B=" + std::to_string(B) + " H=" + std::to_string(H) +
                                    (withDelta ? "" : " no delta") + " seed " + std::to_string(seed);
          const at::Tensor residual = randomTensor({B, H}, dtype);
          const at::Tensor delta = withDelta ? randomTensor({B, H}, dtype, 0.5) : at::Tensor();
          const at::Tensor weight = (1 + randomTensor({H}, at::kDouble, 0.1)).to(dtype);
          at::Tensor rCpu = residual.clone(), outCpu = at::empty({B, H}, residual.options());
          addRmsNorm(rCpu, delta, weight, 1e-5, outCpu);
          at::Tensor rCuda = onCuda(residual), outCuda = at::full({B, H}, kNaN, rCuda.options());
          addRmsNorm(rCuda, onCuda(delta), onCuda(weight), 1e-5, outCuda);
          EXPECT_TRUE(at::equal(rCuda.to(at::kCPU), rCpu)) << label << ": residual";
          expectMatches(outCuda, outCpu, label);
        }
      }
    }
  }
}

TEST(DecodeOpsCuda, RopeAndCacheWriteMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  const uint64_t seed = freshSeed();
  at::manual_seed(seed);
  for (const AttentionShape& s : attentionShapes()) {
    for (auto dtype : kDtypes) {
      for (int64_t B : s.batches) {
        for (int64_t slot : slotsFor(s.capacity)) {
          const std::string label = std::string(s.name) + " " + dtypeName(dtype) + " B=" + std::to_string(B) +
                                    " slot " + std::to_string(slot) + " seed " + std::to_string(seed);
          const int64_t Hq = s.qHeads, Hkv = s.kvHeads, D = s.headDim, C = s.capacity;
          const at::Tensor qkv = randomTensor({B, (Hq + 2 * Hkv) * D}, dtype);
          const at::Tensor qNorm = s.qkNorm ? (1 + randomTensor({D}, at::kDouble, 0.2)).to(dtype) : at::Tensor();
          const at::Tensor kNorm = s.qkNorm ? (1 + randomTensor({D}, at::kDouble, 0.2)).to(dtype) : at::Tensor();
          std::vector<int64_t> pos;
          for (int64_t b = 0; b < B; ++b) pos.push_back(std::max<int64_t>(slot - 7 * b, 0) + (b % 2) * 100000);
          const at::Tensor positions = longTensor(pos), invFreq = inverseFrequencies(D, 500000.0);
          const at::Tensor keysBefore = randomTensor({B, Hkv, C, D}, dtype);
          const at::Tensor valuesBefore = randomTensor({B, Hkv, C, D}, dtype);

          at::Tensor qCpu = at::empty({B, Hq, D}, qkv.options());
          at::Tensor keysCpu = keysBefore.clone(), valuesCpu = valuesBefore.clone();
          ropeAndCacheWrite(qkv, qNorm, kNorm, 1e-6, positions, invFreq, longTensor({slot}), qCpu, keysCpu, valuesCpu);

          at::Tensor qCuda = at::full({B, Hq, D}, kNaN, qkv.options().device(at::kCUDA));
          at::Tensor keysCuda = onCuda(keysBefore), valuesCuda = onCuda(valuesBefore);
          keysCuda.select(2, slot).fill_(kNaN);  // the slot must be written
          valuesCuda.select(2, slot).fill_(kNaN);
          ropeAndCacheWrite(onCuda(qkv), onCuda(qNorm), onCuda(kNorm), 1e-6, onCuda(positions), onCuda(invFreq),
                            onCuda(longTensor({slot})), qCuda, keysCuda, valuesCuda);
          expectMatches(qCuda, qCpu, label + ": q");
          expectMatches(keysCuda.select(2, slot), keysCpu.select(2, slot), label + ": key");
          EXPECT_TRUE(at::equal(valuesCuda.select(2, slot).to(at::kCPU), valuesCpu.select(2, slot))) << label << ": value";
          EXPECT_TRUE(othersUntouched(keysCuda, keysBefore, slot)) << label << ": keys of other slots changed";
          EXPECT_TRUE(othersUntouched(valuesCuda, valuesBefore, slot)) << label << ": values of other slots changed";
        }
      }
    }
  }
}

TEST(DecodeOpsCuda, DecodeAttentionMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  const uint64_t seed = freshSeed();
  at::manual_seed(seed);
  for (const AttentionShape& s : attentionShapes()) {
    for (auto dtype : kDtypes) {
      for (int64_t B : s.batches) {
        for (int64_t slot : slotsFor(s.capacity)) {
          for (bool padded : {false, true}) {
            const std::string label = std::string(s.name) + " " + dtypeName(dtype) + " B=" + std::to_string(B) +
                                      " slot " + std::to_string(slot) + (padded ? " left-padded" : "") + " seed " +
                                      std::to_string(seed);
            const int64_t Hq = s.qHeads, Hkv = s.kvHeads, D = s.headDim, C = s.capacity;
            std::vector<int64_t> validFrom;
            if (padded)  // 0, a few, past a tile and split boundary, and past the slot (clamped to it)
              for (int64_t b = 0; b < B; ++b) validFrom.push_back(std::vector<int64_t>{0, 5, 70, 300, C + 3}[size_t(b % 5)]);
            const at::Tensor q = randomTensor({B, Hq, D}, dtype);
            at::Tensor keys = randomTensor({B, Hkv, C, D}, dtype, 2.0);
            at::Tensor values = randomTensor({B, Hkv, C, D}, dtype);
            poisonUnattended(keys, slot, validFrom);
            poisonUnattended(values, slot, validFrom);
            const double scale = 1.0 / std::sqrt(double(D));
            const at::Tensor vf = padded ? longTensor(validFrom) : at::Tensor();

            at::Tensor outCpu = at::empty({B, Hq * D}, q.options());
            decodeAttention(q, keys, values, longTensor({slot}), vf, scale, outCpu);
            at::Tensor outCuda = at::full({B, Hq * D}, kNaN, q.options().device(at::kCUDA));
            decodeAttention(onCuda(q), onCuda(keys), onCuda(values), onCuda(longTensor({slot})), onCuda(vf), scale,
                            outCuda);
            // The kernel keeps scores and probabilities in fp32, where transformers' order (the CPU path) rounds
            // both to the dtype: it is held to 2e-3 of the exact result rounded once, and to the CPU path within
            // what that path's own roundings allow (measured on an H200: ≈ 1.7e-3 fp16 and 7e-3 bf16 at D = 128
            // and 600 slots, 1.75e-2 bf16 at 5000 slots).
            const at::Tensor exact = attention64(q, keys, values, slot, validFrom, scale);
            expectMatches(outCuda, exact.to(dtype), label + " (vs float64)");
            EXPECT_LT(relativeError(outCuda, outCpu), dtype == at::kBFloat16 ? 3e-2 : 6e-3) << label << " (vs CPU path)";
          }
        }
      }
    }
  }
}

// The fused kernel gives what the two kernels give, bit for bit: output, the new key and value in the cache, and
// every other slot untouched; the counters are back at zero after every launch (the same ones serve all calls).
TEST(DecodeOpsCuda, RopeAttentionEqualsTheTwoKernelsBitForBit) {
  SKIP_WITHOUT_CUDA();
  const uint64_t seed = freshSeed();
  at::manual_seed(seed);
  for (const AttentionShape& s : attentionShapes()) {
    for (auto dtype : kDtypes) {
      for (int64_t B : s.batches) {
        const int64_t Hq = s.qHeads, Hkv = s.kvHeads, D = s.headDim, C = s.capacity;
        const at::Tensor counters = at::zeros({decodeAttentionCounters(B, Hq, Hkv)}, at::dtype(at::kInt).device(at::kCUDA));
        for (int64_t slot : slotsFor(C)) {
          for (bool padded : {false, true}) {
            const std::string label = std::string(s.name) + " " + dtypeName(dtype) + " B=" + std::to_string(B) +
                                      " slot " + std::to_string(slot) + (padded ? " left-padded" : "") + " seed " +
                                      std::to_string(seed);
            const at::Tensor qkv = onCuda(randomTensor({B, (Hq + 2 * Hkv) * D}, dtype));
            const at::Tensor qNorm = s.qkNorm ? onCuda((1 + randomTensor({D}, at::kDouble, 0.2)).to(dtype)) : at::Tensor();
            const at::Tensor kNorm = s.qkNorm ? onCuda((1 + randomTensor({D}, at::kDouble, 0.2)).to(dtype)) : at::Tensor();
            std::vector<int64_t> pos, validFrom;
            for (int64_t b = 0; b < B; ++b) {
              pos.push_back(std::max<int64_t>(slot - 7 * b, 0) + (b % 2) * 100000);
              if (padded) validFrom.push_back(std::vector<int64_t>{0, 5, 70, 300, C + 3}[size_t(b % 5)]);
            }
            const at::Tensor positions = onCuda(longTensor(pos)), invFreq = onCuda(inverseFrequencies(D, 500000.0));
            const at::Tensor vf = padded ? onCuda(longTensor(validFrom)) : at::Tensor(), slotT = onCuda(longTensor({slot}));
            const at::Tensor keys0 = onCuda(randomTensor({B, Hkv, C, D}, dtype, 2.0));
            const at::Tensor values0 = onCuda(randomTensor({B, Hkv, C, D}, dtype));
            const double scale = 1.0 / std::sqrt(double(D));

            at::Tensor q = at::empty({B, Hq, D}, qkv.options()), k1 = keys0.clone(), v1 = values0.clone();
            at::Tensor out1 = at::full({B, Hq * D}, kNaN, qkv.options());
            ropeAndCacheWrite(qkv, qNorm, kNorm, 1e-6, positions, invFreq, slotT, q, k1, v1);
            decodeAttention(q, k1, v1, slotT, vf, scale, out1);
            at::Tensor k2 = keys0.clone(), v2 = values0.clone(), out2 = at::full({B, Hq * D}, kNaN, qkv.options());
            k2.select(2, slot).fill_(kNaN);  // the fused kernel must write the slot, and not read it back
            v2.select(2, slot).fill_(kNaN);
            ropeAttention(qkv, qNorm, kNorm, 1e-6, positions, invFreq, slotT, k2, v2, vf, scale, counters, out2);
            ASSERT_FALSE(out2.isnan().any().item<bool>()) << label << ": output not fully written";
            EXPECT_TRUE(at::equal(out1, out2)) << label << ": output, max difference "
                                               << (out1.to(at::kFloat) - out2.to(at::kFloat)).abs().max().item<float>();
            EXPECT_TRUE(at::equal(k1, k2)) << label << ": keys";
            EXPECT_TRUE(at::equal(v1, v2)) << label << ": values";
            EXPECT_EQ(counters.count_nonzero().item<int64_t>(), 0) << label << ": counters left set";
          }
        }
      }
    }
  }
}

// The fused greedy end of a step against the ATen ops it replaces, on the device: random rows, ties (the first
// wins), a NaN (it wins, as in at::argmax), a vocabulary that is not a multiple of 8; run twice with the same
// counter (left at zero: the slot moves on once a call).
TEST(DecodeOpsCuda, GreedyNextTokenEqualsTheAtenOps) {
  SKIP_WITHOUT_CUDA();
  const uint64_t seed = freshSeed();
  at::manual_seed(seed);
  const auto longs = at::dtype(at::kLong).device(at::kCUDA);
  const at::Tensor counter = at::zeros({1}, at::dtype(at::kInt).device(at::kCUDA));
  for (auto dtype : kDtypes) {
    for (int64_t B : {1, 3, 16}) {
      for (int64_t V : {128256, 32000, 1003, 8}) {
        const std::string label = dtypeName(dtype) + " B=" + std::to_string(B) + " V=" + std::to_string(V) + " seed " +
                                  std::to_string(seed);
        at::Tensor logits = onCuda(randomTensor({B, V}, dtype, 4.0));
        if (B > 1) {  // row 1: a tie at the maximum; row 2 (B = 16): a NaN
          logits[1].fill_(-1);
          logits[1][V / 2] = 3;
          logits[1][V - 1] = 3;
          if (B > 2) logits[2][V / 3] = kNaN;
        }
        at::Tensor positions = at::arange(B, longs) * 3, slot = at::full({1}, 6, longs);
        at::Tensor generated = at::zeros({B, 9}, longs), next = at::zeros({B}, longs), ids = at::zeros({B}, longs);
        at::Tensor p2 = positions.clone(), s2 = slot.clone(), g2 = generated.clone(), n2 = next.clone(), i2 = ids.clone();
        for (int call = 0; call < 2; ++call) {
          greedyNextToken(logits, next, ids, positions, slot, generated, counter);
          at::argmax_out(n2, logits.to(at::kFloat), -1);  // the step's unfused sequence
          p2.add_(1);
          s2.add_(1);
          i2.copy_(n2);
          g2.index_copy_(1, s2, n2.unsqueeze(1));
          const std::string where = label + " call " + std::to_string(call);
          EXPECT_TRUE(at::equal(next, n2)) << where << ": argmax";
          EXPECT_TRUE(at::equal(ids, i2)) << where << ": ids";
          EXPECT_TRUE(at::equal(positions, p2)) << where << ": positions";
          EXPECT_TRUE(at::equal(slot, s2)) << where << ": slot";
          EXPECT_TRUE(at::equal(generated, g2)) << where << ": generated";
          EXPECT_EQ(counter.item<int32_t>(), 0) << where << ": counter left set";
        }
      }
    }
  }
}

TEST(DecodeOpsCuda, SiluMulMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  const uint64_t seed = freshSeed();
  at::manual_seed(seed);
  for (auto dtype : kDtypes) {
    for (int64_t B : {1, 4, 16, 64}) {
      for (int64_t F : {14336, 8192, 12288, 8, 200}) {
        const at::Tensor gateUp = randomTensor({B, 2 * F}, dtype, 3.0);
        at::Tensor outCpu = at::empty({B, F}, gateUp.options());
        siluMul(gateUp, outCpu);
        at::Tensor outCuda = at::full({B, F}, kNaN, gateUp.options().device(at::kCUDA));
        siluMul(onCuda(gateUp), outCuda);
        expectMatches(outCuda, outCpu,
                      dtypeName(dtype) + " B=" + std::to_string(B) + " F=" + std::to_string(F) + " seed " +
                          std::to_string(seed));
      }
    }
  }
}

#ifdef PARETO_WITH_CUDA
// A step captured once and replayed with new slot, positions and inputs written into its static buffers gives
// what running the ops directly gives: nothing in them depends on host values at capture time.
TEST(DecodeOpsCuda, CapturedStepReadsSlotAndPositionsFromTheDevice) {
  SKIP_WITHOUT_CUDA();
  at::manual_seed(freshSeed());
  const int64_t B = 3, H = 512, Hq = 8, Hkv = 2, D = 64, C = 700;
  const auto opts = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  const auto longs = at::TensorOptions().dtype(at::kLong).device(at::kCUDA);
  at::Tensor residual = at::zeros({B, H}, opts), delta = at::zeros({B, H}, opts), normed = at::empty({B, H}, opts);
  const at::Tensor weight = (1 + randomTensor({H}, at::kDouble, 0.1)).to(at::kBFloat16).to(at::kCUDA);
  at::Tensor qkv = at::zeros({B, (Hq + 2 * Hkv) * D}, opts), q = at::empty({B, Hq, D}, opts);
  at::Tensor keys = at::zeros({B, Hkv, C, D}, opts), values = at::zeros({B, Hkv, C, D}, opts);
  at::Tensor attn = at::empty({B, Hq * D}, opts), gateUp = at::zeros({B, 2 * H}, opts), act = at::empty({B, H}, opts);
  at::Tensor positions = at::zeros({B}, longs), slot = at::zeros({1}, longs), validFrom = at::zeros({B}, longs);
  const at::Tensor invFreq = inverseFrequencies(D, 500000.0).to(at::kCUDA);
  auto step = [&](at::Tensor& k, at::Tensor& v, at::Tensor& out, at::Tensor& r, at::Tensor& n, at::Tensor& a) {
    addRmsNorm(r, delta, weight, 1e-5, n);
    ropeAndCacheWrite(qkv, {}, {}, 1e-6, positions, invFreq, slot, q, k, v);
    decodeAttention(q, k, v, slot, validFrom, 0.125, out);
    siluMul(gateUp, a);
  };

  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool());
    graph.capture_begin();
    step(keys, values, attn, residual, normed, act);
    graph.capture_end();
  }
  for (int64_t s : {0, 1, 63, 64, 65, 400, 699}) {
    residual.copy_(randomTensor({B, H}, at::kBFloat16));
    delta.copy_(randomTensor({B, H}, at::kBFloat16));
    qkv.copy_(randomTensor({B, (Hq + 2 * Hkv) * D}, at::kBFloat16));
    gateUp.copy_(randomTensor({B, 2 * H}, at::kBFloat16));
    keys.narrow(2, s, C - s).normal_();  // what later slots hold must not matter
    positions.copy_(longTensor({s, s - s / 2, s + 5}));
    slot.fill_(s);
    validFrom.copy_(longTensor({0, s / 2, 3}));
    at::Tensor k = keys.clone(), v = values.clone(), out = at::empty_like(attn), r = residual.clone(),
               n = at::empty_like(normed), a = at::empty_like(act);
    graph.replay();
    step(k, v, out, r, n, a);
    const std::string label = "slot " + std::to_string(s);
    EXPECT_TRUE(at::equal(keys, k)) << label << ": keys";
    EXPECT_TRUE(at::equal(values, v)) << label << ": values";
    EXPECT_TRUE(at::equal(attn, out)) << label << ": attention";
    EXPECT_TRUE(at::equal(residual, r)) << label << ": residual";
    EXPECT_TRUE(at::equal(normed, n)) << label << ": norm";
    EXPECT_TRUE(at::equal(act, a)) << label << ": silu·mul";
  }
}
#endif

}  // namespace
}  // namespace pareto
