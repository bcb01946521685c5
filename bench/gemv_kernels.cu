// gemv_kernels: a kernels-only test and benchmark of the packed-weight GEMV kernels (kernels/, their float64
// references, the CUDA runtime and cuBLAS; no LibTorch), so that a kernel change can be built and measured on
// the GPU machine in about a minute. `pareto-cli bench kernels` (core/runtime/KernelBenchmark.cpp) stays the
// record; this binary uses the same shapes and the same timing method.
//
//   gemv_kernels test [--small]
//     every kernel against its float64 reference on fresh random weights written directly in the kernel layout
//     (the layout the references read; tests/core/test_packed_gemv.cpp checks the load-time re-layout and the
//     references against the stored formats), outputs poisoned with NaN, every batch 1-16, fp16 and bf16, shapes
//     that are not multiples of the tiles, every compiled N:M density and group size; then the decode step's folds
//     (RMSNorm + residual add, SiLU·mul) in the kernels that take them, and their refusal by the others. --small:
//     the three small shapes (for compute-sanitizer). Exit status 1 on any failure.
//   gemv_kernels bench [--batch 1,2,4,8,16] [--runs 50] [--formats dense,int4-g128,...] [--json FILE]
//     Llama-3.1-8B linears, 32 layers × {qkv 6144×4096, o 4096×4096, gate+up 28672×4096, down 4096×14336}, every
//     weight distinct (nothing served from L2), one step of 128 GEMVs captured in a CUDA graph, median of `runs`
//     replays after 5 warm-ups; cuBLAS fp16 (cublasGemmEx, fp32 accumulation) in the same run, and each shape alone
//     (its 32 GEMVs in their own graph) as µs a GEMV. `floor:FORMAT` (e.g. floor:int4-g128, floor:dense): a kernel
//     that only streams that format's bytes (floorKernel below), timed the same way.
//   gemv_kernels timeline [--batch 1] [--formats int4-g128,...] [--csv FILE]
//     (a build with GEMV_TIMELINE=1 only: kernels/GemvTimeline.cuh) one replay of the same step with every block's
//     start, release (griddepcontrol.wait), staged x and end stamped; per shape, the medians over the 32 layers of:
//     the gap from the previous GEMV's last block to this one's first release, the release spread, the staging,
//     the span from first release to last end, the tail (last end − median end) and the bytes / span.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "BitmaskInt4Gemv.h"
#include "BitmaskNMGemv.h"
#include "GemvProblem.h"
#include "KernelSwitches.h"
#include "ProgrammaticLaunch.cuh"
#include "QuantGroupGemv.h"
#include "SpqrGemv.h"
#include "reference/GemvReference.h"

namespace k = pareto::kernels;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}
void check(const std::string& error, const char* what) {
  if (!error.empty()) {
    std::fprintf(stderr, "%s: %s\n", what, error.c_str());
    std::exit(2);
  }
}

