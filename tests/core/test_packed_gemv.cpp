// Packed-weight GEMV: the kernel re-layouts and the CPU references (every machine), and the CUDA kernels against
// those references (only where a CUDA device and a PARETO_CUDA build exist; skipped otherwise).
//
// CPU: for each format, a random packed weight is re-laid out for its kernel and run through the float64
// reference; the result must equal x · unpack()ᵀ computed independently from the stored format (so a wrong
// re-layout, padding or reference fails). GPU: fresh random inputs each run, output poisoned with NaN first, and
// ‖out − ref‖ / ‖ref‖ < 2e-3 against the float64 reference, over shapes that are not multiples of the tiles,
// batch 1..16, and every compiled N:M density.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <tuple>

#include "formats/BitmaskNMWeight.h"
#include "formats/BitPacking.h"
#include "formats/QuantGroupWeight.h"
#include "formats/SpqrWeight.h"
#include "kernels/QuantGroupGemv.h"
#include "runtime/KernelBenchmark.h"
#include "runtime/PackedGemv.h"
#include "runtime/SyntheticWeights.h"
#include "util/Error.h"

namespace pareto {
namespace {

// Every random input of these tests comes from one base seed: fresh each run (PARETO_TEST_SEED replays one),
// printed once so that a failure seen once can be run again with the same weights and activations.
uint64_t baseSeed() {
  static const uint64_t seed = [] {
    uint64_t s = 0;
    if (const char* env = std::getenv("PARETO_TEST_SEED"); env != nullptr && *env != '\0') {
      s = std::strtoull(env, nullptr, 10);
    } else {
      std::random_device device;
      s = (uint64_t(device()) << 32) | device();
    }
    std::printf("test_packed_gemv: random inputs from PARETO_TEST_SEED=%llu\n", static_cast<unsigned long long>(s));
    std::fflush(stdout);
    at::manual_seed(s);
    return s;
  }();
  return seed;
}

uint64_t freshSeed() {
  static uint64_t drawn = 0;
  return baseSeed() + 0x9E3779B97F4A7C15ull * ++drawn;
}

// Dense float64 of a SpQR weight from its parts, by the format's definition.
at::Tensor spqrDense(const SpqrParts& p) {
  const int64_t rows = p.codes.size(0), cols = p.codes.size(1);
  const at::Tensor base = p.scaleBase.to(at::kDouble).repeat_interleave(p.scaleGroup, 0).narrow(0, 0, rows);
  const at::Tensor step = p.scaleStep.to(at::kDouble).repeat_interleave(p.scaleGroup, 0).narrow(0, 0, rows);
  const at::Tensor scale = (base + p.scaleCodes.to(at::kDouble) * step).repeat_interleave(16, 1);
  const at::Tensor zero = p.zeroCodes.to(at::kDouble).repeat_interleave(16, 1);
  at::Tensor dense = (p.codes.to(at::kDouble) - zero) * scale;
  const at::Tensor offsets = p.rowOffsets.to(at::kLong);
  const at::Tensor counts = offsets.narrow(0, 1, rows) - offsets.narrow(0, 0, rows);
  const at::Tensor outlierRows = at::repeat_interleave(at::arange(rows, offsets.options()), counts);
  dense.view({-1}).index_put_({outlierRows * cols + p.outlierColumns.to(at::kLong)}, p.outlierValues.to(at::kDouble));
  return dense;
}

// Dense float64 of a bitmask + int4 weight: the kept values' dequantized codes at the mask's columns.
at::Tensor bitmaskInt4Dense(const at::Tensor& masks, const QuantGroupWeight& kept) {
  const int64_t rows = masks.size(0), cols = masks.size(1) * 32;
  const at::Tensor bits = at::arange(32, masks.options().dtype(at::kLong));
  const at::Tensor mask = (masks.to(at::kLong).unsqueeze(-1).bitwise_right_shift(bits).bitwise_and(1)).view({rows, cols}).to(at::kBool);
  at::Tensor dense = at::zeros({rows, cols}, masks.options().dtype(at::kDouble));
  return dense.masked_scatter(mask, kept.unpack().to(at::kDouble));
}

at::Tensor randomActivations(int batch, int64_t cols, at::ScalarType dtype, at::Device device) {
  (void)baseSeed();   // seeds LibTorch's generator on first use
  return at::randn({batch, cols}, at::TensorOptions().device(device).dtype(at::kFloat)).to(dtype);
}

double relativeError(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor o = out.to(at::kCPU).to(at::kDouble), r = ref.to(at::kCPU).to(at::kDouble);
  return (o - r).norm().item<double>() / r.norm().item<double>();
}

// The float64 reference of a kernel weight, unrounded.
template <class KernelWeight>
at::Tensor reference(const KernelWeight& w, const at::Tensor& x) {
  return gemv(w, x.to(at::kCPU), at::empty({x.size(0), w.rows}, at::kDouble));
}

at::Tensor expected(const at::Tensor& x, const at::Tensor& dense) {
  return at::matmul(x.to(at::kCPU).to(at::kDouble), dense.to(at::kCPU).to(at::kDouble).t());
}

// ---- CPU: re-layout + reference equal the stored format's own dequantization -------------------------------

TEST(PackedGemvReference, BitmaskMatchesDenseForEveryCompiledDensity) {
  for (auto [n, m] : {std::pair{2, 4}, {1, 4}, {3, 4}, {4, 8}, {16, 32}, {8, 16}}) {
    for (auto dtype : {at::kHalf, at::kBFloat16}) {
      const int64_t rows = 45, cols = 288;  // not multiples of 32 rows or 256 columns
      const BitmaskNMWeight w = randomBitmaskNM(rows, cols, n, m, dtype, at::kCPU, 7);
      const auto kw = BitmaskNMKernelWeight::fromPacked(w);
      for (int batch : {1, 3}) {
        const at::Tensor x = randomActivations(batch, cols, dtype, at::kCPU);
        const at::Tensor y = gemv(kw, x);
        ASSERT_EQ(y.sizes(), (at::IntArrayRef{batch, rows}));
        ASSERT_EQ(y.scalar_type(), dtype);
        EXPECT_LT(relativeError(y, expected(x, w.unpack())), 4e-3) << n << ":" << m;  // y rounded to 16 bits
        EXPECT_LT(relativeError(reference(kw, x), expected(x, w.unpack())), 1e-12) << n << ":" << m;
      }
    }
  }
}

TEST(PackedGemvReference, QuantGroupMatchesDequantizedWeight) {
  struct Case { int bits; bool symmetric; int64_t group; int64_t cols; };
  for (const Case c : {Case{4, true, 128, 384}, Case{4, false, 32, 288}, Case{4, true, 288, 288},
                       Case{8, true, 416, 416}, Case{8, false, 64, 192}, Case{4, true, 512, 1024}}) {
    const int64_t rows = 37;
    const QuantGroupWeight w = randomQuantGroup(rows, c.cols, c.bits, c.symmetric, c.group, at::kCPU, 3);
    const auto kw = QuantGroupKernelWeight::fromPacked(w);
    const at::Tensor x = randomActivations(2, c.cols, at::kHalf, at::kCPU);
    EXPECT_LT(relativeError(reference(kw, x), expected(x, w.unpack())), 1e-12)
        << c.bits << " bits, group " << c.group << ", cols " << c.cols;
  }
}

TEST(PackedGemvReference, BitmaskInt4MatchesDenseOfKeptCodes) {
  const int64_t rows = 33, cols = 576;  // 288 kept values a row: not a whole number of 128-value chunks
  for (int64_t group : {int64_t(16), int64_t(32), cols / 2}) {
    const BitmaskNMWeight pattern = randomBitmaskNM(rows, cols, 2, 4, at::kHalf, at::kCPU, 5);
    const QuantGroupWeight kept = randomQuantGroup(rows, cols / 2, 4, group != 32, group, at::kCPU, 6);
    const auto kw = BitmaskInt4KernelWeight::fromPacked(pattern.masks, 2, 4, kept);
    const at::Tensor x = randomActivations(4, cols, at::kHalf, at::kCPU);
    EXPECT_LT(relativeError(reference(kw, x), expected(x, bitmaskInt4Dense(pattern.masks, kept))), 1e-12) << group;
  }
}

TEST(PackedGemvReference, SpqrMatchesDenseWithOutliers) {
  for (int bits : {2, 3, 4}) {
    const int64_t rows = 45, cols = 208;  // 13 groups of 16: not a whole 128-column chunk; rows not 16 · k
    const SpqrParts parts = randomSpqr(rows, cols, bits, 16, 0.05, at::kCPU, 11);
    const auto kw = SpqrKernelWeight::fromParts(parts);
    const at::Tensor x = randomActivations(2, cols, at::kHalf, at::kCPU);
    EXPECT_LT(relativeError(reference(kw, x), expected(x, spqrDense(parts))), 1e-6) << bits << " bits";
  }
}

TEST(PackedGemvReference, StoredSpqrWeightMatchesItsUnpack) {
  const int64_t rows = 32, cols = 272;
  const SpqrParts parts = randomSpqr(rows, cols, 3, 16, 0.02, at::kCPU, 13);
  SpqrWeight w;
  w.bits = 3;
  w.scaleBits = 3;
  w.groupSize = 16;
  w.scaleGroup = 16;
  w.rows = rows;
  w.cols = cols;
  w.codes = packCodeBits(parts.codes, 3);
  w.scaleCodes = packCodeBits(parts.scaleCodes, 3);
  w.zeroCodes = packCodeBits(parts.zeroCodes, 3);
  w.scaleBase = parts.scaleBase;
  w.scaleStep = parts.scaleStep;
  w.outlierRowOffsets = parts.rowOffsets;
  w.outlierColumns = parts.outlierColumns.to(at::kShort);
  w.outlierValues = parts.outlierValues;
  const auto kw = SpqrKernelWeight::fromPacked(w);
  const at::Tensor x = randomActivations(3, cols, at::kBFloat16, at::kCPU);
  EXPECT_LT(relativeError(reference(kw, x), expected(x, w.unpack())), 1e-6);
}

TEST(KernelBenchmark, RunsEveryFormatOnTheCpuReferences) {
  KernelBenchOptions o;
  o.shape = {"tiny", 2, {{"qkv", 96, 256}, {"down", 64, 512}}};
  o.batches = {1, 3};
  o.device = "cpu";
  o.runs = 1;
  const KernelBenchReport r = runKernelBenchmark(o, nullptr, CancelToken());
  ASSERT_EQ(r.results.size(), o.formats.size() * 2);
  EXPECT_EQ(r.weightsPerStep, 2 * (96 * 256 + 64 * 512));
  for (const auto& res : r.results) {
    if (res.format == "cusparselt-2:4") continue;  // CUDA only
    ASSERT_TRUE(res.available) << res.format << ": " << res.note;
    EXPECT_GT(res.msPerStep, 0) << res.format;
    EXPECT_GT(res.speedupOverDense, 0) << res.format;
  }
  auto bits = [&](const std::string& f) {
    for (const auto& res : r.results) if (res.format == f) return res.bitsPerWeight;
    return 0.0;
  };
  EXPECT_DOUBLE_EQ(bits("bitmask-2:4"), 9.0);           // 16 fp16 values + one 32-bit mask per 32 weights
  EXPECT_DOUBLE_EQ(bits("int4-g128"), 4.125);           // + one fp16 scale per 128
  EXPECT_DOUBLE_EQ(bits("bitmask-2:4+int4-g128"), 3.0625);

  // Each shape alone: one time per linear shape, in the shape's order, in the JSON and the text.
  KernelBenchOptions alone = o;
  alone.formats = {"dense", "int4-g128"};
  alone.batches = {1};
  alone.perShape = true;
  const KernelBenchReport a = runKernelBenchmark(alone, nullptr, CancelToken());
  for (const auto& res : a.results) {
    ASSERT_EQ(res.usPerGemvOfShape.size(), 2u) << res.format << ": " << res.note;
    EXPECT_EQ(res.usPerGemvOfShape[0].first, "qkv");
    EXPECT_EQ(res.usPerGemvOfShape[1].first, "down");
    for (const auto& [name, us] : res.usPerGemvOfShape) EXPECT_GT(us, 0) << res.format << " " << name;
  }
  EXPECT_TRUE(toJson(a)["results"][1]["us_per_gemv_of_each_shape_alone"].contains("down"));
  EXPECT_NE(toText(a).find("µs a GEMV of each shape alone"), std::string::npos);
  EXPECT_FALSE(toJson(r)["results"][0].contains("us_per_gemv_of_each_shape_alone"));
  EXPECT_THROW(runKernelBenchmark([&] { auto b = o; b.formats = {"int5-g7"}; return b; }(), nullptr, CancelToken()),
               InputError);
  EXPECT_THROW(modelShapeByName("no-such-model"), InputError);
}

TEST(PackedGemvReference, RejectsWhatTheKernelsCannotTake) {
  const BitmaskNMWeight w = randomBitmaskNM(32, 64, 1, 8, at::kHalf, at::kCPU, 1);  // 4 of 32 kept: not compiled
  const auto kw = BitmaskNMKernelWeight::fromPacked(w);
  EXPECT_THROW(gemv(kw, randomActivations(1, 64, at::kHalf, at::kCPU)), InputError);
  const BitmaskNMWeight ok = randomBitmaskNM(32, 64, 2, 4, at::kHalf, at::kCPU, 1);
  const auto kok = BitmaskNMKernelWeight::fromPacked(ok);
  EXPECT_THROW(gemv(kok, randomActivations(17, 64, at::kHalf, at::kCPU)), InputError);          // batch > 16
  EXPECT_THROW(gemv(kok, randomActivations(1, 96, at::kHalf, at::kCPU)), InputError);           // wrong width
  EXPECT_THROW(gemv(kok, randomActivations(1, 64, at::kBFloat16, at::kCPU)), InputError);       // dtype mismatch
  EXPECT_THROW(gemv(kok, randomActivations(1, 64, at::kHalf, at::kCPU), at::empty({1, 7}, at::kHalf)), InputError);
  const QuantGroupWeight q3 = randomQuantGroup(32, 256, 4, true, 128, at::kCPU, 1);
  QuantGroupWeight bad = q3;
  bad.groupSize = 96;  // does not divide 256
  EXPECT_THROW(QuantGroupKernelWeight::fromPacked(bad), InputError);
}

// The quantized split must reserve the shared memory the kernel uses: on the tensor-core path (4-bit codes,
// 8-bit codes in fp16) 16-bit rows of x padded by quantStagePadHalves, the unit sums and the warps' weight rings
// (quant_group_gemv.cu) within the ring kernels' budget, sized for kRingResidentBlocks blocks a multiprocessor;
// fp32 rows of x on the FFMA path (8-bit codes in bf16).
TEST(PackedGemvSplit, QuantSharedMemoryFollowsTheArithmeticPath) {
  namespace k = kernels;
  for (int b : {1, 2, 4, 8, 16}) {
    EXPECT_TRUE(k::quantUsesTensorCores(4, k::ActivationType::Float16, b));
    EXPECT_TRUE(k::quantUsesTensorCores(4, k::ActivationType::BFloat16, b));
    EXPECT_EQ(k::quantUsesTensorCores(8, k::ActivationType::Float16, b), b >= 4);  // FFMA faster at 1-2 (NOTES v6)
    EXPECT_FALSE(k::quantUsesTensorCores(8, k::ActivationType::BFloat16, b));
  }
  const int sms = 132;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}}) {
    for (int bits : {4, 8}) {
      for (auto type : {k::ActivationType::Float16, k::ActivationType::BFloat16}) {
        for (int batch : {1, 2, 3, 4, 8, 11, 16}) {
          k::GemvProblem p;
          p.rows = rows, p.cols = cols, p.batch = batch, p.type = type;
          k::QuantGroupGemvWeight w;
          const int64_t group = bits == 4 ? 128 : cols;
          w.bits = bits, w.groupSize = group, w.scaleColumns = k::quantScaleColumns(cols, group, bits);
          const k::GemvSplit s = k::quantGroupGemvSplit(p, w, sms);
          const int compiled = k::compiledBatch(batch);
          const size_t sums = sizeof(float) * size_t(compiled) * size_t(s.sliceCols / k::quantSumUnit(group, bits));
          const bool mma = k::quantUsesTensorCores(bits, type, compiled);
          const size_t staged =
              mma ? 2 * size_t(compiled) * size_t(s.sliceCols + k::quantStagePadHalves(bits)) + 16 + k::kQuantRingBytes
                  : sizeof(float) * size_t(compiled) * size_t(s.sliceCols);
          const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + " int" + std::to_string(bits) +
                                   " batch " + std::to_string(batch);
          EXPECT_EQ(s.sharedBytes, staged + sums) << what;
          EXPECT_LE(s.sharedBytes, mma ? k::kRingMaxSharedBytes : k::kMaxStagedBytes) << what;
          EXPECT_GE(int64_t(s.splits) * s.chunksPerSplit, k::quantChunks(cols, bits)) << what;
          EXPECT_LT(int64_t(s.splits - 1) * s.chunksPerSplit, k::quantChunks(cols, bits)) << what;  // no empty split
          EXPECT_EQ(s.sliceCols, s.chunksPerSplit * k::quantChunkCols(bits)) << what;
        }
      }
    }
  }
}

