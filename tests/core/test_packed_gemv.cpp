// Packed-weight GEMV: every format's kernel re-layout, float64 reference, CPU runtime path and CUDA kernel
// through one harness (KernelHarness: formats × shapes × batches × dtypes against the stored format's own float64
// definition; the CUDA half only where a CUDA device and a PARETO_CUDA build exist), and the checks around them:
// bad shapes refused, the quantized split's shared-memory budget, `bench kernels` on the CPU references.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "formats/BitmaskNMWeight.h"
#include "formats/BitPacking.h"
#include "formats/QuantGroupWeight.h"
#include "formats/SpqrWeight.h"
#include "kernels/BitmaskInt4Gemv.h"
#include "kernels/BitmaskNMGemv.h"
#include "kernels/KernelSwitches.h"
#include "kernels/QuantGroupGemv.h"
#include "kernels/SpqrGemv.h"
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

at::Tensor expected(const at::Tensor& x, const at::Tensor& dense) {
  return at::matmul(x.to(at::kCPU).to(at::kDouble), dense.to(at::kCPU).to(at::kDouble).t());
}

// ---- One harness: every format × shape × batch × dtype, on every backend, against the format's float64 ------
//
// In the spirit of llama.cpp's test-backend-ops: a variant builds a stored weight of its format from a seed
// and the dense float64 weight that format defines (from the stored parts alone, independently of the kernel
// layout). Each backend then multiplies the same random activations and is compared with x · Wᵀ in float64:
//   float64   the kernel layout's float64 reference, unrounded: equal to the definition up to summation order
//             (a wrong re-layout, padding or reference fails here);
//   cpu       the runtime's CPU path (that reference, rounded to the activation dtype), output poisoned first;
//   cuda      the kernel, output poisoned with NaN first so every element must be written (skipped without a
//             device or without PARETO_CUDA kernels).
// Every failure names the variant, shape, dtype, batch, backend and the case's seed; the base seed printed at
// the start (PARETO_TEST_SEED) replays the whole run.

// A stored weight made ready for one device: y = x · Ŵᵀ through the runtime, and (CPU weights only) the
// layout's float64 reference.
struct Runner {
  std::function<at::Tensor(const at::Tensor& x, at::Tensor out)> gemv;
  std::function<at::Tensor(const at::Tensor& x)> reference;
};

template <class KernelWeight>
Runner runnerOf(KernelWeight w) {
  auto weight = std::make_shared<KernelWeight>(std::move(w));
  return {[weight](const at::Tensor& x, at::Tensor out) { return gemv(*weight, x, std::move(out)); },
          [weight](const at::Tensor& x) {
            return gemv(*weight, x.to(at::kCPU), at::empty({x.size(0), weight->rows}, at::kDouble));
          }};
}

struct PreparedWeight {
  at::Tensor dense;                              // float64 [rows, cols] on the CPU: the format's definition
  std::function<Runner(at::Device)> on;          // the weight re-laid out for its kernel on a device
};

struct FormatVariant {
  std::string name;
  std::function<bool(int64_t rows, int64_t cols)> takes;   // the shapes this variant's kernel accepts
  std::function<PreparedWeight(int64_t rows, int64_t cols, at::ScalarType dtype, uint64_t seed)> build;
  double layoutTolerance = 1e-12;   // float64 backend against the definition
};

// The parts of a packed weight moved to a device (the kernel weight is built there, as the loader does).
QuantGroupWeight quantOn(const QuantGroupWeight& w, at::Device d) {
  QuantGroupWeight o = w;
  o.codes = w.codes.to(d);
  o.scales = w.scales.to(d);
  if (w.zeros.defined()) o.zeros = w.zeros.to(d);
  return o;
}

SpqrParts spqrOn(const SpqrParts& p, at::Device d) {
  SpqrParts o = p;
  for (at::Tensor* t : {&o.codes, &o.scaleCodes, &o.zeroCodes, &o.scaleBase, &o.scaleStep, &o.rowOffsets,
                        &o.outlierColumns, &o.outlierValues})
    *t = t->to(d);
  return o;
}

// The stored SpQR weight (bit streams, int16 outlier columns) of random parts: what a compressed folder holds.
SpqrWeight storedSpqr(const SpqrParts& parts, int64_t rows, int64_t cols) {
  SpqrWeight w;
  w.bits = parts.bits;
  w.scaleBits = 3;
  w.groupSize = 16;
  w.scaleGroup = parts.scaleGroup;
  w.rows = rows;
  w.cols = cols;
  w.codes = packCodeBits(parts.codes, parts.bits);
  w.scaleCodes = packCodeBits(parts.scaleCodes, 3);
  w.zeroCodes = packCodeBits(parts.zeroCodes, 3);
  w.scaleBase = parts.scaleBase;
  w.scaleStep = parts.scaleStep;
  w.outlierRowOffsets = parts.rowOffsets;
  w.outlierColumns = parts.outlierColumns.to(at::kShort);
  w.outlierValues = parts.outlierValues;
  return w;
}

std::string groupName(int64_t group) { return group == 0 ? "row" : "g" + std::to_string(group); }