uint16_t halfBits(float f) {
  const __half h = __float2half_rn(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
uint16_t bf16Bits(float f) {
  const __nv_bfloat16 h = __float2bfloat16_rn(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
uint16_t bits16(k::ActivationType t, float f) { return t == k::ActivationType::Float16 ? halfBits(f) : bf16Bits(f); }

// A device copy of a host vector, freed with the object.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) { check(cudaMalloc(&ptr, std::max<size_t>(n, 16)), "cudaMalloc"); }
  template <class V> explicit DeviceBuffer(const std::vector<V>& host) : DeviceBuffer(host.size() * sizeof(V)) {
    check(cudaMemcpy(ptr, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { if (ptr) cudaFree(ptr); }
  template <class T> T* as() const { return static_cast<T*>(ptr); }
};

int multiprocessors() {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  return sms;
}

// ---- a kernel-layout weight of each format, host and device ------------------------------------------------

// One GEMV weight: `run` launches its kernel on a problem; `reference` computes the float64 result (host
// problem); `bytes` is what a launch reads of the weight.
struct Linear {
  int64_t rows = 0, cols = 0;
  size_t bytes = 0;
  std::vector<std::shared_ptr<DeviceBuffer>> device;
  std::function<std::string(const k::GemvProblem&, float*, int*, cudaStream_t)> run;  // device pointers
  std::function<k::GemvSplit(const k::GemvProblem&)> split;
  std::function<std::vector<double>(const k::GemvProblem&)> reference;                 // host pointers
};

template <class V> std::shared_ptr<DeviceBuffer> upload(const std::vector<V>& v) { return std::make_shared<DeviceBuffer>(v); }

// The 2:4 + int4 tensor-core kernel's metadata of masks in the kernel layout (k::bitmaskInt4MmaMetadata), on the
// device, as the runtime computes it at load time.
std::shared_ptr<DeviceBuffer> int4MaskMetadata(const std::vector<uint32_t>& masks, int64_t groups, int64_t chunks) {
  std::vector<uint32_t> metadata(masks.size());
  k::bitmaskInt4MmaMetadata(masks.data(), groups, chunks, metadata.data());
  return upload(metadata);
}

std::vector<uint8_t> randomBytes(size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}
std::vector<uint16_t> randomValues(size_t n, k::ActivationType t, float scale, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.f, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = bits16(t, normal(rng));
  return v;
}
// Mask words of an N:M pattern: exactly n set bits in every group of m bits (so 32·n/m in every word).
std::vector<uint32_t> randomMasks(size_t words, int n, int m, std::mt19937_64& rng) {
  std::vector<uint32_t> v(words);
  int index[32];
  for (auto& word : v) {
    word = 0;
    for (int base = 0; base < 32; base += m) {
      for (int i = 0; i < m; ++i) index[i] = i;
      for (int i = 0; i < n; ++i) {
        const int j = i + int(rng() % uint64_t(m - i));
        std::swap(index[i], index[j]);
        word |= 1u << (base + index[i]);
      }
    }
  }
  return v;
}

Linear bitmaskLinear(int64_t rows, int64_t cols, int n, int m, k::ActivationType t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int kept = k::bitmaskKeptPerWord(n, m);
  const int64_t g = k::rowGroups(rows), c = k::bitmaskChunks(cols);
  auto masks = std::make_shared<std::vector<uint32_t>>(randomMasks(size_t(g * c * 32 * 8), n, m, rng));
  auto values = std::make_shared<std::vector<uint16_t>>(randomValues(size_t(g * c * kept * 32 * 8), t, 0.05f, rng));
  Linear l;
  l.rows = rows, l.cols = cols;
  auto dm = upload(*masks), dv = upload(*values);
  l.device = {dm, dv};
  l.bytes = dm->bytes + dv->bytes;
  k::BitmaskNMGemvWeight dw{dm->as<uint32_t>(), dv->ptr, n, m};
  l.run = [dw](const k::GemvProblem& p, float* partials, int* counters, cudaStream_t s) {
    return k::runBitmaskNMGemv(p, dw, k::bitmaskNMGemvSplit(p, dw, multiprocessors()), partials, counters, s);
  };
  l.split = [dw](const k::GemvProblem& p) { return k::bitmaskNMGemvSplit(p, dw, multiprocessors()); };
  l.reference = [masks, values, n, m](const k::GemvProblem& p) {
    return k::bitmaskNMGemvReference(p, {masks->data(), values->data(), n, m});
  };
  return l;
}

Linear quantLinear(int64_t rows, int64_t cols, int bits, bool symmetric, int64_t groupSize, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t g = k::rowGroups(rows), c = k::quantChunks(cols, bits);
  const int64_t columns = k::quantScaleColumns(cols, groupSize, bits);
  auto codes = std::make_shared<std::vector<uint8_t>>(randomBytes(size_t(g * c * 8 * 32 * 16), rng));
  const float scale = (bits == 4 ? 0.3f : 0.02f) / std::sqrt(float(cols)) * 4.f;
  auto scales = std::make_shared<std::vector<uint16_t>>(randomValues(size_t(g * columns * 32), k::ActivationType::Float16, scale, rng));
  auto zeros = std::make_shared<std::vector<uint8_t>>(randomBytes(size_t(g * columns * 32), rng));
  if (bits == 4)
    for (auto& z : *zeros) z &= 0xF;
  Linear l;
  l.rows = rows, l.cols = cols;
  auto dc = upload(*codes), ds = upload(*scales), dz = upload(*zeros);
  l.device = {dc, ds, dz};
  l.bytes = dc->bytes + ds->bytes + (symmetric ? 0 : dz->bytes);
  k::QuantGroupGemvWeight dw{dc->ptr, ds->as<uint16_t>(), symmetric ? nullptr : dz->as<uint8_t>(), bits, symmetric,
                             groupSize, columns};
  l.run = [dw](const k::GemvProblem& p, float* partials, int* counters, cudaStream_t s) {
    return k::runQuantGroupGemv(p, dw, k::quantGroupGemvSplit(p, dw, multiprocessors()), partials, counters, s);
  };
  l.split = [dw](const k::GemvProblem& p) { return k::quantGroupGemvSplit(p, dw, multiprocessors()); };
  l.reference = [codes, scales, zeros, bits, symmetric, groupSize, columns](const k::GemvProblem& p) {
    return k::quantGroupGemvReference(p, {codes->data(), scales->data(), symmetric ? nullptr : zeros->data(), bits,
                                          symmetric, groupSize, columns});
  };
  return l;
}

Linear bitmaskInt4Linear(int64_t rows, int64_t cols, int n, int m, bool symmetric, int64_t groupSize, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t g = k::rowGroups(rows), c = k::ceilDiv(cols, 256);
  const int64_t columns = k::bitmaskInt4ScaleColumns(cols, groupSize);
  auto masks = std::make_shared<std::vector<uint32_t>>(randomMasks(size_t(g * c * 32 * 8), n, m, rng));
  auto codes = std::make_shared<std::vector<uint8_t>>(randomBytes(size_t(g * c * 4 * 32 * 16), rng));
  auto scales = std::make_shared<std::vector<uint16_t>>(
      randomValues(size_t(g * columns * 32), k::ActivationType::Float16, 1.2f / std::sqrt(float(cols)), rng));
  auto zeros = std::make_shared<std::vector<uint8_t>>(randomBytes(size_t(g * columns * 32), rng));
  for (auto& z : *zeros) z &= 0xF;
  Linear l;
  l.rows = rows, l.cols = cols;
  auto dm = upload(*masks), dc = upload(*codes), ds = upload(*scales), dz = upload(*zeros);
  auto dmeta = int4MaskMetadata(*masks, g, c);
  l.device = {dm, dmeta, dc, ds, dz};
  l.bytes = dm->bytes + dc->bytes + ds->bytes + (symmetric ? 0 : dz->bytes);
  k::BitmaskInt4GemvWeight dw{dm->as<uint32_t>(), dc->ptr, ds->as<uint16_t>(), symmetric ? nullptr : dz->as<uint8_t>(),
                              symmetric, groupSize, columns, n, m, dmeta->as<uint32_t>()};
  l.run = [dw](const k::GemvProblem& p, float* partials, int* counters, cudaStream_t s) {
    return k::runBitmaskInt4Gemv(p, dw, k::bitmaskInt4GemvSplit(p, dw, multiprocessors()), partials, counters, s);
  };
  l.split = [dw](const k::GemvProblem& p) { return k::bitmaskInt4GemvSplit(p, dw, multiprocessors()); };
  l.reference = [masks, codes, scales, zeros, symmetric, groupSize, columns, n, m](const k::GemvProblem& p) {
    return k::bitmaskInt4GemvReference(p, {masks->data(), codes->data(), scales->data(),
                                           symmetric ? nullptr : zeros->data(), symmetric, groupSize, columns, n, m});
  };
  return l;
}

Linear spqrLinear(int64_t rows, int64_t cols, int bits, int scaleGroup, double outlierFraction, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t g = k::rowGroups(rows), c = k::spqrChunks(cols);
  auto codes = std::make_shared<std::vector<uint8_t>>(randomBytes(size_t(g * c * bits * 32 * 16), rng));
  auto stats = std::make_shared<std::vector<uint8_t>>(randomBytes(size_t(g * c * 32 * 8), rng));
  const int perGroup = 32 / scaleGroup;
  auto second = std::make_shared<std::vector<uint16_t>>(size_t(g * c * 8 * perGroup * 2));
  std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
  const float base = 0.6f / std::sqrt(float(cols)) / float(1 << bits);
  for (size_t i = 0; i < second->size(); ++i) (*second)[i] = halfBits(base * uniform(rng) * (i % 2 ? 0.1f : 1.f));
  auto offsets = std::make_shared<std::vector<int32_t>>(size_t(32 * g + 1));
  auto columns = std::make_shared<std::vector<uint16_t>>();
  auto values = std::make_shared<std::vector<uint16_t>>();
  std::normal_distribution<float> normal(0.f, 0.1f);
  for (int64_t r = 0; r < 32 * g; ++r) {
    (*offsets)[size_t(r)] = int32_t(columns->size());
    if (r >= rows) continue;
    for (int64_t col = 0; col < cols; ++col)
      if (std::uniform_real_distribution<double>(0, 1)(rng) < outlierFraction) {
        columns->push_back(uint16_t(col));
        values->push_back(halfBits(normal(rng)));
      }
  }
  (*offsets)[size_t(32 * g)] = int32_t(columns->size());
  Linear l;
  l.rows = rows, l.cols = cols;
  auto dc = upload(*codes), dst = upload(*stats), dse = upload(*second), doff = upload(*offsets),
       dcol = upload(*columns), dval = upload(*values);
  l.device = {dc, dst, dse, doff, dcol, dval};
  l.bytes = dc->bytes + dst->bytes + dse->bytes + doff->bytes + dcol->bytes + dval->bytes;
  k::SpqrGemvWeight dw{dc->ptr, dst->as<uint8_t>(), dse->as<uint16_t>(), doff->as<int32_t>(), dcol->as<uint16_t>(),
                       dval->as<uint16_t>(), bits, scaleGroup};
  l.run = [dw](const k::GemvProblem& p, float* partials, int* counters, cudaStream_t s) {
    return k::runSpqrGemv(p, dw, k::spqrGemvSplit(p, dw, multiprocessors()), partials, counters, s);
  };
  l.split = [dw](const k::GemvProblem& p) { return k::spqrGemvSplit(p, dw, multiprocessors()); };
  l.reference = [codes, stats, second, offsets, columns, values, bits, scaleGroup](const k::GemvProblem& p) {
    return k::spqrGemvReference(p, {codes->data(), stats->data(), second->data(), offsets->data(), columns->data(),
                                    values->data(), bits, scaleGroup});
  };
  return l;
}

// ---- test --------------------------------------------------------------------------------------------------

double toDouble(k::ActivationType t, uint16_t b) {
  uint32_t bits = t == k::ActivationType::Float16 ? 0 : uint32_t(b) << 16;
  if (t == k::ActivationType::Float16) {
    __half h;
    std::memcpy(&h, &b, 2);
    return double(__half2float(h));
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct TestCounts {
  int cases = 0, failures = 0;
  double worst = 0;
};

// Every batch 1..16, or in a --small run (compute-sanitizer) batches 1, 2, 3, 8 and 16.
std::vector<int> gTestBatches;

// Runs `l` at each test batch for one activation type against the reference.
void checkLinear(const Linear& l, k::ActivationType t, const std::string& label, TestCounts& counts) {
  const int maxBatch = k::kMaxBatch;
  const auto tested = [](int batch) { return std::find(gTestBatches.begin(), gTestBatches.end(), batch) != gTestBatches.end(); };
  std::mt19937_64 rng(std::random_device{}());
  std::vector<std::vector<uint16_t>> xs(maxBatch + 1), ys(maxBatch + 1);
  std::vector<k::GemvProblem> hostProblems(maxBatch + 1);
  for (int batch = 1; batch <= maxBatch; ++batch) {
    if (!tested(batch)) continue;
    xs[batch] = randomValues(size_t(batch * l.cols), t, 1.f, rng);
    DeviceBuffer x(xs[batch]);
    std::vector<uint16_t> poison(size_t(batch * l.rows), 0x7FFF);  // NaN in fp16 and bf16
    DeviceBuffer y(poison);
    k::GemvProblem p{l.rows, l.cols, batch, t, x.ptr, y.ptr};
    const k::GemvSplit s = l.split(p);
    DeviceBuffer partials(std::max<size_t>(1, k::gemvPartialFloats(p, s)) * sizeof(float));
    DeviceBuffer counters(size_t(k::rowGroups(l.rows)) * sizeof(int));
    check(cudaMemset(counters.ptr, 0, counters.bytes), "cudaMemset");
    check(l.run(p, partials.as<float>(), counters.as<int>(), nullptr), label.c_str());
    // Twice: the counters must be back at zero after the first launch (graph replays depend on it).
    check(l.run(p, partials.as<float>(), counters.as<int>(), nullptr), label.c_str());
    check(cudaDeviceSynchronize(), (label + " (run)").c_str());
    ys[batch].resize(size_t(batch * l.rows));
    check(cudaMemcpy(ys[batch].data(), y.ptr, y.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    hostProblems[batch] = {l.rows, l.cols, batch, t, xs[batch].data(), ys[batch].data()};  // y: checked, not written
  }
  std::vector<std::future<std::vector<double>>> refs(maxBatch + 1);
  for (int batch = 1; batch <= maxBatch; ++batch)
    if (tested(batch)) refs[batch] = std::async(std::launch::async, [&, batch] { return l.reference(hostProblems[batch]); });
  const double tolerance = t == k::ActivationType::BFloat16 ? 2e-3 + std::ldexp(1.0, -9) : 2e-3;
  std::string failed;
  double worst = 0;
  for (int batch = 1; batch <= maxBatch; ++batch) {
    if (!tested(batch)) continue;
    const std::vector<double> ref = refs[batch].get();
    double err = 0, norm = 0;
    bool nan = false;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double o = toDouble(t, ys[batch][i]);
      if (std::isnan(o)) nan = true;
      err += (o - ref[i]) * (o - ref[i]);
      norm += ref[i] * ref[i];
    }
    const double rel = std::sqrt(err / norm);
    worst = std::max(worst, rel);
    ++counts.cases;
    if (nan || !(rel < tolerance)) {
      ++counts.failures;
      failed += " b" + std::to_string(batch) + (nan ? "(unwritten)" : "") + "=" + std::to_string(rel);
    }
  }
  counts.worst = std::max(counts.worst, worst);
  std::printf("%-4s %-44s %s worst %.2e%s\n", failed.empty() ? "ok" : "FAIL", label.c_str(),
              t == k::ActivationType::Float16 ? "fp16" : "bf16", worst, failed.c_str());
  std::fflush(stdout);
}

// The decode step's ops folded into a GEMV (GemvProblem's input and accumulate): x is built on the host with the
// ops' roundings (DecodeArithmetic.cuh: the normalised value rounded, then times the weight; silu rounded, then
// times up) and the float64 reference of the plain product is taken on it; with accumulate, y starts as a random
// residual and must end as residual + product (written twice from the same residual: the counters must be back at
// zero). A format whose kernels take no folds (`takesFolds` false) must refuse the problem.
enum class Fold { NormAdd, SiluMul };

float roundTo(k::ActivationType t, float v) { return float(toDouble(t, bits16(t, v))); }

void checkFolded(const Linear& l, k::ActivationType t, Fold fold, bool takesFolds, const std::string& label,
                 TestCounts& counts) {
  std::mt19937_64 rng(std::random_device{}());
  const double tolerance = t == k::ActivationType::BFloat16 ? 2e-3 + std::ldexp(1.0, -9) : 2e-3;
  const float eps = 1e-5f;
  std::string failed;
  double worst = 0;
  for (int batch : gTestBatches) {
    const int64_t inCols = fold == Fold::SiluMul ? 2 * l.cols : l.cols;
    const std::vector<uint16_t> in = randomValues(size_t(batch * inCols), t, 1.f, rng);
    const std::vector<uint16_t> normWeight = randomValues(size_t(l.cols), t, 1.f, rng);
    const std::vector<uint16_t> start = fold == Fold::NormAdd ? randomValues(size_t(batch * l.rows), t, 0.5f, rng)
                                                              : std::vector<uint16_t>(size_t(batch * l.rows), 0x7FFF);
    std::vector<uint16_t> x(size_t(batch * l.cols));
    for (int b = 0; b < batch; ++b) {
      const uint16_t* row = in.data() + b * inCols;
      if (fold == Fold::NormAdd) {
        double squares = 0;
        for (int64_t c = 0; c < l.cols; ++c) squares += toDouble(t, row[c]) * toDouble(t, row[c]);
        const float inv = float(1.0 / std::sqrt(squares / double(l.cols) + eps));
        for (int64_t c = 0; c < l.cols; ++c)
          x[size_t(b * l.cols + c)] =
              bits16(t, roundTo(t, float(toDouble(t, row[c])) * inv) * float(toDouble(t, normWeight[size_t(c)])));
      } else {
        for (int64_t c = 0; c < l.cols; ++c) {
          const float gate = float(toDouble(t, row[c])), up = float(toDouble(t, row[l.cols + c]));
          x[size_t(b * l.cols + c)] = bits16(t, roundTo(t, gate / (1.f + std::exp(-gate))) * up);
        }
      }
    }
    DeviceBuffer din(in), dweight(normWeight), y(start);
    k::GemvProblem p{l.rows, l.cols, batch, t, din.ptr, y.ptr};
    p.input = fold == Fold::NormAdd ? k::GemvInput::RmsNorm : k::GemvInput::SiluMul;
    p.normWeight = fold == Fold::NormAdd ? dweight.ptr : nullptr;
    p.eps = eps;
    p.accumulate = fold == Fold::NormAdd;
    const k::GemvSplit s = l.split(p);
    DeviceBuffer partials(std::max<size_t>(1, k::gemvPartialFloats(p, s)) * sizeof(float));
    DeviceBuffer counters(size_t(k::rowGroups(l.rows)) * sizeof(int));
    check(cudaMemset(counters.ptr, 0, counters.bytes), "cudaMemset");
    const std::string error = l.run(p, partials.as<float>(), counters.as<int>(), nullptr);
    ++counts.cases;
    if (!takesFolds) {
      if (error.empty()) ++counts.failures, failed += " b" + std::to_string(batch) + "(not refused)";
      continue;
    }
    check(error, label.c_str());
    check(cudaMemcpy(y.ptr, start.data(), y.bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(l.run(p, partials.as<float>(), counters.as<int>(), nullptr), label.c_str());
    check(cudaDeviceSynchronize(), (label + " (run)").c_str());
    std::vector<uint16_t> out(size_t(batch * l.rows));
    check(cudaMemcpy(out.data(), y.ptr, y.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    const std::vector<double> ref = l.reference(k::GemvProblem{l.rows, l.cols, batch, t, x.data(), out.data()});
    double err = 0, norm = 0;
    bool nan = false;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double expected = ref[i] + (p.accumulate ? toDouble(t, start[i]) : 0.0);
      const double o = toDouble(t, out[i]);
      if (std::isnan(o)) nan = true;
      err += (o - expected) * (o - expected);
      norm += expected * expected;
    }
    const double rel = std::sqrt(err / norm);
    worst = std::max(worst, rel);
    if (nan || !(rel < tolerance)) {
      ++counts.failures;
      failed += " b" + std::to_string(batch) + (nan ? "(unwritten)" : "") + "=" + std::to_string(rel);
    }
  }
  counts.worst = std::max(counts.worst, worst);
  std::printf("%-4s %-44s %s worst %.2e%s\n", failed.empty() ? "ok" : "FAIL",
              (label + (fold == Fold::NormAdd ? " +norm+add" : " +silu") + (takesFolds ? "" : " refused")).c_str(),
              t == k::ActivationType::Float16 ? "fp16" : "bf16", worst, failed.c_str());
  std::fflush(stdout);
}

int runTests(bool small) {
  std::vector<std::pair<int64_t, int64_t>> shapes = {{32, 256}, {100, 4160}, {333, 1056}};
  if (!small) shapes.push_back({4096, 4096});
  gTestBatches = small ? std::vector<int>{1, 2, 3, 8, 16} : std::vector<int>{};
  if (!small)
    for (int b = 1; b <= k::kMaxBatch; ++b) gTestBatches.push_back(b);
  const k::ActivationType types[] = {k::ActivationType::Float16, k::ActivationType::BFloat16};
  TestCounts counts;
  uint64_t seed = std::random_device{}();
  for (auto [rows, cols] : shapes) {
    const std::string shape = " " + std::to_string(rows) + "x" + std::to_string(cols);
    for (int bits : {4, 8})
      for (bool symmetric : {true, false})
        for (int64_t group : {int64_t(32), int64_t(64), int64_t(128), cols}) {
          if (cols % group != 0) continue;
          const Linear l = quantLinear(rows, cols, bits, symmetric, group, ++seed);
          for (auto t : types)
            checkLinear(l, t, "int" + std::to_string(bits) + (symmetric ? " sym" : " asym") + " g" + std::to_string(group) + shape,
                        counts);
        }
    for (auto [n, m] : {std::pair{2, 4}, {4, 8}, {8, 16}, {16, 32}, {1, 4}, {3, 4}})
      for (auto t : types)
        checkLinear(bitmaskLinear(rows, cols, n, m, t, ++seed), t,
                    "bitmask " + std::to_string(n) + ":" + std::to_string(m) + shape, counts);
    // 2:4 with groups of 32 kept values or more runs on the tensor cores (bitmaskInt4UsesTensorCores), the rest
    // on the FFMA path; symmetric and asymmetric codes on both.
    for (auto [n, m] : {std::pair{2, 4}, {16, 32}})
      for (int64_t group : {int64_t(16), int64_t(32), int64_t(64), int64_t(128), cols / 2}) {
        if (cols / 2 % group != 0) continue;
        const bool symmetric = group == 16 || group == 128;
        const Linear l = bitmaskInt4Linear(rows, cols, n, m, symmetric, group, ++seed);
        for (auto t : types)
          checkLinear(l, t,
                      "bitmask " + std::to_string(n) + ":" + std::to_string(m) + " int4" + (symmetric ? " sym" : " asym") +
                          " g" + std::to_string(group) + shape,
                      counts);
      }
    // Second-level groups of 16 rows at every width, 8 and 32 at 3 bits (4 stays on the FFMA path: spqrUsesTensorCores).
    for (auto [bits, scaleGroup] : {std::pair{2, 16}, {3, 16}, {4, 16}, {3, 8}, {3, 32}, {3, 4}})
      for (auto t : types)
        checkLinear(spqrLinear(rows, cols, bits, scaleGroup, 0.01, ++seed), t,
                    "spqr " + std::to_string(bits) + "-bit sg" + std::to_string(scaleGroup) + shape, counts);
    // Folds: the quantized and 2:4 + int4 kernels take them (both arithmetic paths of each: int4 on the tensor cores,
    // int8 on FFMA at batch 1-2 in fp16 and always in bf16; 2:4 + int4 per row on the tensor cores, g16 on FFMA),
    // bitmask N:M and SpQR refuse them.
    for (auto t : types)
      for (Fold fold : {Fold::NormAdd, Fold::SiluMul}) {
        const int64_t group4 = cols % 128 == 0 ? 128 : 32;
        checkFolded(quantLinear(rows, cols, 4, false, group4, ++seed), t, fold, true,
                    "int4 asym g" + std::to_string(group4) + shape, counts);
        checkFolded(quantLinear(rows, cols, 8, true, cols, ++seed), t, fold, true, "int8 sym per row" + shape, counts);
        checkFolded(bitmaskInt4Linear(rows, cols, 2, 4, false, cols / 2, ++seed), t, fold, true,
                    "bitmask 2:4 int4 asym per row" + shape, counts);
        checkFolded(bitmaskInt4Linear(rows, cols, 2, 4, true, 16, ++seed), t, fold, true,
                    "bitmask 2:4 int4 sym g16" + shape, counts);
        checkFolded(bitmaskLinear(rows, cols, 2, 4, t, ++seed), t, fold, false, "bitmask 2:4" + shape, counts);
        checkFolded(spqrLinear(rows, cols, 3, 16, 0.01, ++seed), t, fold, false, "spqr 3-bit sg16" + shape, counts);
      }
  }
  // A tall, narrow shape whose ring splits deal row groups out evenly (GemvSplit::ringBlocks) on a 132-multiprocessor
  // Hopper for every ring format at some batch of the test (PackedGemvSplit.TheBalancedTestShapeBalancesEveryRing
  // Format): int4 g128 and 2:4 + int4 at 1-2, int8 at 2-8, 2:4 at 3-8, 16:32 at 8, SpQR at 2-8. One linear a
  // format, fp16.
  {
    const int64_t rows = 24576, cols = 1024;
    const std::string shape = " 24576x1024 (balanced blocks)";
    const auto t = k::ActivationType::Float16;
    checkLinear(quantLinear(rows, cols, 4, false, 128, ++seed), t, "int4 asym g128" + shape, counts);
    checkLinear(quantLinear(rows, cols, 8, true, cols, ++seed), t, "int8 sym per row" + shape, counts);
    for (auto [n, m] : {std::pair{2, 4}, {16, 32}})
      checkLinear(bitmaskLinear(rows, cols, n, m, t, ++seed), t,
                  "bitmask " + std::to_string(n) + ":" + std::to_string(m) + shape, counts);
    checkLinear(bitmaskInt4Linear(rows, cols, 2, 4, false, cols / 2, ++seed), t, "bitmask 2:4 int4 asym per row" + shape,
                counts);
    checkLinear(spqrLinear(rows, cols, 3, 16, 0.01, ++seed), t, "spqr 3-bit sg16" + shape, counts);
    // The decode step folds into these two at batch 1, where Llama-3.1-8B's gate+up takes balanced blocks.
    for (Fold fold : {Fold::NormAdd, Fold::SiluMul}) {
      checkFolded(quantLinear(rows, cols, 4, false, 128, ++seed), t, fold, true, "int4 asym g128" + shape, counts);
      checkFolded(bitmaskInt4Linear(rows, cols, 2, 4, false, cols / 2, ++seed), t, fold, true,
                  "bitmask 2:4 int4 asym per row" + shape, counts);
    }
  }
  std::printf("TESTS %s: %d of %d (kernel, batch) cases failed, worst relative error %.2e\n",
              counts.failures ? "FAILED" : "PASSED", counts.failures, counts.cases, counts.worst);
  return counts.failures ? 1 : 0;
}

// ---- bench -------------------------------------------------------------------------------------------------

struct Shape {
  const char* name;
  int64_t rows, cols;
};
const Shape kLlama8b[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate+up", 28672, 4096}, {"down", 4096, 14336}};
constexpr int kLayers = 32;

// Device-side fill (a host-generated 14 GB of dense weights would take minutes): a hash of the index.
__device__ uint32_t hash32(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 29; x *= 0x94D049BB133111EBull; x ^= x >> 32;
  return uint32_t(x);
}
// mode 0: random bits; 1: fp16 pairs, roughly uniform in ±scale; 2: 2:4 mask words (every nibble 2 bits set);
// 3: 16:32 mask words (16 of the 32 bits set anywhere, a partial shuffle of the bit positions).
__global__ void fillKernel(uint32_t* p, size_t n, uint32_t seed, int mode, float scale) {
  const uint8_t pairs[6] = {3, 5, 6, 9, 10, 12};
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t h = hash32(i, seed);
    if (mode == 0) {
      p[i] = h;
    } else if (mode == 1) {
      const float a = (float(h & 0xFFFF) / 32768.f - 1.f) * scale, b = (float(h >> 16) / 32768.f - 1.f) * scale;
      p[i] = uint32_t(__half_as_ushort(__float2half(a))) | uint32_t(__half_as_ushort(__float2half(b))) << 16;
    } else if (mode == 2) {
      uint32_t w = 0;
      for (int j = 0; j < 8; ++j) w |= uint32_t(pairs[(hash32(i * 8 + j, seed) >> 8) % 6]) << (4 * j);
      p[i] = w;
    } else {
      uint8_t bit[32];
      for (int j = 0; j < 32; ++j) bit[j] = uint8_t(j);
      uint32_t w = 0;
      for (int j = 0; j < 16; ++j) {
        const int r = j + int((hash32(i * 16 + j, seed) >> 8) % uint32_t(32 - j));
        const uint8_t b = bit[r];
        bit[r] = bit[j], bit[j] = b;
        w |= 1u << b;
      }
      p[i] = w;
    }
  }
}
// SpQR outliers: `perRow` a row (rows past `rows`: none), fp16 values, at distinct columns drawn uniformly and
// stored increasing, as the format keeps them and as `pareto-cli bench kernels` draws them (randomSpqr in
// core/runtime/SyntheticWeights.cpp: a row's top perRow of uniform noise). Selection sampling: column c is taken with
// probability (still needed) / (columns left), which gives exactly perRow, in order.
__global__ void fillOutliers(int32_t* offsets, uint16_t* columns, uint16_t* values, int64_t rows, int64_t paddedRows,
                             int perRow, int64_t cols, uint32_t seed) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r <= paddedRows; r += int64_t(gridDim.x) * blockDim.x) {
    offsets[r] = int32_t(min(r, rows) * perRow);
    if (r >= rows) continue;
    int64_t i = r * perRow;
    uint64_t needed = uint64_t(perRow);
    for (int64_t c = 0; c < cols && needed > 0; ++c) {
      // Taken when u < needed / (cols − c), u = h / 2^32.
      if (uint64_t(hash32(uint64_t(r) * uint64_t(cols) + uint64_t(c), seed)) * uint64_t(cols - c) < (needed << 32)) {
        columns[i] = uint16_t(c);
        values[i] = __half_as_ushort(__float2half(float(int(hash32(uint64_t(i), seed + 1) % 200) - 100) * 1e-3f));
        ++i;
        --needed;
      }
    }
  }
}

std::shared_ptr<DeviceBuffer> deviceRandom(size_t bytes, uint32_t seed, int mode = 0, float scale = 0.05f) {
  auto b = std::make_shared<DeviceBuffer>((bytes + 3) / 4 * 4);
  fillKernel<<<1024, 256>>>(b->as<uint32_t>(), b->bytes / 4, seed, mode, scale);
  check(cudaGetLastError(), "fill");
  return b;
}

// The byte floor of one kernel a GEMV (`floor:FORMAT`): a kernel that does only what every GEMV kernel of the step
// has to do — stream the format's weight bytes (16-byte evict-first loads, 8 in flight a thread, 4 blocks of 256
// threads on every multiprocessor, the first loads issued before the previous kernel has finished, as the GEMVs
// do under programmatic dependent launch), read x once the previous kernel is done, and write y — with no
// arithmetic, staging or split combine. A reference, not a bound: it is a plain streamer, and cuBLAS and the 2:4
// ring kernel beat it on their own bytes (bench/NOTES.md "floor:FORMAT"); what it shows is how fast one kernel a GEMV
// streams a format's bytes in this chain at the least. PARETO_FLOOR_BLOCKS_PER_SM changes the 4.
struct FloorBuffers {
  const uint4* ptr[6];
  int64_t n16[6];
  int count;
};

__global__ void __launch_bounds__(256) floorKernel(FloorBuffers w, const uint4* x, int64_t x16, __half* y,
                                                   int64_t yCount) {
  pareto::kernels::detail::allowDependentLaunch();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  bool waited = false;
  for (int j = 0; j < w.count; ++j) {
    const uint4* p = w.ptr[j];
    const int64_t n = w.n16[j];
    for (int64_t i = t; i < n; i += 8 * stride) {
      uint4 v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) v[u] = i + u * stride < n ? __ldcs(p + i + u * stride) : make_uint4(0, 0, 0, 0);
      if (!waited) {  // the weight is not the previous kernel's: its first loads go out before the wait
        pareto::kernels::detail::waitForPreviousGrid();
        waited = true;
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  }
  if (!waited) pareto::kernels::detail::waitForPreviousGrid();
  for (int64_t i = threadIdx.x; i < x16; i += blockDim.x) {  // every block reads all of x (no split)
    const uint4 v = __ldcg(x + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  for (int64_t i = t; i < yCount; i += stride) y[i] = __ushort_as_half(uint16_t(acc & 0x3BFF));
}

#ifdef PARETO_GEMV_TIMELINE
k::GemvTimelineBuffer gTimeline;  // set for the timeline replay only (the launches read it when they are made)
#endif

struct BenchLinear {
  int64_t rows, cols;
  size_t bytes = 0;
  std::vector<std::shared_ptr<DeviceBuffer>> keep;
  std::function<void(const void* x, void* y, int batch, float* partials, cudaStream_t)> run;
  std::function<k::GemvSplit(int batch)> split;  // the packed formats' split at a batch (printed beside the times)
  std::shared_ptr<DeviceBuffer> counters;
};

cublasHandle_t cublas() {
  static cublasHandle_t h = [] {
    cublasHandle_t handle;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) { std::fprintf(stderr, "cublasCreate failed\n"); std::exit(2); }
    static DeviceBuffer workspace(size_t(32) << 20);  // a fixed workspace: no allocation inside graph capture
    cublasSetWorkspace(handle, workspace.ptr, workspace.bytes);
    return handle;
  }();
  return h;
}

// The format's weight for one shape, or null (unknown format).
std::shared_ptr<BenchLinear> makeBench(const std::string& format, const Shape& s, uint32_t seed) {
  if (format.rfind("floor:", 0) == 0) {  // the byte floor of the format (floorKernel over its buffers)
    auto inner = makeBench(format.substr(6), s, seed);
    if (!inner || inner->keep.size() > 6) return nullptr;
    auto l = std::make_shared<BenchLinear>();
    l->rows = s.rows, l->cols = s.cols;
    l->keep = inner->keep;
    l->bytes = inner->bytes;
    FloorBuffers w{};
    for (const auto& b : l->keep) {
      w.ptr[w.count] = b->as<uint4>();
      w.n16[w.count++] = int64_t(b->bytes / 16);
    }
    static const int perSm = [] {
      const char* v = std::getenv("PARETO_FLOOR_BLOCKS_PER_SM");
      return v ? std::max(1, std::atoi(v)) : 4;
    }();
    const unsigned blocks = unsigned(multiprocessors() * perSm);
    const int64_t rows = s.rows, cols = s.cols;
    l->run = [w, blocks, rows, cols](const void* x, void* y, int batch, float*, cudaStream_t stream) {
      check(pareto::kernels::detail::launchKernel(floorKernel, dim3(blocks), dim3(256), 0, stream, w,
                                                  static_cast<const uint4*>(x), int64_t(batch) * cols * 2 / 16,
                                                  static_cast<__half*>(y), int64_t(batch) * rows),
            "floor");
    };
    return l;
  }
  auto l = std::make_shared<BenchLinear>();
  l->rows = s.rows, l->cols = s.cols;
  const int64_t g = k::rowGroups(s.rows);
  l->counters = std::make_shared<DeviceBuffer>(size_t(g) * sizeof(int));
  check(cudaMemset(l->counters->ptr, 0, l->counters->bytes), "cudaMemset");
  int* counters = l->counters->as<int>();
  const int sms = multiprocessors();
  // The shape's problem (the split takes it without pointers). Not through `l`: a lambda stored in *l that held l
  // would keep the weights alive for good.
  const auto problem = [rows = s.rows, cols = s.cols](const void* x, void* y, int batch) {
    k::GemvProblem p{rows, cols, batch, k::ActivationType::Float16, x, y};
#ifdef PARETO_GEMV_TIMELINE
    p.timeline = gTimeline;
#endif
    return p;
  };
  if (format == "dense") {
    auto w = deviceRandom(size_t(s.rows * s.cols) * 2, seed, 1);
    l->keep = {w};
    l->bytes = w->bytes;
    const __half* wp = w->as<__half>();
    const int64_t rows = s.rows, cols = s.cols;
    l->run = [wp, rows, cols](const void* x, void* y, int batch, float*, cudaStream_t stream) {
      const float one = 1.f, zero = 0.f;
      cublasSetStream(cublas(), stream);
      // y[b, r] = Σ_c x[b, c] W[r, c]: column-major y (rows × batch) = Wᵀ(col-major cols × rows)ᵀ · x (cols × batch).
      if (cublasGemmEx(cublas(), CUBLAS_OP_T, CUBLAS_OP_N, int(rows), batch, int(cols), &one, wp, CUDA_R_16F, int(cols),
                       x, CUDA_R_16F, int(cols), &zero, y, CUDA_R_16F, int(rows), CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "cublasGemmEx failed\n");
        std::exit(2);
      }
    };
  } else if (format == "bitmask-2:4" || format == "bitmask-16:32") {
    const bool nm24 = format == "bitmask-2:4";
    const int64_t c = k::bitmaskChunks(s.cols);
    auto masks = deviceRandom(size_t(g * c * 32 * 8) * 4, seed, nm24 ? 2 : 3);
    auto values = deviceRandom(size_t(g * c * 16 * 32 * 8) * 2, seed + 1, 1);
    l->keep = {masks, values};
    l->bytes = masks->bytes + values->bytes;
    k::BitmaskNMGemvWeight w{masks->as<uint32_t>(), values->ptr, nm24 ? 2 : 16, nm24 ? 4 : 32};
    l->run = [=](const void* x, void* y, int batch, float* partials, cudaStream_t stream) {
      const k::GemvProblem p = problem(x, y, batch);
      check(k::runBitmaskNMGemv(p, w, k::bitmaskNMGemvSplit(p, w, sms), partials, counters, stream), "bitmask");
    };
    l->split = [=](int batch) { return k::bitmaskNMGemvSplit(problem(nullptr, nullptr, batch), w, sms); };
  } else if (format == "int8-channel" || format == "int4-g128") {
    const int bits = format == "int4-g128" ? 4 : 8;
    const int64_t group = bits == 4 ? 128 : s.cols;
    const int64_t c = k::quantChunks(s.cols, bits), columns = k::quantScaleColumns(s.cols, group, bits);
    auto codes = deviceRandom(size_t(g * c * 8 * 32 * 16), seed);
    auto scales = deviceRandom(size_t(g * columns * 32) * 2, seed + 1, 1, 0.01f);
    l->keep = {codes, scales};
    l->bytes = codes->bytes + scales->bytes;
    k::QuantGroupGemvWeight w{codes->ptr, scales->as<uint16_t>(), nullptr, bits, true, group, columns};
    l->run = [=](const void* x, void* y, int batch, float* partials, cudaStream_t stream) {
      const k::GemvProblem p = problem(x, y, batch);
      check(k::runQuantGroupGemv(p, w, k::quantGroupGemvSplit(p, w, sms), partials, counters, stream), "quant");
    };
    l->split = [=](int batch) { return k::quantGroupGemvSplit(problem(nullptr, nullptr, batch), w, sms); };
  } else if (format == "spqr-3bit") {
    const int64_t c = k::spqrChunks(s.cols);
    const int perRow = int(std::llround(0.01 * double(s.cols)));  // 1% outliers, rounded as randomSpqr rounds them
    auto codes = deviceRandom(size_t(g * c * 3 * 32 * 16), seed);
    auto stats = deviceRandom(size_t(g * c * 32 * 8), seed + 1);
    auto second = deviceRandom(size_t(g * c * 8 * 2 * 2) * 2, seed + 2, 1, 0.001f);
    auto offsets = std::make_shared<DeviceBuffer>(size_t(32 * g + 1) * 4);
    auto columns = std::make_shared<DeviceBuffer>(size_t(s.rows * perRow) * 2);
    auto values = std::make_shared<DeviceBuffer>(size_t(s.rows * perRow) * 2);
    fillOutliers<<<256, 256>>>(offsets->as<int32_t>(), columns->as<uint16_t>(), values->as<uint16_t>(), s.rows, 32 * g,
                               perRow, s.cols, seed + 3);
    check(cudaGetLastError(), "fillOutliers");
    l->keep = {codes, stats, second, offsets, columns, values};
    for (auto& b : l->keep) l->bytes += b->bytes;
    k::SpqrGemvWeight w{codes->ptr, stats->as<uint8_t>(), second->as<uint16_t>(), offsets->as<int32_t>(),
                        columns->as<uint16_t>(), values->as<uint16_t>(), 3, 16};
    l->run = [=](const void* x, void* y, int batch, float* partials, cudaStream_t stream) {
      const k::GemvProblem p = problem(x, y, batch);
      check(k::runSpqrGemv(p, w, k::spqrGemvSplit(p, w, sms), partials, counters, stream), "spqr");
    };
    l->split = [=](int batch) { return k::spqrGemvSplit(problem(nullptr, nullptr, batch), w, sms); };
  } else if (format == "bitmask-2:4+int4-g128") {
    const int64_t c = k::ceilDiv(s.cols, 256), columns = k::bitmaskInt4ScaleColumns(s.cols, 128);
    auto masks = deviceRandom(size_t(g * c * 32 * 8) * 4, seed, 2);
    auto codes = deviceRandom(size_t(g * c * 4 * 32 * 16), seed + 1);
    auto scales = deviceRandom(size_t(g * columns * 32) * 2, seed + 2, 1, 0.01f);
    // As the runtime holds it (core/runtime/PackedGemv.h): the masks as the tensor-core kernel's metadata, or as
    // masks for the FFMA one (PARETO_BITMASK_INT4_MMA=0); as many bytes either way.
    if (k::bitmaskInt4UsesTensorCores(2, 4, 128, s.cols)) {
      std::vector<uint32_t> hostMasks(masks->bytes / 4);
      check(cudaMemcpy(hostMasks.data(), masks->ptr, masks->bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
      masks = int4MaskMetadata(hostMasks, g, c);
    }
    l->keep = {masks, codes, scales};
    l->bytes = masks->bytes + codes->bytes + scales->bytes;
    const bool mma = k::bitmaskInt4UsesTensorCores(2, 4, 128, s.cols);
    k::BitmaskInt4GemvWeight w{mma ? nullptr : masks->as<uint32_t>(), codes->ptr, scales->as<uint16_t>(), nullptr, true,
                               128, columns, 2, 4, mma ? masks->as<uint32_t>() : nullptr};
    l->run = [=](const void* x, void* y, int batch, float* partials, cudaStream_t stream) {
      const k::GemvProblem p = problem(x, y, batch);
      check(k::runBitmaskInt4Gemv(p, w, k::bitmaskInt4GemvSplit(p, w, sms), partials, counters, stream), "bitmask int4");
    };
    l->split = [=](int batch) { return k::bitmaskInt4GemvSplit(problem(nullptr, nullptr, batch), w, sms); };
  } else {
    return nullptr;
  }
  return l;
}

// The step of a format: 32 layers × the four Llama-3.1-8B shapes, every weight distinct; empty (and named on stderr)
// for an unknown format.
std::vector<std::shared_ptr<BenchLinear>> makeStep(const std::string& format) {
  std::vector<std::shared_ptr<BenchLinear>> step;
  uint32_t seed = 1000;
  for (int layer = 0; layer < kLayers; ++layer)
    for (const auto& s : kLlama8b) {
      auto l = makeBench(format, s, seed += 17);
      if (!l) {
        std::fprintf(stderr, "unknown format %s\n", format.c_str());
        return {};
      }
      step.push_back(l);
    }
  return step;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median ms of `runs` replays of the GEMVs [begin, end) of `step`, captured in one graph.
double timeGraph(std::vector<std::shared_ptr<BenchLinear>>& step, size_t begin, size_t end, int batch, int runs,
                 const std::vector<std::shared_ptr<DeviceBuffer>>& xs, std::vector<std::shared_ptr<DeviceBuffer>>& ys,
                 float* partials, cudaStream_t stream) {
  const auto xFor = [&](int64_t cols) { return cols == 4096 ? xs[0]->ptr : xs[1]->ptr; };
  for (size_t i = begin; i < end; ++i) step[i]->run(xFor(step[i]->cols), ys[i]->ptr, batch, partials, stream);  // eager once
  check(cudaStreamSynchronize(stream), "eager step");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "capture");
  for (size_t i = begin; i < end; ++i) step[i]->run(xFor(step[i]->cols), ys[i]->ptr, batch, partials, stream);
  check(cudaStreamEndCapture(stream, &graph), "capture end");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  for (int i = 0; i < 5; ++i) check(cudaGraphLaunch(exec, stream), "replay");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    check(cudaEventRecord(start, stream), "record");
    check(cudaGraphLaunch(exec, stream), "replay");
    check(cudaEventRecord(stop, stream), "record");
    check(cudaEventSynchronize(stop), "sync");
    float e = 0;
    check(cudaEventElapsedTime(&e, start, stop), "elapsed");
    ms.push_back(e);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return median(ms);
}

double copyBandwidth() {
  DeviceBuffer a(size_t(2) << 30), b(size_t(2) << 30);
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<double> ms;
  for (int i = 0; i < 13; ++i) {
    check(cudaEventRecord(start), "record");
    check(cudaMemcpy(b.ptr, a.ptr, a.bytes, cudaMemcpyDeviceToDevice), "copy");
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "sync");
    float e = 0;
    check(cudaEventElapsedTime(&e, start, stop), "elapsed");
    if (i >= 3) ms.push_back(e);
  }
  return 2.0 * double(a.bytes) / (median(ms) * 1e-3) / 1e9;
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

// The switches set in the environment (an A/B side's settings; kernels/KernelSwitches.h), ending the device line.
void printSwitchesSet() {
  for (const pareto::kernels::KernelSwitch& sw : pareto::kernels::kKernelSwitches)
    if (const char* v = std::getenv(sw.name)) std::printf(", %s=%s", sw.name, v);
  std::printf("\n");
}

// The options `bench` and `sweep` share (--batch, --runs, --formats) and the one file each writes (`fileOption`);
// false (reported) on an unknown option or a batch outside 1..16.
struct RunOptions {
  std::vector<int> batches;
  int runs;
  std::vector<std::string> formats;
  std::string file;
};
bool parseRunOptions(int argc, char** argv, const std::string& fileOption, RunOptions& o) {
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--batch") { o.batches.clear(); for (auto& b : splitList(v)) o.batches.push_back(std::stoi(b)); }
    else if (a == "--runs") o.runs = std::stoi(v);
    else if (a == "--formats") o.formats = splitList(v);
    else if (a == fileOption) o.file = v;
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return false; }
  }
  for (int b : o.batches)
    if (b < 1 || b > k::kMaxBatch) { std::fprintf(stderr, "batch %d outside 1..16\n", b); return false; }
  return true;
}

int runBench(std::vector<int> batches, int runs, std::vector<std::string> formats, const std::string& jsonPath) {
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  const double copy = copyBandwidth();
  std::printf("device %s (%d SMs), copy %.0f GB/s", prop.name, prop.multiProcessorCount, copy);
  printSwitchesSet();
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  std::vector<std::shared_ptr<DeviceBuffer>> xs = {deviceRandom(16 * 4096 * 2, 7, 1, 1.f), deviceRandom(16 * 14336 * 2, 8, 1, 1.f)};
  auto partials = std::make_shared<DeviceBuffer>(size_t(64) << 20);
  std::string json = "{\"device\": \"" + std::string(prop.name) + "\", \"copy_gb_per_s\": " + std::to_string(copy) +
                     ", \"shape\": \"llama-3.1-8b\", \"layers\": 32, \"results\": [";
  std::vector<double> denseMs(batches.size(), 0);
  bool firstResult = true;
  std::printf("%-24s %5s %9s %8s %7s %7s  %s\n", "format", "batch", "ms/step", "GB/s", "copy", "vs fp16", "µs a GEMV alone: qkv o gate+up down");
  for (const auto& format : formats) {
    std::vector<std::shared_ptr<BenchLinear>> step = makeStep(format);
    if (step.empty()) return 2;
    // Each shape alone: its GEMVs of every layer in a step of their own (same order of layers).
    std::vector<std::shared_ptr<BenchLinear>> byShape;
    for (int s = 0; s < 4; ++s)
      for (int layer = 0; layer < kLayers; ++layer) byShape.push_back(step[size_t(layer * 4 + s)]);
    size_t weightBytes = 0;
    for (auto& l : step) weightBytes += l->bytes;
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      const int batch = batches[bi];
      std::vector<std::shared_ptr<DeviceBuffer>> ys;
      double io = 0;
      for (auto& l : step) {
        ys.push_back(std::make_shared<DeviceBuffer>(size_t(batch * l->rows) * 2));
        io += 2.0 * batch * double(l->rows + l->cols);
      }
      const double ms = timeGraph(step, 0, step.size(), batch, runs, xs, ys, partials->as<float>(), stream);
      std::vector<std::shared_ptr<DeviceBuffer>> ysAlone;  // in byShape's order: each GEMV its own rows
      for (auto& l : byShape) ysAlone.push_back(std::make_shared<DeviceBuffer>(size_t(batch * l->rows) * 2));
      double alone[4];
      for (int s = 0; s < 4; ++s)
        alone[s] = timeGraph(byShape, size_t(s * kLayers), size_t((s + 1) * kLayers), batch, runs, xs, ysAlone,
                             partials->as<float>(), stream) * 1e3 / kLayers;
      if (format == "dense") denseMs[bi] = ms;
      const double gbs = (double(weightBytes) + io) / (ms * 1e-3) / 1e9;
      const double speedup = denseMs[bi] > 0 ? denseMs[bi] / ms : 0;
      // Each shape's split (splits x warps sharing a row group; the ring kernels' choice, GemvProblem.h).
      std::string splits;
      if (step[0]->split)
        for (int sh = 0; sh < 4; ++sh) {
          const k::GemvSplit sp = step[size_t(sh)]->split(batch);
          splits += " " + std::to_string(sp.splits) + "x" + std::to_string(sp.ringGroupWarps);
          if (sp.ringBlocks > 0) splits += "/" + std::to_string(sp.ringBlocks);  // row groups dealt out (v6y)
        }
      std::printf("%-24s %5d %9.3f %8.0f %6.1f%% %6.2fx  %.1f %.1f %.1f %.1f%s%s\n", format.c_str(), batch, ms, gbs,
                  100 * gbs / copy, speedup, alone[0], alone[1], alone[2], alone[3], splits.empty() ? "" : "  splits",
                  splits.c_str());
      std::fflush(stdout);
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s{\"format\": \"%s\", \"batch\": %d, \"ms_per_step\": %.4f, \"bytes_per_step\": %.0f, "
                    "\"gb_per_s\": %.1f, \"fraction_of_copy\": %.4f, \"speedup_over_dense\": %.4f, "
                    "\"us_per_gemv_alone\": {\"qkv\": %.2f, \"o\": %.2f, \"gate+up\": %.2f, \"down\": %.2f}}",
                    firstResult ? "" : ", ", format.c_str(), batch, ms, double(weightBytes) + io, gbs, gbs / copy,
                    speedup, alone[0], alone[1], alone[2], alone[3]);
      json += buf;
      firstResult = false;
    }
    step.clear();
    byShape.clear();
    check(cudaDeviceSynchronize(), "bench");
  }
  json += "]}\n";
  if (!jsonPath.empty()) {
    FILE* f = std::fopen(jsonPath.c_str(), "w");
    if (f) { std::fputs(json.c_str(), f); std::fclose(f); }
  }
  return 0;
}

int gSweepWrong = 0;  // runSweep's splits whose y differs from the policy's

// Every split each shape of a format can take at a batch (kernels/GemvProblem.h forceGemvSplit: the splits the
// policy itself could choose, forced one at a time), each shape alone as `bench` times it (its 32 layers in one
// graph), against the policy's choice. One line a (format, batch, shape): the policy, the best, every candidate;
// with --csv one row a candidate.
int runSweep(const std::vector<int>& batches, int runs, const std::vector<std::string>& formats, const std::string& csvPath) {
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("device %s (%d SMs)", prop.name, prop.multiProcessorCount);
  printSwitchesSet();
  FILE* csv = csvPath.empty() ? nullptr : std::fopen(csvPath.c_str(), "w");
  if (!csvPath.empty() && !csv) { std::fprintf(stderr, "cannot write %s\n", csvPath.c_str()); return 2; }
  if (csv) std::fprintf(csv, "format,batch,shape,splits,group_warps,ring_blocks,chunks_per_split,policy,us\n");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  std::vector<std::shared_ptr<DeviceBuffer>> xs = {deviceRandom(16 * 4096 * 2, 7, 1, 1.f), deviceRandom(16 * 14336 * 2, 8, 1, 1.f)};
  const size_t partialBytes = size_t(256) << 20;
  auto partials = std::make_shared<DeviceBuffer>(partialBytes);
  const auto label = [](const k::GemvSplit& sp) {
    std::string t = std::to_string(sp.splits) + "x" + std::to_string(sp.ringGroupWarps);
    if (sp.ringBlocks > 0) t += "/" + std::to_string(sp.ringBlocks);
    return t;
  };
  for (const auto& format : formats) {
    std::vector<std::shared_ptr<BenchLinear>> step = makeStep(format);
    if (step.empty()) return 2;
    if (!step[0]->split) { std::fprintf(stderr, "sweep: %s has no split to sweep\n", format.c_str()); continue; }
    std::vector<std::shared_ptr<BenchLinear>> byShape;
    for (int sh = 0; sh < 4; ++sh)
      for (int layer = 0; layer < kLayers; ++layer) byShape.push_back(step[size_t(layer * 4 + sh)]);
    step.clear();
    for (int batch : batches) {
      std::vector<std::shared_ptr<DeviceBuffer>> ys;
      for (auto& l : byShape) ys.push_back(std::make_shared<DeviceBuffer>(size_t(batch * l->rows) * 2));
      for (int sh = 0; sh < 4; ++sh) {
        const size_t begin = size_t(sh * kLayers), end = begin + kLayers;
        const BenchLinear& l = *byShape[begin];
        const auto time = [&] {
          return timeGraph(byShape, begin, end, batch, runs, xs, ys, partials->as<float>(), stream) * 1e3 / kLayers;
        };
        // The first layer's y, against the policy's: a forced split sums in another order, never to other values.
        const auto firstY = [&] {
          std::vector<uint16_t> y(size_t(batch * l.rows));
          check(cudaMemcpy(y.data(), ys[begin]->ptr, y.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
          return y;
        };
        k::forceGemvSplit(nullptr);
        const k::GemvSplit policy = l.split(batch);
        const double policyUs = time();
        const std::vector<uint16_t> policyY = firstY();
        const auto differs = [&](const std::vector<uint16_t>& y) {
          double err = 0, norm = 0;
          for (size_t i = 0; i < y.size(); ++i) {
            const double a = toDouble(k::ActivationType::Float16, y[i]), b = toDouble(k::ActivationType::Float16, policyY[i]);
            err += (a - b) * (a - b), norm += b * b;
          }
          return !(std::sqrt(err / norm) < 2e-3);
        };
        struct Tried { k::GemvSplit split; double us; };
        std::vector<Tried> tried;
        for (int warps = 1; warps <= k::kRingWarpsPerBlock; warps *= 2)
          for (bool balanced : {false, true})
            for (int64_t per = 1; per <= 512; ++per) {
              const k::GemvSplitForce force{per, warps, balanced};
              k::forceGemvSplit(&force);
              const k::GemvSplit sp = l.split(batch);
              if (!k::isForcedSplit(sp, force)) continue;
              // For a split count the least chunks a split comes first (per rises), the others repeat it with an
              // uneven last split; of those only the first whose chunks divide evenly among the row group's warps
              // (the policy's ties favour it, and it measured up to 7% apart: int4 g128's down at batch 2).
              const auto even = [](const k::GemvSplit& x) { return x.chunksPerSplit % x.ringGroupWarps == 0; };
              bool seen = false;
              for (const Tried& t : tried)
                seen |= t.split.splits == sp.splits && t.split.ringGroupWarps == sp.ringGroupWarps &&
                        t.split.ringBlocks == sp.ringBlocks && (even(t.split) == even(sp) || !even(sp));
              const k::GemvProblem p{l.rows, l.cols, batch, k::ActivationType::Float16, nullptr, nullptr};
              if (seen || k::gemvPartialFloats(p, sp) * sizeof(float) > partialBytes) continue;
              const double us = time();
              if (differs(firstY())) {
                ++gSweepWrong;
                std::printf("WRONG %s b%d %s: split %s gives another y than the policy's\n", format.c_str(), batch,
                            kLlama8b[sh].name, label(sp).c_str());
                continue;
              }
              tried.push_back({sp, us});
            }
        k::forceGemvSplit(nullptr);
        const Tried* best = nullptr;
        for (const Tried& t : tried)
          if (!best || t.us < best->us) best = &t;
        std::printf("%-24s b%-2d %-8s policy %-9s %6.2f µs", format.c_str(), batch, kLlama8b[sh].name,
                    label(policy).c_str(), policyUs);
        if (best)
          std::printf("  best %-9s %6.2f µs (%+.1f%%)", label(best->split).c_str(), best->us,
                      100.0 * (best->us / policyUs - 1.0));
        std::printf("  |");
        for (const Tried& t : tried) std::printf(" %s %.2f", label(t.split).c_str(), t.us);
        std::printf("\n");
        std::fflush(stdout);
        if (csv) {
          const auto row = [&](const k::GemvSplit& sp, bool isPolicy, double us) {
            std::fprintf(csv, "%s,%d,%s,%d,%d,%lld,%lld,%d,%.3f\n", format.c_str(), batch, kLlama8b[sh].name, sp.splits,
                         sp.ringGroupWarps, (long long)sp.ringBlocks, (long long)sp.chunksPerSplit, isPolicy ? 1 : 0, us);
          };
          row(policy, true, policyUs);
          for (const Tried& t : tried) row(t.split, false, t.us);
          std::fflush(csv);
        }
      }
    }
    byShape.clear();
    check(cudaDeviceSynchronize(), "sweep");
  }
  if (csv) std::fclose(csv);
  if (gSweepWrong > 0) std::printf("SWEEP FAILED: %d splits gave another y than the policy's\n", gSweepWrong);
  return gSweepWrong > 0 ? 1 : 0;
}

#ifdef PARETO_GEMV_TIMELINE
// One replay of the step's graph with every block stamped (kernels/GemvTimeline.cuh), summarised per shape.
int runTimeline(int batch, const std::vector<std::string>& formats, const std::string& csvPath) {
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  std::vector<std::shared_ptr<DeviceBuffer>> xs = {deviceRandom(16 * 4096 * 2, 7, 1, 1.f), deviceRandom(16 * 14336 * 2, 8, 1, 1.f)};
  auto partials = std::make_shared<DeviceBuffer>(size_t(64) << 20);
  const unsigned capacity = 1u << 20;
  DeviceBuffer records(size_t(capacity) * sizeof(k::GemvTimelineRecord)), count(4);
  FILE* csv = csvPath.empty() ? nullptr : std::fopen(csvPath.c_str(), "w");
  if (csv) std::fprintf(csv, "format,batch,gemv,shape,block,sm,start_ns,released_ns,staged_ns,end_ns\n");
  const char* shapeNames[4] = {"qkv", "o", "gate+up", "down"};
  std::printf("batch %d; µs, medians over the 32 layers (gap: previous GEMV's last end to this one's first release;\n"
              "spread: last − first release; stage: median staged − released; span: first release to last end;\n"
              "tail: last end − median end; early: median release − start, the blocks' prologue window)\n", batch);
  std::printf("%-24s %-8s %6s %6s %6s %6s %6s %6s %7s %8s\n", "format", "shape", "blocks", "gap", "spread", "stage",
              "span", "tail", "early", "GB/s");
  for (const auto& format : formats) {
    gTimeline = {records.as<k::GemvTimelineRecord>(), count.as<unsigned>(), capacity};
    std::vector<std::shared_ptr<BenchLinear>> step = makeStep(format);
    if (step.empty()) return 2;
    std::vector<std::shared_ptr<DeviceBuffer>> ys;
    for (auto& l : step) ys.push_back(std::make_shared<DeviceBuffer>(size_t(batch * l->rows) * 2));
    // timeGraph replays 5 + runs times; the records of the last replay are the last ones written. Reset the count
    // before a final single replay so that exactly one replay's blocks are kept.
    const double stampedMs = timeGraph(step, 0, step.size(), batch, 5, xs, ys, partials->as<float>(), stream);
    check(cudaMemset(count.ptr, 0, 4), "reset");
    check(cudaMemset(records.ptr, 0, records.bytes), "reset");
    (void)timeGraph(step, 0, step.size(), batch, 1, xs, ys, partials->as<float>(), stream);
    unsigned n = 0;
    check(cudaMemcpy(&n, count.ptr, 4, cudaMemcpyDeviceToHost), "count");
    std::vector<k::GemvTimelineRecord> all(std::min(n, capacity));
    check(cudaMemcpy(all.data(), records.ptr, all.size() * sizeof(k::GemvTimelineRecord), cudaMemcpyDeviceToHost), "records");
    // The timer's step (1 µs on some GPUs unless a profiler raises it, which would blur gaps of a few µs).
    uint64_t stepNs = UINT64_MAX;
    {
      std::vector<uint64_t> stamps;
      for (const auto& r : all) stamps.insert(stamps.end(), {r.start, r.released, r.staged, r.end});
      std::sort(stamps.begin(), stamps.end());
      for (size_t i = 1; i < stamps.size(); ++i)
        if (stamps[i] > stamps[i - 1]) stepNs = std::min(stepNs, stamps[i] - stamps[i - 1]);
    }
    // The eager run and the 6 + 1 replays wrote in that order: keep each GEMV's last grid of records (its y pointer,
    // block numbers seen again mean an earlier launch).
    std::map<uint64_t, size_t> gemvOf;
    for (size_t i = 0; i < step.size(); ++i) gemvOf[reinterpret_cast<uint64_t>(ys[i]->ptr)] = i;
    std::vector<std::vector<k::GemvTimelineRecord>> byGemv(step.size());
    for (const auto& r : all) {
      auto it = gemvOf.find(r.y);
      if (it == gemvOf.end()) continue;
      auto& v = byGemv[it->second];
      if (!v.empty() && std::any_of(v.begin(), v.end(), [&](const auto& o) { return o.block == r.block; })) v.clear();
      v.push_back(r);
    }
    if (std::any_of(byGemv.begin(), byGemv.end(), [](const auto& v) { return v.empty(); })) {
      std::printf("%-24s no stamps (only the packed GEMV kernels have them: not dense, not floor:)\n", format.c_str());
      gTimeline = {};
      continue;
    }
    // A coarse global timer: each multiprocessor's clock64 mapped onto it by a least-squares line over that SM's
    // stamps of this replay (hundreds of them: the line's offset is good to well under the timer's step).
    const bool refined = stepNs > 100;
    if (refined) {
      std::map<uint32_t, std::vector<std::pair<double, double>>> points;  // SM → (clock, ns)
      for (const auto& v : byGemv)
        for (const auto& r : v) {
          const uint64_t ns[4] = {r.start, r.released, r.staged, r.end};
          for (int j = 0; j < 4; ++j) points[r.sm].push_back({double(r.clocks[j]), double(ns[j])});
        }
      std::map<uint32_t, std::pair<double, double>> line;  // SM → (a, b): ns = a + b · clock
      for (auto& [sm, pts] : points) {
        double mc = 0, mn = 0;
        for (auto& [c, t] : pts) mc += c, mn += t;
        mc /= double(pts.size()), mn /= double(pts.size());
        double cov = 0, var = 0;
        for (auto& [c, t] : pts) cov += (c - mc) * (t - mn), var += (c - mc) * (c - mc);
        const double b = var > 0 ? cov / var : 0;
        line[sm] = {mn - b * mc, b};
      }
      for (auto& v : byGemv)
        for (auto& r : v) {
          const auto [a, b] = line[r.sm];
          if (b <= 0) continue;
          uint64_t* ns[4] = {&r.start, &r.released, &r.staged, &r.end};
          for (int j = 0; j < 4; ++j) *ns[j] = uint64_t(std::llround(a + b * double(r.clocks[j])));
        }
    }
    std::printf("%s: %.3f ms a step with the stamps, %u block records, %%globaltimer step %llu ns%s\n", format.c_str(),
                stampedMs, n, (unsigned long long)stepNs,
                refined ? " (times from each SM's clock64 fitted to it)" : "");
    const uint64_t t0 = byGemv[0].empty() ? 0 : std::min_element(byGemv[0].begin(), byGemv[0].end(), [](auto& a, auto& b) { return a.start < b.start; })->start;
    std::vector<double> gap[4], spread[4], stage[4], span[4], tail[4], early[4], rate[4];
    size_t blocks[4] = {0, 0, 0, 0};
    uint64_t previousEnd = 0, firstReleaseOfStep = 0;
    double gapTotal = 0;
    for (size_t i = 0; i < step.size(); ++i) {
      auto& v = byGemv[i];
      const int sh = int(i % 4);
      std::vector<double> releases, ends, stages, earlies;
      uint64_t firstRelease = UINT64_MAX, lastRelease = 0, lastEnd = 0;
      for (const auto& r : v) {
        firstRelease = std::min(firstRelease, r.released);
        lastRelease = std::max(lastRelease, r.released);
        lastEnd = std::max(lastEnd, r.end);
        ends.push_back(double(r.end));
        stages.push_back(double(r.staged - r.released) * 1e-3);
        earlies.push_back(double(r.released - r.start) * 1e-3);
        if (csv)
          std::fprintf(csv, "%s,%d,%zu,%s,%u,%u,%llu,%llu,%llu,%llu\n", format.c_str(), batch, i, shapeNames[sh],
                       r.block, r.sm, (unsigned long long)(r.start - t0), (unsigned long long)(r.released - t0),
                       (unsigned long long)(r.staged - t0), (unsigned long long)(r.end - t0));
      }
      blocks[sh] = v.size();
      if (i > 0) gap[sh].push_back((double(firstRelease) - double(previousEnd)) * 1e-3);
      if (i > 0) gapTotal += (double(firstRelease) - double(previousEnd)) * 1e-3;
      if (i == 0) firstReleaseOfStep = firstRelease;
      spread[sh].push_back(double(lastRelease - firstRelease) * 1e-3);
      stage[sh].push_back(median(stages));
      span[sh].push_back(double(lastEnd - firstRelease) * 1e-3);
      tail[sh].push_back((double(lastEnd) - median(ends)) * 1e-3);
      early[sh].push_back(median(earlies));
      rate[sh].push_back(double(step[i]->bytes) / (double(lastEnd - firstRelease) * 1e-9) / 1e9);
      previousEnd = lastEnd;
    }
    const double stepUs = double(previousEnd - firstReleaseOfStep) * 1e-3;
    std::printf("%-24s step %.1f µs from the first release to the last end, of which %.1f µs (%.0f%%) between one "
                "GEMV's last end and the next one's first release\n",
                format.c_str(), stepUs, gapTotal, 100 * gapTotal / stepUs);
    for (int sh = 0; sh < 4; ++sh)
      std::printf("%-24s %-8s %6zu %6.2f %6.2f %6.2f %6.2f %6.2f %7.2f %8.0f\n", format.c_str(), shapeNames[sh],
                  blocks[sh], median(gap[sh]), median(spread[sh]), median(stage[sh]), median(span[sh]),
                  median(tail[sh]), median(early[sh]), median(rate[sh]));
    std::fflush(stdout);
    gTimeline = {};
    step.clear();
    check(cudaDeviceSynchronize(), "timeline");
  }
  if (csv) std::fclose(csv);
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gemv_kernels test [--small] | bench [--batch 1,2,4,8,16] [--runs 50] [--formats ...] [--json FILE]\n"
                         "       | timeline [--batch 1] [--formats ...] [--csv FILE]  (a GEMV_TIMELINE=1 build)\n"
                         "       | sweep [--batch 4,8,16] [--runs 20] [--formats ...] [--csv FILE]  (every split of each shape)\n"
                         "environment switches (an A/B side; kernels/KernelSwitches.h):\n");
    for (const pareto::kernels::KernelSwitch& sw : pareto::kernels::kKernelSwitches)
      std::fprintf(stderr, "  %s  %s\n", sw.name, sw.meaning);
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "test") {
    const bool small = argc > 2 && std::string(argv[2]) == "--small";
    return runTests(small);
  }
  if (mode == "bench") {
    RunOptions o{{1, 2, 4, 8, 16}, 50,
                 {"dense", "bitmask-2:4", "bitmask-16:32", "int8-channel", "int4-g128", "spqr-3bit", "bitmask-2:4+int4-g128"},
                 {}};
    if (!parseRunOptions(argc, argv, "--json", o)) return 2;
    return runBench(o.batches, o.runs, o.formats, o.file);
  }
  if (mode == "sweep") {
    RunOptions o{{4, 8, 16}, 20, {"int4-g128", "bitmask-2:4+int4-g128", "int8-channel", "bitmask-2:4", "spqr-3bit"}, {}};
    if (!parseRunOptions(argc, argv, "--csv", o)) return 2;
    return runSweep(o.batches, o.runs, o.formats, o.file);
  }
  if (mode == "timeline") {
#ifdef PARETO_GEMV_TIMELINE
    int batch = 1;
    std::vector<std::string> formats = {"int4-g128", "bitmask-2:4+int4-g128", "bitmask-2:4"};
    std::string csv;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string a = argv[i], v = argv[i + 1];
      if (a == "--batch") batch = std::stoi(v);
      else if (a == "--formats") formats = splitList(v);
      else if (a == "--csv") csv = v;
      else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
    }
    if (batch < 1 || batch > k::kMaxBatch) { std::fprintf(stderr, "batch %d outside 1..16\n", batch); return 2; }
    return runTimeline(batch, formats, csv);
#else
    std::fprintf(stderr, "timeline: this binary has no stamps; build it with GEMV_TIMELINE=1 bench/build-gemv-kernels.sh\n");
    return 2;
#endif
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