// ---- CUDA: kernels against the references ------------------------------------------------------------------

bool cudaKernelsAvailable() { return gemvKernelsBuilt() && at::hasCUDA(); }

#define SKIP_WITHOUT_CUDA()                                                                        \
  if (!cudaKernelsAvailable())                                                                     \
  GTEST_SKIP() << (gemvKernelsBuilt() ? "no CUDA device" : "built without CUDA kernels (PARETO_CUDA=OFF)")

// PARETO_KERNEL_TEST_SMALL=1 (the compute-sanitizer run, ~100x slower) keeps the shapes and batches small.
bool smallRun() { return std::getenv("PARETO_KERNEL_TEST_SMALL") != nullptr; }

std::vector<int> testBatches() {
  return smallRun() ? std::vector<int>{1, 3, 16} : std::vector<int>{1, 2, 3, 5, 8, 11, 16};
}

template <class KernelWeight>
void checkKernel(const KernelWeight& onCpu, const KernelWeight& onGpu, int64_t rows, int64_t cols,
                 at::ScalarType dtype, const std::string& label) {
  for (int batch : testBatches()) {
    const at::Tensor x = randomActivations(batch, cols, dtype, at::kCUDA);
    at::Tensor out = at::full({batch, rows}, std::nan(""), x.options());  // poisoned: every element must be written
    gemv(onGpu, x, out);
    const at::Tensor ref = reference(onCpu, x);
    ASSERT_FALSE(out.isnan().any().item<bool>()) << label << " batch " << batch << ": output not fully written";
    // Rounding the output to its type moves each element by at most half an ulp: 2^-12 relative in fp16, but
    // 2^-9 = 2.0e-3 in bf16 (8 significant bits). So a bf16 result may differ from the float64 reference by the
    // kernel's error plus up to 2^-9 (comparing with the reference rounded to bf16 instead is not a bound: where
    // the exact value lies near a rounding boundary the two roundings can land a whole ulp apart, which on 32
    // outputs failed a correct kernel at 2.4e-3).
    const double tolerance = dtype == at::kBFloat16 ? 2e-3 + std::ldexp(1.0, -9) : 2e-3;
    EXPECT_LT(relativeError(out, ref), tolerance) << label << " " << c10::toString(dtype) << " batch " << batch;
  }
}