std::vector<FormatVariant> formatVariants() {
  std::vector<FormatVariant> v;
  for (auto [n, m] : {std::pair{2, 4}, {1, 4}, {3, 4}, {4, 8}, {8, 16}, {16, 32}}) {
    v.push_back({"bitmask " + std::to_string(n) + ":" + std::to_string(m),
                 [](int64_t, int64_t cols) { return cols % 32 == 0; },
                 [n = n, m = m](int64_t rows, int64_t cols, at::ScalarType dtype, uint64_t seed) {
                   const BitmaskNMWeight w = randomBitmaskNM(rows, cols, n, m, dtype, at::kCPU, seed);
                   return PreparedWeight{w.unpack().to(at::kDouble), [w](at::Device d) {
                                           BitmaskNMWeight o = w;
                                           o.masks = w.masks.to(d);
                                           o.values = w.values.to(d);
                                           return runnerOf(BitmaskNMKernelWeight::fromPacked(o));
                                         }};
                 }});
  }
  // group 0 = one group a row (per channel); the kernels take 32, 64, 128, multiples of their chunk, or a row.
  for (int bits : {4, 8}) {
    for (bool symmetric : {true, false}) {
      for (int64_t group : {int64_t(32), int64_t(64), int64_t(128), int64_t(512), int64_t(0)}) {
        v.push_back({"int" + std::to_string(bits) + (symmetric ? " sym " : " asym ") + groupName(group),
                     [group](int64_t, int64_t cols) { return group == 0 || (group < cols && cols % group == 0); },
                     [=](int64_t rows, int64_t cols, at::ScalarType, uint64_t seed) {
                       const QuantGroupWeight w =
                           randomQuantGroup(rows, cols, bits, symmetric, group == 0 ? cols : group, at::kCPU, seed);
                       return PreparedWeight{w.unpack().to(at::kDouble), [w](at::Device d) {
                                               return runnerOf(QuantGroupKernelWeight::fromPacked(quantOn(w, d)));
                                             }};
                     }});
      }
    }
  }
  // Kept values per scale: 16, 32, 64, multiples of 128, or the whole (kept) row.
  for (auto [n, m] : {std::pair{2, 4}, {16, 32}}) {
    for (int64_t group : {int64_t(16), int64_t(32), int64_t(64), int64_t(128), int64_t(0)}) {
      for (bool symmetric : {true, false}) {
        v.push_back({"bitmask " + std::to_string(n) + ":" + std::to_string(m) + " int4" +
                         (symmetric ? " sym " : " asym ") + groupName(group),
                     [group](int64_t, int64_t cols) {
                       return cols % 32 == 0 && (group == 0 || (group < cols / 2 && (cols / 2) % group == 0));
                     },
                     [n = n, m = m, group, symmetric](int64_t rows, int64_t cols, at::ScalarType, uint64_t seed) {
                       const BitmaskNMWeight pattern = randomBitmaskNM(rows, cols, n, m, at::kHalf, at::kCPU, seed);
                       const QuantGroupWeight kept = randomQuantGroup(rows, cols / 2, 4, symmetric,
                                                                      group == 0 ? cols / 2 : group, at::kCPU, seed + 1);
                       const at::Tensor masks = pattern.masks;
                       return PreparedWeight{bitmaskInt4Dense(masks, kept), [=](at::Device d) {
                                               return runnerOf(BitmaskInt4KernelWeight::fromPacked(
                                                   masks.to(d), n, m, quantOn(kept, d)));
                                             }};
                     }});
      }
    }
  }
  // SpQR's scales are two-level (fp16 base + code · step): the layout's reference and the definition compute
  // them in different precisions, hence 1e-6 rather than 1e-12.
  for (int bits : {2, 3, 4}) {
    v.push_back({"spqr " + std::to_string(bits) + "-bit", [](int64_t, int64_t cols) { return cols % 16 == 0; },
                 [bits](int64_t rows, int64_t cols, at::ScalarType, uint64_t seed) {
                   const SpqrParts parts = randomSpqr(rows, cols, bits, 16, 0.02, at::kCPU, seed);
                   return PreparedWeight{spqrDense(parts), [parts](at::Device d) {
                                           return runnerOf(SpqrKernelWeight::fromParts(spqrOn(parts, d)));
                                         }};
                 },
                 1e-6});
  }
  v.push_back({"spqr 3-bit stored", [](int64_t rows, int64_t cols) { return rows % 16 == 0 && cols % 16 == 0; },
               [](int64_t rows, int64_t cols, at::ScalarType, uint64_t seed) {
                 const SpqrWeight w = storedSpqr(randomSpqr(rows, cols, 3, 16, 0.02, at::kCPU, seed), rows, cols);
                 return PreparedWeight{w.unpack().to(at::kDouble), [w](at::Device d) {
                                         SpqrWeight o = w;
                                         for (at::Tensor* t : {&o.codes, &o.scaleCodes, &o.zeroCodes, &o.scaleBase,
                                                               &o.scaleStep, &o.outlierRowOffsets, &o.outlierColumns,
                                                               &o.outlierValues})
                                           *t = t->to(d);
                                         return runnerOf(SpqrKernelWeight::fromPacked(o));
                                       }};
               },
               1e-6});
  return v;
}

// gtest prints a failing parameter with this instead of its bytes.
void PrintTo(const FormatVariant& v, std::ostream* os) { *os << v.name; }

bool cudaKernelsAvailable() { return gemvKernelsBuilt() && at::hasCUDA(); }

// PARETO_KERNEL_TEST_SMALL=1 (the compute-sanitizer run, ~100x slower) keeps the shapes and batches small.
bool smallRun() { return std::getenv("PARETO_KERNEL_TEST_SMALL") != nullptr; }

std::vector<int> testBatches() {
  return smallRun() ? std::vector<int>{1, 3, 16} : std::vector<int>{1, 2, 3, 5, 8, 11, 16};
}

// CPU shapes: rows not a multiple of 32, columns not of 256 (partial chunks), groups that divide some of them.
std::vector<std::pair<int64_t, int64_t>> cpuShapes() { return {{45, 288}, {33, 576}, {37, 384}, {45, 208}, {19, 1024}, {32, 272}}; }

// 64 × 1024 gives the 512-column groups and the 128-kept-value groups a shape in the small run too.
std::vector<std::pair<int64_t, int64_t>> cudaShapes() {
  if (smallRun()) return {{32, 256}, {100, 4160}, {333, 1056}, {64, 1024}};
  return {{32, 256}, {100, 4160}, {333, 1056}, {64, 1024}, {4096, 4096}};
}

// Rounding the output to its type moves each element by at most half an ulp: 2^-12 relative in fp16, but 2^-9
// = 2.0e-3 in bf16 (8 significant bits). So a bf16 result may differ from the float64 value by the kernel's
// error plus up to 2^-9 (comparing with the reference rounded to bf16 instead is not a bound: where the exact
// value lies near a rounding boundary the two roundings can land a whole ulp apart, which on 32 outputs failed
// a correct kernel at 2.4e-3).
double roundedTolerance(at::ScalarType dtype) { return dtype == at::kBFloat16 ? 2e-3 + std::ldexp(1.0, -9) : 2e-3; }

class KernelHarness : public ::testing::TestWithParam<FormatVariant> {
 protected:
  // Runs the variant on one device's shapes; the float64 and cpu backends on the CPU, cuda on the device.
  void check(at::Device device, const std::vector<std::pair<int64_t, int64_t>>& shapes) {
    const FormatVariant& f = GetParam();
    int cases = 0;
    for (auto [rows, cols] : shapes) {
      if (!f.takes(rows, cols)) continue;
      for (auto dtype : {at::kHalf, at::kBFloat16}) {
        const uint64_t seed = freshSeed();
        const PreparedWeight w = f.build(rows, cols, dtype, seed);
        const Runner cpu = w.on(at::kCPU);
        const Runner run = device.is_cpu() ? cpu : w.on(device);
        for (int batch : testBatches()) {
          const std::string what = f.name + " " + std::to_string(rows) + "x" + std::to_string(cols) + " " +
                                   c10::toString(dtype) + " batch " + std::to_string(batch) + " (case seed " +
                                   std::to_string(seed) + ", PARETO_TEST_SEED=" + std::to_string(baseSeed()) + ")";
          const at::Tensor x = randomActivations(batch, cols, dtype, device);
          const at::Tensor want = expected(x, w.dense);
          if (device.is_cpu())
            EXPECT_LT(relativeError(cpu.reference(x), want), f.layoutTolerance) << "float64 backend: " << what;
          at::Tensor out = at::full({batch, rows}, std::nan(""), x.options());
          const at::Tensor y = run.gemv(x, out);
          ASSERT_EQ(y.sizes(), (at::IntArrayRef{batch, rows})) << what;
          ASSERT_EQ(y.scalar_type(), dtype) << what;
          ASSERT_FALSE(out.isnan().any().item<bool>()) << device << " backend: output not fully written: " << what;
          EXPECT_LT(relativeError(out, want), roundedTolerance(dtype)) << device << " backend: " << what;
          ++cases;
        }
      }
    }
    EXPECT_GT(cases, 0) << f.name << ": no shape of this run fits the variant";
  }
};

TEST_P(KernelHarness, CpuMatchesTheFormatsDefinition) { check(at::kCPU, cpuShapes()); }

TEST_P(KernelHarness, CudaMatchesTheFormatsDefinition) {
  if (!cudaKernelsAvailable())
    GTEST_SKIP() << (gemvKernelsBuilt() ? "no CUDA device" : "built without CUDA kernels (PARETO_CUDA=OFF)");
  check(at::kCUDA, cudaShapes());
}

INSTANTIATE_TEST_SUITE_P(PackedGemv, KernelHarness, ::testing::ValuesIn(formatVariants()),
                         [](const ::testing::TestParamInfo<FormatVariant>& info) {
                           std::string name;
                           for (char c : info.param.name) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

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

// What the kernels refuse of a problem's folded work (GemvProblem's input and accumulate), before any launch: the
// CUDA path checks it with checkGemvProblem, so it is testable without a GPU.
TEST(PackedGemvProblem, RefusesFoldsTheKernelsCannotDo) {
  namespace k = kernels;
  alignas(16) static uint16_t x[2 * 32768], y[64], weight[32768];
  k::GemvProblem p;
  p.rows = 32, p.cols = 4096, p.batch = 2;
  p.x = x, p.y = y;
  EXPECT_EQ(k::checkGemvProblem(p), "");
  p.input = k::GemvInput::RmsNorm;
  EXPECT_NE(k::checkGemvProblem(p).find("RMSNorm weight"), std::string::npos);  // no weight
  p.normWeight = weight + 1;                                                      // not 16-byte aligned
  EXPECT_NE(k::checkGemvProblem(p).find("RMSNorm weight"), std::string::npos);
  p.normWeight = weight;
  EXPECT_EQ(k::checkGemvProblem(p), "");
  p.cols = k::kGemvMaxNormCols + 8;  // more spans than a block keeps
  EXPECT_NE(k::checkGemvProblem(p).find(std::to_string(k::kGemvMaxNormCols)), std::string::npos);
  p.cols = 4096;
  p.eps = -1.f;
  EXPECT_NE(k::checkGemvProblem(p).find("eps"), std::string::npos);
  p.eps = 1e-5f;
  p.y = x;  // the output over its own input
  EXPECT_NE(k::checkGemvProblem(p).find("must not be the input"), std::string::npos);
  // The bitmask N:M and SpQR kernels take no folded work at all (the runtime runs those ops around them).
  p.y = y;
  ASSERT_EQ(k::checkGemvProblem(p), "");
  for (const bool accumulate : {false, true}) {
    p.input = accumulate ? k::GemvInput::Plain : k::GemvInput::RmsNorm;
    p.accumulate = accumulate;
    EXPECT_NE(k::checkBitmaskNMGemv(p, k::BitmaskNMGemvWeight{}).find("no folded"), std::string::npos);
    EXPECT_NE(k::checkSpqrGemv(p, k::SpqrGemvWeight{}).find("no folded"), std::string::npos);
  }
}

// The quantized split must reserve the shared memory the kernel uses: on the tensor-core path (4-bit codes,
// 8-bit codes in fp16) 16-bit rows of x padded by quantStagePadHalves, the unit sums and the warps' weight rings
// (quant_group_gemv.cu; ring chunks of half a layout chunk from quantHalvesMinBatch) within the ring kernels'
// budget, sized for kRingResidentBlocks blocks a multiprocessor; fp32 rows of x on the FFMA path (8-bit codes in
// bf16).
TEST(PackedGemvSplit, QuantSharedMemoryFollowsTheArithmeticPath) {
  namespace k = kernels;
  for (int b : {1, 2, 4, 8, 16}) {
    EXPECT_TRUE(k::quantUsesTensorCores(4, k::ActivationType::Float16, b));
    EXPECT_TRUE(k::quantUsesTensorCores(4, k::ActivationType::BFloat16, b));
    EXPECT_EQ(k::quantUsesTensorCores(8, k::ActivationType::Float16, b), b >= 2);  // FFMA faster at 1 (NOTES v6c)
    EXPECT_FALSE(k::quantUsesTensorCores(8, k::ActivationType::BFloat16, b));
    EXPECT_EQ(k::quantRingHalves(4, k::ActivationType::Float16, b), b >= 8 ? 2 : 1);   // NOTES v6g
    EXPECT_EQ(k::quantRingHalves(8, k::ActivationType::Float16, b), b >= 16 ? 2 : 1);  // halves slower at 8
    EXPECT_EQ(k::quantRingHalves(8, k::ActivationType::BFloat16, b), 1);                 // FFMA: whole chunks
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
          const bool mma = k::quantUsesTensorCores(bits, type, compiled);
          const int halves = k::quantRingHalves(bits, type, compiled);
          // No sums where the zero point is on the tensor cores (int4 g128 and int8 per channel from batch 2, in
          // fp16; the tests' environment leaves PARETO_QUANT_ZERO_MMA(_8) unset, so wherever it applies).
          const bool zeroMma = k::quantZeroOnTensorCores(w, type, compiled);
          const bool f16 = type == k::ActivationType::Float16;
          EXPECT_EQ(zeroMma, f16 && (bits == 4 || compiled >= 2)) << rows << "x" << cols << " batch " << batch;
          EXPECT_EQ(k::quantZeroMmaApplies(w, type, compiled), f16 && (bits == 4 || compiled >= 2))
              << rows << "x" << cols << " batch " << batch;
          const size_t sums = zeroMma ? 0
                                      : sizeof(float) * size_t(compiled) *
                                            size_t(s.sliceCols / k::quantRingSumUnit(group, bits, halves));
          const size_t staged = mma ? 2 * size_t(compiled) * size_t(s.sliceCols + k::quantStagePadHalves(bits)) + 16 +
                                          k::quantRingBytes(halves, k::quantRingStages(bits, type, compiled))
                                    : sizeof(float) * size_t(compiled) * size_t(s.sliceCols);
          const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + " int" + std::to_string(bits) +
                                   " batch " + std::to_string(batch);
          EXPECT_EQ(s.sharedBytes, staged + sums) << what;
          EXPECT_LE(s.sharedBytes, mma ? k::kRingMaxSharedBytes : k::kMaxStagedBytes) << what;
          // The split counts the ring's chunks.
          EXPECT_GE(int64_t(s.splits) * s.chunksPerSplit, k::quantChunks(cols, bits) * halves) << what;
          EXPECT_LT(int64_t(s.splits - 1) * s.chunksPerSplit, k::quantChunks(cols, bits) * halves) << what;
          EXPECT_EQ(s.sliceCols, s.chunksPerSplit * k::quantChunkCols(bits) / halves) << what;
        }
      }
    }
  }
}

// The zero point on the tensor cores (int4 g128, QuantGroupFormats.cuh kZeroMma) rests on fp16 encodings: its A
// operands are exactly −(1024 + z) and −(64 + z) for every zero a byte of 4-bit groups can hold and beyond (z ≤ 63),
// and the odd columns' in-place read, (q << 4) | 0x5400, is exactly 64 + q, so that every column's
// (read − bias − z) is q − z.
TEST(PackedGemvSplit, ZeroPointOperandsAreExactInHalfPrecision) {
  namespace k = kernels;
  const auto half = [](uint32_t bits) { return float(c10::Half(uint16_t(bits), c10::Half::from_bits())); };
  for (uint32_t z = 0; z <= 63; ++z) {
    EXPECT_EQ(half(k::quantZeroEvenBits(z)), -(1024.f + float(z))) << z;
    EXPECT_EQ(half(k::quantZeroOddBits(z)), -(64.f + float(z))) << z;
  }
  for (uint32_t q = 0; q < 16; ++q) {
    EXPECT_EQ(half((q << 4) | 0x5400u), 64.f + float(q)) << q;
    EXPECT_EQ(half(q | 0x6400u), 1024.f + float(q)) << q;
    for (uint32_t z = 0; z < 16; ++z) {
      EXPECT_EQ(half(q | 0x6400u) + half(k::quantZeroEvenBits(z)), float(q) - float(z));
      EXPECT_EQ(half((q << 4) | 0x5400u) + half(k::quantZeroOddBits(z)), float(q) - float(z));
    }
  }
}