std::vector<std::pair<int64_t, int64_t>> testShapes() {
  if (smallRun()) return {{32, 256}, {100, 4160}, {333, 1056}};
  return {{32, 256}, {100, 4160}, {333, 1056}, {4096, 4096}};
}

TEST(PackedGemvCuda, BitmaskKernelMatchesReference) {
  SKIP_WITHOUT_CUDA();
  for (auto [n, m] : {std::pair{2, 4}, {4, 8}, {8, 16}, {16, 32}, {1, 4}, {3, 4}}) {
    for (auto [rows, cols] : testShapes()) {
      for (auto dtype : {at::kHalf, at::kBFloat16}) {
        const BitmaskNMWeight w = randomBitmaskNM(rows, cols, n, m, dtype, at::kCPU, freshSeed());
        const auto cpu = BitmaskNMKernelWeight::fromPacked(w);
        BitmaskNMWeight onDevice = w;
        onDevice.masks = w.masks.to(at::kCUDA);
        onDevice.values = w.values.to(at::kCUDA);
        checkKernel(cpu, BitmaskNMKernelWeight::fromPacked(onDevice), rows, cols, dtype,
                    std::to_string(n) + ":" + std::to_string(m) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      }
    }
  }
}

TEST(PackedGemvCuda, QuantGroupKernelMatchesReference) {
  SKIP_WITHOUT_CUDA();
  for (int bits : {4, 8}) {
    for (bool symmetric : {true, false}) {
      for (auto [rows, cols] : testShapes()) {
        for (int64_t group : {int64_t(32), int64_t(64), int64_t(128), cols}) {
          if (cols % group != 0) continue;
          const QuantGroupWeight w = randomQuantGroup(rows, cols, bits, symmetric, group, at::kCPU, freshSeed());
          QuantGroupWeight onDevice = w;
          onDevice.codes = w.codes.to(at::kCUDA);
          onDevice.scales = w.scales.to(at::kCUDA);
          if (w.zeros.defined()) onDevice.zeros = w.zeros.to(at::kCUDA);
          for (auto dtype : {at::kHalf, at::kBFloat16})
            checkKernel(QuantGroupKernelWeight::fromPacked(w), QuantGroupKernelWeight::fromPacked(onDevice), rows,
                        cols, dtype,
                        "int" + std::to_string(bits) + (symmetric ? " sym" : " asym") + " g" + std::to_string(group) +
                            " " + std::to_string(rows) + "x" + std::to_string(cols));
        }
      }
    }
  }
}

TEST(PackedGemvCuda, BitmaskInt4KernelMatchesReference) {
  SKIP_WITHOUT_CUDA();
  for (auto [n, m] : {std::pair{2, 4}, {16, 32}}) {
    for (auto [rows, cols] : testShapes()) {
      for (int64_t group : {int64_t(64), int64_t(128), cols / 2}) {
        if (cols / 2 % group != 0) continue;
        const BitmaskNMWeight pattern = randomBitmaskNM(rows, cols, n, m, at::kHalf, at::kCPU, freshSeed());
        const QuantGroupWeight kept = randomQuantGroup(rows, cols / 2, 4, group != 64, group, at::kCPU, freshSeed());
        QuantGroupWeight keptOnDevice = kept;
        keptOnDevice.codes = kept.codes.to(at::kCUDA);
        keptOnDevice.scales = kept.scales.to(at::kCUDA);
        if (kept.zeros.defined()) keptOnDevice.zeros = kept.zeros.to(at::kCUDA);
        checkKernel(BitmaskInt4KernelWeight::fromPacked(pattern.masks, n, m, kept),
                    BitmaskInt4KernelWeight::fromPacked(pattern.masks.to(at::kCUDA), n, m, keptOnDevice), rows, cols,
                    at::kHalf, "bitmask int4 g" + std::to_string(group) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      }
    }
  }
}

TEST(PackedGemvCuda, SpqrKernelMatchesReference) {
  SKIP_WITHOUT_CUDA();
  for (int bits : {2, 3, 4}) {
    for (auto [rows, cols] : testShapes()) {
      const SpqrParts parts = randomSpqr(rows, cols, bits, 16, 0.01, at::kCPU, freshSeed());
      SpqrParts onDevice = parts;
      for (at::Tensor* t : {&onDevice.codes, &onDevice.scaleCodes, &onDevice.zeroCodes, &onDevice.scaleBase,
                            &onDevice.scaleStep, &onDevice.rowOffsets, &onDevice.outlierColumns, &onDevice.outlierValues})
        *t = t->to(at::kCUDA);
      for (auto dtype : {at::kHalf, at::kBFloat16})
        checkKernel(SpqrKernelWeight::fromParts(parts), SpqrKernelWeight::fromParts(onDevice), rows, cols, dtype,
                    "spqr " + std::to_string(bits) + "-bit " + std::to_string(rows) + "x" + std::to_string(cols));
    }
  }
}

}  // namespace
}  // namespace pareto