// The kernels' environment switches: "0" off, "1" on, unset or empty the policy; anything else is named on stderr
// and ignored (a typo in an A/B side must not quietly time the default as the other side). Every switch in the
// list has its own name and a meaning the benchmarks can print.
TEST(KernelSwitches, ReadZeroAndOneAndNameAnythingElse) {
  namespace k = kernels;
  const char* name = "PARETO_TEST_KERNEL_SWITCH";
  unsetenv(name);
  EXPECT_EQ(k::kernelSwitch(name), k::SwitchSetting::Unset);
  setenv(name, "", 1);
  EXPECT_EQ(k::kernelSwitch(name), k::SwitchSetting::Unset);
  setenv(name, "0", 1);
  EXPECT_EQ(k::kernelSwitch(name), k::SwitchSetting::Off);
  setenv(name, "1", 1);
  EXPECT_EQ(k::kernelSwitch(name), k::SwitchSetting::On);
  setenv(name, "yes", 1);
  testing::internal::CaptureStderr();
  EXPECT_EQ(k::kernelSwitch(name), k::SwitchSetting::Unset);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("PARETO_TEST_KERNEL_SWITCH=yes"), std::string::npos) << said;
  unsetenv(name);
  std::vector<std::string> names;
  for (const k::KernelSwitch& sw : k::kKernelSwitches) {
    EXPECT_EQ(std::string(sw.name).rfind("PARETO_", 0), 0u) << sw.name;
    EXPECT_GT(std::string(sw.meaning).size(), 10u) << sw.name;
    names.push_back(sw.name);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

// Warps of a ring block sharing a row group (PARETO_RING_GROUP_WARPS=0 turns it off): weighed by default, the
// default choice is what maxGroupWarps 8 gives; with 1 it is exactly what a warp a row group gives. Weighed, the int4 g128 batch-1 GEMVs of Llama-3.1-8B drop the
// global combine of their many small splits (qkv and o: 8 splits of 2 chunks a warp before) or most of it (down: 2
// splits instead of 14), every warp keeps at least 2 chunks, the grid stays within one wave, and the staged x and
// the rings still fit.
// The int4/int8 rings' stages (the environment of the tests leaves PARETO_QUANT_DEEP_RING and _HALVES unset): whole
// chunks in 2 stages below the half-chunk batches, half chunks in 3 from them; v7d's 4 stages of half chunks at batch
// 1-4 only under its switch; and the bytes of a block's rings follow.
TEST(PackedGemvSplit, QuantRingStagesFollowTheChunkAndTheBatch) {
  namespace k = kernels;
  const auto f16 = k::ActivationType::Float16;
  for (int batch : {1, 2, 4}) {
    EXPECT_FALSE(k::quantDeepRing(4, f16, batch));
    EXPECT_EQ(k::quantRingHalves(4, f16, batch), 1);
    EXPECT_EQ(k::quantRingStages(4, f16, batch), k::kQuantRingStages);
  }
  for (int batch : {8, 16}) {
    EXPECT_EQ(k::quantRingHalves(4, f16, batch), 2);
    EXPECT_EQ(k::quantRingStages(4, f16, batch), k::kQuantHalfRingStages);
  }
  EXPECT_EQ(k::quantRingStages(8, f16, 8), k::kQuantRingStages);  // 8-bit halves from batch 16
  EXPECT_EQ(k::quantRingBytes(1, k::kQuantRingStages), size_t(k::kRingWarpsPerBlock) * 2 * k::kQuantSlotBytes);
  // v7d's deep ring takes no more shared memory than the whole-chunk ring it replaces.
  EXPECT_LE(k::quantRingBytes(2, k::kQuantDeepRingStages), k::quantRingBytes(1, k::kQuantRingStages));
}

TEST(PackedGemvSplit, RingWarpsSharingARowGroupReplaceTheGlobalCombineOfSmallSplits) {
  namespace k = kernels;
  const int sms = 132;
  EXPECT_EQ(k::ringMaxGroupWarps(), k::kRingWarpsPerBlock);  // the environment of the tests leaves it unset
  struct Case {
    int64_t rows, cols;
    int batch;
  };
  for (const Case& c : std::vector<Case>{{6144, 4096, 1}, {4096, 4096, 1}, {28672, 4096, 1}, {4096, 14336, 1},
                                         {6144, 4096, 8}, {4096, 14336, 16}, {100, 4160, 1}, {333, 1056, 4}}) {
    const int halves = k::quantRingHalves(4, k::ActivationType::Float16, c.batch);
    const int64_t chunks = k::quantChunks(c.cols, 4) * halves, chunkCols = k::quantChunkCols(4) / halves;
    const size_t fixed = 2 * size_t(c.batch) * size_t(k::quantStagePadHalves(4)) + 16 +
                         k::quantRingBytes(halves, k::quantRingStages(4, k::ActivationType::Float16, c.batch));
    const auto choose = [&](int maxGroupWarps) {
      return k::chooseRingSplit(c.rows, chunks, chunkCols, c.batch, 128 / halves, sms, k::kRingMaxSharedBytes,
                                2 * size_t(c.batch), fixed, halves, maxGroupWarps);
    };
    const k::GemvSplit one = choose(1), dflt = choose(0), shared = choose(8);
    const std::string what = std::to_string(c.rows) + "x" + std::to_string(c.cols) + " batch " + std::to_string(c.batch);
    EXPECT_EQ(one.ringGroupWarps, 1) << what;
    EXPECT_EQ(dflt.ringGroupWarps, shared.ringGroupWarps) << what;
    EXPECT_EQ(dflt.chunksPerSplit, shared.chunksPerSplit) << what;
    EXPECT_EQ(dflt.splits, shared.splits) << what;
    const int gw = shared.ringGroupWarps;
    EXPECT_TRUE(gw == 1 || gw == 2 || gw == 4 || gw == 8) << what;
    EXPECT_GE(int64_t(shared.splits) * shared.chunksPerSplit, chunks) << what;
    EXPECT_LT(int64_t(shared.splits - 1) * shared.chunksPerSplit, chunks) << what;  // no empty split
    EXPECT_EQ(shared.sliceCols, shared.chunksPerSplit * chunkCols) << what;
    EXPECT_LE(shared.sharedBytes, k::kRingMaxSharedBytes) << what;
    // The smallest part of a split (the kernel's floor(chunks · part / warps) boundaries) keeps a whole chunk.
    if (gw > 1) EXPECT_GE(shared.chunksPerSplit / gw, halves) << what;
    const int64_t blocks = k::ceilDiv(k::rowGroups(c.rows), k::kRingWarpsPerBlock / gw);
    EXPECT_LE(blocks * shared.splits, int64_t(k::kRingResidentBlocks) * sms) << what;
    if (c.batch == 1 && c.cols == 4096 && c.rows <= 6144) {
      EXPECT_EQ(one.splits, 8) << what;  // what a warp a row group must do to fill the machine
      EXPECT_EQ(shared.splits, 1) << what;
      EXPECT_EQ(gw, 8) << what;
    }
    if (c.batch == 1 && c.cols == 14336) EXPECT_LE(shared.splits, 2) << what;
    if (c.batch == 1 && c.rows == 28672) EXPECT_EQ(shared.splits, 1) << what;
  }
}

// gemv_kernels sweep forces each split a shape can take (forceGemvSplit): a split the policy could take is taken as
// asked, one it could not (too much shared memory, a warp without a chunk, shared row groups where the format has
// none) leaves the policy's choice, and clearing the force gives the policy's choice back.
TEST(PackedGemvSplit, AForcedSplitIsTakenOnlyWhereThePolicyCouldTakeIt) {
  namespace k = kernels;
  const int sms = 132, batch = 8;
  const int halves = k::quantRingHalves(4, k::ActivationType::Float16, batch);
  const int64_t rows = 6144, chunks = k::quantChunks(4096, 4) * halves, chunkCols = k::quantChunkCols(4) / halves;
  const size_t fixed = 2 * size_t(batch) * size_t(k::quantStagePadHalves(4)) + 16 +
                       k::quantRingBytes(halves, k::quantRingStages(4, k::ActivationType::Float16, batch));
  const auto choose = [&](int maxGroupWarps) {
    return k::chooseRingSplit(rows, chunks, chunkCols, batch, 0, sms, k::kRingMaxSharedBytes, 2 * size_t(batch), fixed,
                              2 * halves, maxGroupWarps);
  };
  const k::GemvSplit policy = choose(0);
  const auto same = [](const k::GemvSplit& a, const k::GemvSplit& b) {
    return a.splits == b.splits && a.chunksPerSplit == b.chunksPerSplit && a.ringGroupWarps == b.ringGroupWarps &&
           a.ringBlocks == b.ringBlocks && a.sharedBytes == b.sharedBytes;
  };
  const k::GemvSplitForce fits{4, 2, false};
  k::forceGemvSplit(&fits);
  const k::GemvSplit forced = choose(0);
  EXPECT_TRUE(k::isForcedSplit(forced, fits));
  EXPECT_EQ(forced.splits, int(k::ceilDiv(chunks, 4)));
  EXPECT_EQ(forced.sliceCols, 4 * chunkCols);
  EXPECT_LE(forced.sharedBytes, k::kRingMaxSharedBytes);
  EXPECT_FALSE(k::isForcedSplit(choose(1), fits));  // no shared row groups where the format allows none
  EXPECT_TRUE(same(choose(1), [&] { k::forceGemvSplit(nullptr); return choose(1); }()));
  for (const k::GemvSplitForce& never : {k::GemvSplitForce{chunks, 1, false},  // all of x at batch 8: too large
                                         k::GemvSplitForce{2, 4, false},       // a warp of the row group idle
                                         k::GemvSplitForce{4, 3, false}}) {    // not a power of two
    k::forceGemvSplit(&never);
    const k::GemvSplit s = choose(0);
    EXPECT_FALSE(k::isForcedSplit(s, never)) << never.chunksPerSplit << " chunks, " << never.groupWarps << " warps";
    EXPECT_TRUE(same(s, policy));
  }
  // The FFMA skeleton's split (chooseGemvSplit) takes a forced chunk count, never shared row groups.
  const k::GemvSplit ffma = k::chooseGemvSplit(6144, 32, 128, 1, 0, sms, k::kMaxStagedBytes);
  const k::GemvSplitForce eight{8, 1, false};
  k::forceGemvSplit(&eight);
  const k::GemvSplit ffmaForced = k::chooseGemvSplit(6144, 32, 128, 1, 0, sms, k::kMaxStagedBytes);
  EXPECT_TRUE(k::isForcedSplit(ffmaForced, eight));
  EXPECT_EQ(ffmaForced.splits, 4);
  const k::GemvSplitForce shared{8, 2, false};
  k::forceGemvSplit(&shared);
  EXPECT_TRUE(same(k::chooseGemvSplit(6144, 32, 128, 1, 0, sms, k::kMaxStagedBytes), ffma));
  k::forceGemvSplit(nullptr);
  EXPECT_TRUE(same(choose(0), policy));
}

// The ring kernel's work decomposition (ringWarpWork, which the kernel calls) over the grid of a chosen split:
// every (row group, chunk) is computed by exactly one warp, every row group has exactly one storing warp (part 0)
// a split, and the warps of a row group are consecutive in their block, in part order.
TEST(PackedGemvSplit, RingWarpsCoverEveryRowGroupAndChunkOnce) {
  namespace k = kernels;
  const int sms = 132;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336},
                            {100, 4160}, {333, 1056}, {32, 256}}) {
    for (int batch : {1, 2, 4, 8, 16}) {
      for (int maxGroupWarps : {1, 8}) {
        const int halves = k::quantRingHalves(4, k::ActivationType::Float16, batch);
        const int64_t chunks = k::quantChunks(cols, 4) * halves, chunkCols = k::quantChunkCols(4) / halves;
        const k::GemvSplit s = k::chooseRingSplit(
            rows, chunks, chunkCols, batch, 128 / halves, sms, k::kRingMaxSharedBytes, 2 * size_t(batch),
            2 * size_t(batch) * size_t(k::quantStagePadHalves(4)) + 16 +
                k::quantRingBytes(halves, k::quantRingStages(4, k::ActivationType::Float16, batch)),
            2 * halves,
            maxGroupWarps);
        int shift = 0;
        while ((1 << shift) < s.ringGroupWarps) ++shift;
        ASSERT_EQ(1 << shift, s.ringGroupWarps);
        const int64_t groups = k::rowGroups(rows);
        // The uniform blocks, and the row groups dealt out evenly where ringBalancedBlocks would
        // (PARETO_RING_BALANCED).
        std::vector<int64_t> layouts = {0};
        if (const int64_t n = k::ringBalancedBlocks(groups, s.ringGroupWarps, s.splits,
                                                    int64_t(k::kRingResidentBlocks) * sms);
            n > 0)
          layouts.push_back(n);
        for (const int64_t balanced : layouts) {
          const int64_t blocks = balanced > 0 ? balanced : k::ceilDiv(groups, k::kRingWarpsPerBlock / s.ringGroupWarps);
          std::vector<int> computed(size_t(groups * chunks), 0), storers(size_t(groups) * size_t(s.splits), 0);
          for (int split = 0; split < s.splits; ++split) {
            const int64_t chunk0 = split * s.chunksPerSplit;
            const int splitChunks = int(std::min(chunk0 + s.chunksPerSplit, chunks) - chunk0);
            for (int64_t block = 0; block < blocks; ++block)
              for (int warp = 0; warp < k::kRingWarpsPerBlock; ++warp) {
                const k::RingWarpWork w = k::ringWarpWork(block, warp, shift, splitChunks, groups, balanced);
                EXPECT_EQ(w.part, warp % s.ringGroupWarps);
                EXPECT_GE(w.count, 0);
                if (w.group >= groups) continue;  // an idle warp of the last block, or of a block holding fewer
                if (w.part == 0) ++storers[size_t(w.group * s.splits + split)];
                if (w.part > 0) {  // the previous part is the previous warp, on the same row group, just before
                  const k::RingWarpWork before = k::ringWarpWork(block, warp - 1, shift, splitChunks, groups, balanced);
                  EXPECT_EQ(before.group, w.group);
                  EXPECT_EQ(before.first + before.count, w.first);
                }
                for (int c = 0; c < w.count; ++c) ++computed[size_t(w.group * chunks + chunk0 + w.first + c)];
              }
          }
          const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + " batch " +
                                   std::to_string(batch) + ", " + std::to_string(s.ringGroupWarps) +
                                   " warps a group, " + std::to_string(balanced) + " balanced blocks";
          EXPECT_EQ(std::count(computed.begin(), computed.end(), 1), int64_t(computed.size())) << what;
          EXPECT_EQ(std::count(storers.begin(), storers.end(), 1), int64_t(storers.size())) << what;
        }
      }
    }
  }
}


// Row groups dealt out evenly (PARETO_RING_BALANCED): Llama-3.1-8B's gate+up at batch 1 (896 row groups, 2 warps a
// group: 224 uniform blocks of 4) takes a full wave of 264 blocks of 3 or 4; nothing changes where the uniform
// blocks hold one row group, fill at most one place a multiprocessor, fill 90% of the wave or more, or need more
// than a wave.
TEST(PackedGemvSplit, BalancedRingBlocksFillAWaveWithoutGrowingABlock) {
  namespace k = kernels;
  const int64_t wave = int64_t(k::kRingResidentBlocks) * 132;
  EXPECT_EQ(k::ringBalancedBlocks(896, 2, 1, wave), 264);
  EXPECT_EQ(k::ringBalancedBlocks(896, 1, 2, wave), 132);  // 2 splits of 112 blocks of 8: 132 of 6 or 7 a split
  EXPECT_EQ(k::ringBalancedBlocks(192, 8, 1, wave), 0);    // one row group a block
  EXPECT_EQ(k::ringBalancedBlocks(128, 2, 1, wave), 0);    // 32 blocks: one place a multiprocessor at most
  EXPECT_EQ(k::ringBalancedBlocks(896, 1, 4, wave), 0);    // 448 blocks: more than a wave
  EXPECT_EQ(k::ringBalancedBlocks(128, 2, 8, wave), 0);    // down at int4 batch 8: 256 of 264 places already
  EXPECT_EQ(k::ringBalancedBlocks(192, 2, 4, wave), 66);   // qkv at 2:4 batch 8: 192 blocks of 4, 264 of 2 or 3
  for (int64_t groups : {int64_t(97), int64_t(448), int64_t(896), int64_t(1000)})
    for (int gw : {1, 2, 4})
      for (int splits : {1, 2, 3}) {
        const int64_t n = k::ringBalancedBlocks(groups, gw, splits, wave);
        if (n == 0) continue;
        EXPECT_LE(n * splits, wave);
        EXPECT_LE(k::ceilDiv(groups, n), k::kRingWarpsPerBlock / gw) << groups << " groups, " << gw << " warps";
        EXPECT_GT(n, k::ceilDiv(groups, k::kRingWarpsPerBlock / gw));
      }
}

// gemv_kernels' `test` checks the balanced blocks on the GPU at 24576 × 1024 (bench/gemv_kernels.cu runTests), fp16,
// batches 1, 2, 3, 8 and 16 (its small run): on a 132-multiprocessor Hopper every ring format must take them there at
// one of those batches at least, or that check would test nothing.
TEST(PackedGemvSplit, TheBalancedTestShapeBalancesEveryRingFormat) {
  namespace k = kernels;
  if (k::kernelSwitch("PARETO_RING_BALANCED") == k::SwitchSetting::Off) GTEST_SKIP() << "PARETO_RING_BALANCED=0";
  const int64_t rows = 24576, cols = 1024;
  const int sms = 132;
  std::vector<std::string> unbalanced;
  const auto check = [&](const std::string& format, const std::function<k::GemvSplit(const k::GemvProblem&)>& split) {
    bool balanced = false;
    for (int batch : {1, 2, 3, 8, 16}) {
      k::GemvProblem p;
      p.rows = rows, p.cols = cols, p.batch = batch, p.type = k::ActivationType::Float16;
      balanced = balanced || split(p).ringBlocks > 0;
    }
    if (!balanced) unbalanced.push_back(format);
  };
  k::QuantGroupGemvWeight int4, int8;
  int4.bits = 4, int4.groupSize = 128, int4.scaleColumns = k::quantScaleColumns(cols, 128, 4);
  int8.bits = 8, int8.groupSize = cols, int8.scaleColumns = k::quantScaleColumns(cols, cols, 8);
  check("int4 g128", [&](const k::GemvProblem& p) { return k::quantGroupGemvSplit(p, int4, sms); });
  check("int8 per row", [&](const k::GemvProblem& p) { return k::quantGroupGemvSplit(p, int8, sms); });
  for (auto [n, m] : {std::pair{2, 4}, {16, 32}}) {
    k::BitmaskNMGemvWeight w;
    w.n = n, w.m = m;
    check("bitmask " + std::to_string(n) + ":" + std::to_string(m),
          [&](const k::GemvProblem& p) { return k::bitmaskNMGemvSplit(p, w, sms); });
  }
  k::BitmaskInt4GemvWeight both;
  both.n = 2, both.m = 4, both.symmetric = false, both.groupSize = cols / 2, both.scaleColumns = 1;
  check("2:4 + int4", [&](const k::GemvProblem& p) { return k::bitmaskInt4GemvSplit(p, both, sms); });
  k::SpqrGemvWeight spqr;
  spqr.bits = 3, spqr.scaleGroup = 16;
  check("spqr 3-bit", [&](const k::GemvProblem& p) { return k::spqrGemvSplit(p, spqr, sms); });
  EXPECT_TRUE(unbalanced.empty()) << "no balanced blocks at 24576 x 1024 for " << unbalanced.front();
}

// 2:4 runs on the tensor cores from batch 4 (bitmask_nm_gemv.cu: BitmaskMmaFormat), the other patterns of 16 kept
// values a word from kBitmaskScatterMinBatch (BitmaskScatterMmaFormat), everything else on the FFMA path; the ring
// split keeps the staged x (16-bit rows padded by kBitmaskSparseStagePadHalves for 2:4, kBitmaskStagePadHalves for
// the scatter path), the scatter path's tiles and the warps' rings within the ring kernels' budget, the FFMA split
// the fp32 rows within its own.
TEST(PackedGemvSplit, BitmaskSharedMemoryFollowsTheArithmeticPath) {
  namespace k = kernels;
  for (int b : {1, 2, 4, 8, 16}) {
    EXPECT_EQ(k::bitmaskUsesTensorCores(2, 4, b), b >= 4);  // FFMA faster at 1-2 (NOTES v6d)
    EXPECT_EQ(k::bitmaskUsesTensorCores(16, 32, b), b >= k::kBitmaskScatterMinBatch);
    EXPECT_EQ(k::bitmaskUsesTensorCores(4, 8, b), b >= k::kBitmaskScatterMinBatch);
    EXPECT_FALSE(k::bitmaskUsesTensorCores(1, 4, b));  // 8 or 24 kept values a word: FFMA only
    EXPECT_FALSE(k::bitmaskUsesTensorCores(3, 4, b));
  }
  const int sms = 132;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}}) {
    for (auto [n, m] : {std::pair{2, 4}, {16, 32}}) {
      for (int batch : {1, 2, 3, 4, 8, 11, 16}) {
        k::GemvProblem p;
        p.rows = rows, p.cols = cols, p.batch = batch;
        k::BitmaskNMGemvWeight w;
        w.n = n, w.m = m;
        const k::GemvSplit s = k::bitmaskNMGemvSplit(p, w, sms);
        const int compiled = k::compiledBatch(batch);
        const bool mma = k::bitmaskUsesTensorCores(n, m, compiled);
        const int64_t chunkCols = mma ? k::kBitmaskMmaChunkCols : k::kBitmaskChunkCols;
        const int64_t chunks = k::ceilDiv(cols, chunkCols);
        const bool scatter = mma && n != 2;
        const int64_t pad = scatter ? k::kBitmaskStagePadHalves : k::kBitmaskSparseStagePadHalves;
        const size_t staged =
            mma ? 2 * size_t(compiled) * size_t(s.sliceCols + pad) + 16 + k::kBitmaskRingBytes +
                      (scatter ? k::kBitmaskScatterTilesBytes : 0)
                : sizeof(float) * size_t(compiled) * size_t(s.sliceCols);
        const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + " " + std::to_string(n) + ":" +
                                 std::to_string(m) + " batch " + std::to_string(batch);
        EXPECT_EQ(s.sharedBytes, staged) << what;
        EXPECT_LE(s.sharedBytes, mma ? k::kRingMaxSharedBytes : k::kMaxStagedBytes) << what;
        EXPECT_GE(int64_t(s.splits) * s.chunksPerSplit, chunks) << what;
        EXPECT_LT(int64_t(s.splits - 1) * s.chunksPerSplit, chunks) << what;  // no empty split
        EXPECT_EQ(s.sliceCols, s.chunksPerSplit * chunkCols) << what;
        if (mma) {
          const int64_t least = scatter ? 2 : k::kBitmaskRingMinChunksPerWarp;
          EXPECT_GE(s.chunksPerSplit, std::min<int64_t>(least, chunks)) << what;
        }
      }
    }
  }
}

// 2:4 + int4 runs on the tensor cores at every batch when its groups hold a multiple of 32 kept values or whole
// rows (bitmask_int4_gemv.cu: BitmaskInt4MmaFormat), other patterns and groups of 16 on the FFMA path; the ring
// split keeps the staged x (16-bit rows padded by kBitmaskInt4StagePadHalves) and the warps' rings within the
// ring kernels' budget, the FFMA split the fp32 rows within its own.
TEST(PackedGemvSplit, BitmaskInt4SharedMemoryFollowsTheArithmeticPath) {
  namespace k = kernels;
  EXPECT_TRUE(k::bitmaskInt4UsesTensorCores(2, 4, 128, 4096));
  EXPECT_TRUE(k::bitmaskInt4UsesTensorCores(2, 4, 32, 4096));
  EXPECT_TRUE(k::bitmaskInt4UsesTensorCores(2, 4, 2080, 4160));  // whole rows
  EXPECT_FALSE(k::bitmaskInt4UsesTensorCores(2, 4, 16, 4096));
  EXPECT_FALSE(k::bitmaskInt4UsesTensorCores(16, 32, 128, 4096));
  EXPECT_FALSE(k::bitmaskInt4UsesTensorCores(4, 8, 128, 4096));
  const int sms = 132;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}}) {
    for (auto [n, m] : {std::pair{2, 4}, {16, 32}}) {
      for (int64_t group : {int64_t(16), int64_t(128)}) {
        for (int batch : {1, 2, 3, 4, 8, 11, 16}) {
          k::GemvProblem p;
          p.rows = rows, p.cols = cols, p.batch = batch;
          k::BitmaskInt4GemvWeight w;
          w.n = n, w.m = m, w.groupSize = group;
          const k::GemvSplit s = k::bitmaskInt4GemvSplit(p, w, sms);
          const bool mma = k::bitmaskInt4UsesTensorCores(n, m, group, cols);
          // The tensor-core kernel's least compiled batch is 2 (batch 1 stages a second row of zeros).
          const int compiled = mma ? std::max(2, k::compiledBatch(batch)) : k::compiledBatch(batch);
          const int64_t chunkCols = mma ? k::kBitmaskInt4MmaChunkCols : 256;
          const int64_t chunks = k::ceilDiv(cols, chunkCols);
          const size_t staged = mma ? 2 * size_t(compiled) * size_t(s.sliceCols + k::kBitmaskInt4StagePadHalves) + 16 +
                                          k::kBitmaskInt4RingBytes
                                    : sizeof(float) * size_t(compiled) * size_t(s.sliceCols);
          const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + " " + std::to_string(n) + ":" +
                                   std::to_string(m) + " g" + std::to_string(group) + " batch " + std::to_string(batch);
          EXPECT_EQ(mma, n == 2 && group == 128) << what;
          EXPECT_EQ(s.sharedBytes, staged) << what;
          EXPECT_LE(s.sharedBytes, mma ? k::kRingMaxSharedBytes : k::kMaxStagedBytes) << what;
          EXPECT_GE(int64_t(s.splits) * s.chunksPerSplit, chunks) << what;
          EXPECT_LT(int64_t(s.splits - 1) * s.chunksPerSplit, chunks) << what;  // no empty split
          EXPECT_EQ(s.sliceCols, s.chunksPerSplit * chunkCols) << what;
        }
      }
    }
  }
}

// The 2:4 + int4 tensor-core kernel reads its masks as sparse-MMA metadata computed at load time
// (kernels/BitmaskInt4Gemv.h). Read back through the fragment layout the kernel hands mma.sp (lane 4g + t, t = 0
// or 1, slots 4t .. 4t + 3 of rows g and g + 8 of its m-tile; k-block kb's slot s is the piece's group
// 4 (s mod 4) + 2kb + s / 4), the words name every (row, group) of every half chunk once, with the two kept
// columns of each 2:4 group, and (2, 1) / (0, 3) for the padding's 0000 / 1111.
TEST(BitmaskInt4Metadata, ReadBackThroughTheSparseFragmentsItIsTheMasks) {
  namespace k = kernels;
  std::mt19937_64 rng(freshSeed());
  const int64_t groups = 3, chunks = 2;
  std::vector<uint32_t> masks(size_t(groups * chunks * 32 * 8));
  const uint32_t twoOfFour[6] = {0x3, 0x5, 0x6, 0x9, 0xA, 0xC};
  for (size_t i = 0; i < masks.size(); ++i) {
    uint32_t word = 0;
    for (int nibble = 0; nibble < 8; ++nibble) word |= twoOfFour[rng() % 6] << (4 * nibble);
    masks[i] = word;
  }
  masks[5] = 0x0000FFFFu;  // padding columns (relayoutMasks' fill), then nothing kept
  masks[7] = 0;
  std::vector<uint32_t> metadata(masks.size(), 0xDEADBEEFu);
  k::bitmaskInt4MmaMetadata(masks.data(), groups, chunks, metadata.data());

  std::vector<int> seen(masks.size() * 8, 0);  // (row group, chunk, row, word, nibble)
  for (int64_t gc = 0; gc < groups * chunks; ++gc)
    for (int half = 0; half < 2; ++half)
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        if (t >= 2) continue;  // selector 0: lanes t = 0, 1 of each quad hold the metadata
        for (int piece = 0; piece < 2; ++piece)
          for (int kb = 0; kb < 2; ++kb)
            for (int m = 0; m < 2; ++m) {
              const uint32_t word = metadata[size_t(gc * 256 + half * 128 + ((g * 2 + t) * 2 + piece) * 4 + kb * 2 + m)];
              for (int hi = 0; hi < 2; ++hi)
                for (int i = 0; i < 4; ++i) {
                  const int slot = 4 * t + i, group = 4 * (slot % 4) + 2 * kb + slot / 4;  // of the piece's 16
                  const int row = 16 * m + 8 * hi + g;
                  const int maskWord = 4 * half + 2 * piece + group / 8, nibble = group % 8;
                  const size_t at = size_t((gc * 32 + row) * 8 + maskWord);
                  const uint32_t bits = (masks[at] >> (4 * nibble)) & 0xF;
                  const uint32_t e = (word >> (16 * hi + 4 * i)) & 0xF, low = e & 3, high = e >> 2;
                  const uint32_t expected = bits == 0 ? (2u | 1u << 2) : bits == 0xF ? (0u | 3u << 2) : 0xFFu;
                  const std::string what = "row group/chunk " + std::to_string(gc) + " row " + std::to_string(row) +
                                           " word " + std::to_string(maskWord) + " nibble " + std::to_string(nibble);
                  if (expected != 0xFFu) {
                    EXPECT_EQ(e, expected) << what;
                  } else {
                    EXPECT_LT(low, high) << what;
                    EXPECT_EQ((1u << low) | (1u << high), bits) << what;
                  }
                  ++seen[at * 8 + nibble];
                }
            }
      }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }))
      << "every (row, group) is named by exactly one metadata slot";
}

// The SpQR code layout (kernels/SpqrGemv.h) is a permutation of a lane's 128·bits code bits, and where a pair's
// codes share a word they sit 16 bits apart with their bits in order: what lets the tensor-core path build a pair
// with one shift and one LOP3. fromParts packs by it and the float64 reference reads by it; the kernels' tests
// (KernelHarness) hold the kernels to the definition through both.
TEST(SpqrLayout, EveryCodeBitHasOnePlaceAndAPairSharesAWord) {
  namespace k = kernels;
  for (int bits : {2, 3, 4}) {
    std::vector<int> seen(size_t(k::kSpqrChunkCols * bits), 0);
    int together = 0;
    for (int column = 0; column < k::kSpqrChunkCols; ++column) {
      for (int bit = 0; bit < bits; ++bit) {
        const int at = k::spqrCodeBit(bits, column, bit);
        ASSERT_GE(at, 0);
        ASSERT_LT(at, k::kSpqrChunkCols * bits) << bits << "-bit column " << column << " bit " << bit;
        ++seen[size_t(at)];
      }
      if (column % 2 == 1) continue;
      const int low = k::spqrCodeBit(bits, column, 0), high = k::spqrCodeBit(bits, column + 1, 0);
      if (high != low + 16) continue;
      bool contiguous = low % 32 + bits <= 16;
      for (int bit = 1; bit < bits; ++bit)
        contiguous = contiguous && k::spqrCodeBit(bits, column, bit) == low + bit &&
                     k::spqrCodeBit(bits, column + 1, bit) == high + bit;
      together += contiguous ? 1 : 0;
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; })) << bits << "-bit";
    EXPECT_EQ(together, bits == 3 ? 60 : 64) << bits << "-bit pairs in one word, 16 bits apart";
  }
  // Pair 60 at 3 bits: its code bits 0, 1, 2 in the spare bits 15 (column 120) and 31 (121) of words 0, 1, 2.
  EXPECT_EQ(k::spqrCodeBit(3, 120, 0), 15);
  EXPECT_EQ(k::spqrCodeBit(3, 121, 2), 2 * 32 + 31);
  EXPECT_EQ(k::spqrCodeBit(3, 127, 1), (3 * 3 + 1) * 32 + 31);
}

// SpQR runs on the tensor cores from kSpqrMmaMinBatch for second-level groups of at least kSpqrMmaMinScaleGroup
// rows (spqr_gemv.cu: SpqrMmaFormat), else on the FFMA path; the ring split keeps the staged x (16-bit rows padded
// by kSpqrStagePadHalves), the warps' tiles and rings within the ring kernels' budget, the FFMA split the fp32
// rows and group sums within its own.
TEST(PackedGemvSplit, SpqrSharedMemoryFollowsTheArithmeticPath) {
  namespace k = kernels;
  for (int b : {1, 2, 4, 8, 16}) {
    EXPECT_EQ(k::spqrUsesTensorCores(16, b), b >= k::kSpqrMmaMinBatch);
    EXPECT_EQ(k::spqrUsesTensorCores(8, b), b >= k::kSpqrMmaMinBatch);
    EXPECT_FALSE(k::spqrUsesTensorCores(4, b));  // its grids would not fit the slot
  }
  const int sms = 132;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}}) {
    for (int bits : {2, 3, 4}) {
      for (int scaleGroup : {4, 16}) {
        for (int batch : {1, 2, 3, 4, 8, 11, 16}) {
          k::GemvProblem p;
          p.rows = rows, p.cols = cols, p.batch = batch;
          k::SpqrGemvWeight w;
          w.bits = bits, w.scaleGroup = scaleGroup;
          const k::GemvSplit s = k::spqrGemvSplit(p, w, sms);
          const int compiled = k::compiledBatch(batch);
          const bool mma = k::spqrUsesTensorCores(scaleGroup, compiled);
          const int64_t chunks = k::spqrChunks(cols);
          const size_t staged =
              mma ? 2 * size_t(compiled) * size_t(s.sliceCols + k::kSpqrStagePadHalves) + k::kSpqrTilesBytes + 16 +
                        k::spqrRingBytes(bits)
                  : sizeof(float) * size_t(compiled) * size_t(s.sliceCols + s.sliceCols / k::kSpqrGroupCols);
          const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + " " + std::to_string(bits) +
                                   "-bit sg" + std::to_string(scaleGroup) + " batch " + std::to_string(batch);
          EXPECT_EQ(s.sharedBytes, staged) << what;
          EXPECT_LE(s.sharedBytes, mma ? k::kRingMaxSharedBytes : k::kMaxStagedBytes) << what;
          EXPECT_GE(int64_t(s.splits) * s.chunksPerSplit, chunks) << what;
          EXPECT_LT(int64_t(s.splits - 1) * s.chunksPerSplit, chunks) << what;  // no empty split
          EXPECT_EQ(s.sliceCols, s.chunksPerSplit * k::kSpqrChunkCols) << what;
        }
      }
    }
  }
}

}  // namespace
}  // namespace pareto
