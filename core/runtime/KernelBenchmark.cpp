#include "runtime/KernelBenchmark.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <regex>
#include <sstream>

#include "checkpoint/ModelPresets.h"
#include "runtime/CopyBandwidth.h"
#include "runtime/PackedLinear.h"
#include "runtime/SyntheticWeights.h"
#include "util/Error.h"
#include "util/Json.h"

#ifdef PARETO_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <torch/version.h>
#endif

namespace pareto {
namespace {

ModelShape shapeOf(const std::string& name, const ModelConfig& c) {
  return decodeStepShape(name, int(c.numLayers), c.hiddenSize, c.intermediateSize, c.numHeads, c.numKvHeads,
                         c.headDim);
}

// One GEMV of the step: y = x · Wᵀ into a fixed output, plus what it reads.
struct BenchLinear {
  std::function<void(const at::Tensor& x, at::Tensor& out)> run;
  int64_t weightBytes = 0;
  int64_t rows = 0, cols = 0;
};

int64_t bytesOf(const at::Tensor& t) { return t.numel() * int64_t(t.element_size()); }

BenchLinear makeLinear(const std::string& format, const LinearShape& shape, at::Device device, uint64_t seed,
                       double outlierFraction) {
  BenchLinear l;
  l.rows = shape.rows;
  l.cols = shape.cols;
  const std::string what = shape.name;
  if (format == "cusparselt-2:4") {
#if defined(PARETO_WITH_CUDA) && TORCH_VERSION_MAJOR >= 2
    if (!device.is_cuda()) throw InputError("cuSPARSELt runs on CUDA only");
    const BitmaskNMWeight pruned = randomBitmaskNM(shape.rows, shape.cols, 2, 4, at::kHalf, device, seed);
    const at::Tensor compressed = at::_cslt_compress(pruned.unpack());
    l.weightBytes = bytesOf(compressed);
    l.run = [compressed](const at::Tensor& x, at::Tensor& out) {
      out.copy_(at::_cslt_sparse_mm(compressed, x.t()).t());
    };
    return l;
#else
    (void)seed;
    throw InputError("cuSPARSELt is not in this LibTorch (needs PyTorch 2.x with CUDA)");
#endif
  }
  // cuBLAS fp16 on the GPU; float32 on the CPU, where LibTorch 1.13 has no fp16 matrix product.
  const at::ScalarType dtype = format == "dense" && !device.is_cuda() ? at::kFloat : at::kHalf;
  auto w = std::make_shared<PackedLinear>(randomPackedLinear(format, shape.rows, shape.cols, dtype, device, seed,
                                                             outlierFraction));
  l.weightBytes = w->weightBytes();
  l.run = [w, what](const at::Tensor& x, at::Tensor& out) { w->forward(x.to(out.scalar_type()), out, what); };
  return l;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Timing {
  double medianMs = 0, minMs = 0, maxMs = 0;
};

Timing summarize(const std::vector<double>& ms) {
  Timing t;
  t.medianMs = median(ms);
  t.minMs = *std::min_element(ms.begin(), ms.end());
  t.maxMs = *std::max_element(ms.begin(), ms.end());
  return t;
}

// Runs every linear of the step once.
void runStep(std::vector<BenchLinear>& step, std::map<int64_t, at::Tensor>& inputs,
             std::vector<at::Tensor>& outputs) {
  for (size_t i = 0; i < step.size(); ++i) step[i].run(inputs.at(step[i].cols), outputs[i]);
}

#ifdef PARETO_WITH_CUDA
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// The step captured once in a CUDA graph and replayed: no launch overhead between the kernels, as in a
// CUDA-graph decode loop.
Timing timeCuda(std::vector<BenchLinear>& step, std::map<int64_t, at::Tensor>& inputs,
                std::vector<at::Tensor>& outputs, int warmup, int runs) {
  c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAStreamGuard guard(stream);
  runStep(step, inputs, outputs);  // eager once: library handles and workspaces exist before capture
  stream.synchronize();
  at::cuda::CUDAGraph graph;
  graph.capture_begin();
  runStep(step, inputs, outputs);
  graph.capture_end();
  for (int i = 0; i < warmup; ++i) graph.replay();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    check(cudaEventRecord(start, stream.stream()), "cudaEventRecord");
    graph.replay();
    check(cudaEventRecord(stop, stream.stream()), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float elapsed = 0;
    check(cudaEventElapsedTime(&elapsed, start, stop), "cudaEventElapsedTime");
    ms.push_back(elapsed);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return summarize(ms);
}

#endif

Timing timeCpu(std::vector<BenchLinear>& step, std::map<int64_t, at::Tensor>& inputs,
               std::vector<at::Tensor>& outputs, int runs) {
  runStep(step, inputs, outputs);
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    runStep(step, inputs, outputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return summarize(ms);
}

}  // namespace

ModelShape decodeStepShape(const std::string& name, int layers, int64_t hidden, int64_t intermediate, int64_t heads,
                           int64_t kvHeads, int64_t headDim) {
  ModelShape s;
  s.name = name;
  s.layers = layers;
  s.linears = {{"qkv", (heads + 2 * kvHeads) * headDim, hidden},
               {"o", hidden, heads * headDim},
               {"gate+up", 2 * intermediate, hidden},
               {"down", hidden, intermediate}};
  return s;
}

std::string cudaDeviceLabel() {
#ifdef PARETO_WITH_CUDA
  if (!at::hasCUDA()) throw InputError("no CUDA device");
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  return std::string(prop->name) + " (" + std::to_string(prop->multiProcessorCount) + " SMs)";
#else
  throw InputError("this build has no CUDA support");
#endif
}

std::vector<std::string> knownModelShapes() {
  std::vector<std::string> names;
  for (const auto& name : knownModelPresets())
    if (name != "tiny-llama") names.push_back(name);
  return names;
}

ModelShape modelShapeByName(const std::string& nameOrFile) {
  for (const auto& name : knownModelPresets())
    if (name == nameOrFile) return shapeOf(name, modelPreset(name));
  if (nameOrFile.find('/') == std::string::npos && nameOrFile.find(".json") == std::string::npos) {
    std::string known;
    for (const auto& n : knownModelShapes()) known += (known.empty() ? "" : ", ") + n;
    throw InputError("unknown model shape \"" + nameOrFile + "\" (known: " + known + ", or a JSON file)");
  }
  const nlohmann::json j = readJsonFile(nameOrFile);
  ModelShape s;
  try {
    s.name = j.value("name", nameOrFile);
    s.layers = j.at("layers").get<int>();
    for (const auto& l : j.at("linears"))
      s.linears.push_back({l.at("name").get<std::string>(), l.at("rows").get<int64_t>(), l.at("cols").get<int64_t>()});
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fileMessage(nameOrFile, std::string("not a model shape: ") + e.what() +
                                                 " (expected {\"layers\": N, \"linears\": [{\"name\", \"rows\", \"cols\"}, ...]})"));
  }
  if (s.layers <= 0 || s.linears.empty()) throw InputError(fileMessage(nameOrFile, "needs layers > 0 and at least one linear"));
  for (const auto& l : s.linears)
    if (l.rows <= 0 || l.cols <= 0) throw InputError(fileMessage(nameOrFile, "linear \"" + l.name + "\" has an empty shape"));
  return s;
}

std::vector<std::string> defaultKernelFormats() {
  return {"dense", "cusparselt-2:4", "bitmask-2:4", "bitmask-16:32", "int8-channel", "int4-g128", "spqr-3bit",
          "bitmask-2:4+int4-g128"};
}

KernelBenchReport runKernelBenchmark(const KernelBenchOptions& o, const ProgressCallback& progress,
                                     const CancelToken& cancel) {
  for (const auto& f : o.formats)
    if (f != "cusparselt-2:4") checkPackedFormatName(f);  // reject a bad name before any work
  if (o.batches.empty()) throw InputError("no batch sizes given");
  for (int b : o.batches)
    if (b < 1 || b > 16) throw InputError("batch " + std::to_string(b) + " is outside 1..16");
  if (o.runs < 1) throw InputError("runs must be at least 1");
  const bool cuda = o.device == "cuda";
  if (!cuda && o.device != "cpu") throw InputError("device must be cuda or cpu, not \"" + o.device + "\"");
  KernelBenchReport report;
  report.shape = o.shape.name;
  report.linears = o.shape.linears;
  for (const auto& l : o.shape.linears) report.weightsPerStep += l.rows * l.cols * o.shape.layers;
#ifdef PARETO_WITH_CUDA
  if (cuda) {
    if (!at::hasCUDA()) throw InputError("no CUDA device (use --device cpu for the reference timings)");
    report.device = cudaDeviceLabel();
    report.copyGbPerSecond = measureCopyBandwidth(c10::Device(c10::kCUDA)) / 1e9;
  }
#else
  if (cuda) throw InputError("this build has no CUDA support (use --device cpu for the reference timings)");
#endif
  if (!cuda) report.device = "cpu (float64 references of the kernels; dense in float32)";
  const at::Device device = cuda ? at::Device(at::kCUDA) : at::Device(at::kCPU);

  std::map<int, double> denseMs;
  const double totalWork = double(o.formats.size());
  for (size_t fi = 0; fi < o.formats.size(); ++fi) {
    const std::string& name = o.formats[fi];
    if (cancel.isCancelled()) throw Cancelled();
    std::vector<BenchLinear> step;
    std::string unavailable;
    try {
      uint64_t seed = o.seed * 1000003 + fi * 7919;
      for (int layer = 0; layer < o.shape.layers; ++layer) {
        if (cancel.isCancelled()) throw Cancelled();
        if (progress)
          progress({"bench kernels", (double(fi) + double(layer) / o.shape.layers) / totalWork,
                    name + ": building layer " + std::to_string(layer + 1) + "/" + std::to_string(o.shape.layers)});
        for (const auto& l : o.shape.linears)
          step.push_back(makeLinear(name, l, device, seed++, o.spqrOutlierFraction));
      }
    } catch (const InputError& e) {
      unavailable = e.what();
    } catch (const c10::Error& e) {
      unavailable = e.what_without_backtrace();
    }
    int64_t weightBytes = 0;
    for (const auto& l : step) weightBytes += l.weightBytes;
    for (int batch : o.batches) {
      KernelBenchResult r;
      r.format = name;
      r.batch = batch;
      if (!unavailable.empty()) {
        r.available = false;
        r.note = unavailable.substr(0, unavailable.find('\n'));
        report.results.push_back(r);
        continue;
      }
      if (progress) progress({"bench kernels", (double(fi) + 0.99) / totalWork, name + ": batch " + std::to_string(batch)});
      std::map<int64_t, at::Tensor> inputs;
      std::vector<at::Tensor> outputs;
      double ioBytes = 0;
      for (const auto& l : step) {
        if (!inputs.count(l.cols))
          inputs[l.cols] = at::randn({batch, l.cols}, at::TensorOptions().device(device).dtype(at::kFloat)).to(at::kHalf);
        const bool floatOut = !cuda && name == "dense";
        outputs.push_back(at::empty({batch, l.rows}, at::TensorOptions().device(device).dtype(floatOut ? at::kFloat : at::kHalf)));
        ioBytes += 2.0 * batch * double(l.cols + l.rows);
      }
      Timing t;
      try {
#ifdef PARETO_WITH_CUDA
        t = cuda ? timeCuda(step, inputs, outputs, o.warmup, o.runs) : timeCpu(step, inputs, outputs, std::min(o.runs, 3));
#else
        t = timeCpu(step, inputs, outputs, std::min(o.runs, 3));
#endif
      } catch (const c10::Error& e) {
        r.available = false;
        r.note = std::string(e.what_without_backtrace()).substr(0, 200);
        report.results.push_back(r);
        continue;
      } catch (const InputError& e) {
        r.available = false;
        r.note = std::string(e.what()).substr(0, 200);
        report.results.push_back(r);
        continue;
      }
      if (o.perShape) {
        try {
          for (size_t k = 0; k < o.shape.linears.size(); ++k) {
            std::vector<BenchLinear> alone;
            std::vector<at::Tensor> aloneOut;
            for (size_t i = k; i < step.size(); i += o.shape.linears.size()) {
              alone.push_back(step[i]);
              aloneOut.push_back(outputs[i]);
            }
#ifdef PARETO_WITH_CUDA
            const Timing a = cuda ? timeCuda(alone, inputs, aloneOut, o.warmup, o.runs)
                                  : timeCpu(alone, inputs, aloneOut, std::min(o.runs, 3));
#else
            const Timing a = timeCpu(alone, inputs, aloneOut, std::min(o.runs, 3));
#endif
            r.usPerGemvOfShape.emplace_back(o.shape.linears[k].name, a.medianMs * 1e3 / double(alone.size()));
          }
        } catch (const c10::Error& e) {
          r.note = "per-shape timing failed: " + std::string(e.what_without_backtrace()).substr(0, 200);
          r.usPerGemvOfShape.clear();
        }
      }
      r.msPerStep = t.medianMs;
      r.msMin = t.minMs;
      r.msMax = t.maxMs;
      r.bytesPerStep = double(weightBytes) + ioBytes;
      r.gbPerSecond = r.bytesPerStep / (r.msPerStep * 1e-3) / 1e9;
      r.fractionOfCopy = report.copyGbPerSecond > 0 ? r.gbPerSecond / report.copyGbPerSecond : 0;
      r.bitsPerWeight = 8.0 * double(weightBytes) / double(report.weightsPerStep);
      if (name == "dense") denseMs[batch] = r.msPerStep;
      if (denseMs.count(batch)) r.speedupOverDense = denseMs[batch] / r.msPerStep;
      report.results.push_back(r);
    }
  }
  if (progress) progress({"bench kernels", 1.0, "done"});
  return report;
}

nlohmann::json toJson(const KernelBenchReport& report) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& r : report.results) {
    nlohmann::json j = {{"format", r.format}, {"batch", r.batch}, {"available", r.available}};
    if (!r.note.empty()) j["note"] = r.note;
    if (r.available) {
      j["ms_per_step"] = r.msPerStep;
      j["ms_min"] = r.msMin;
      j["ms_max"] = r.msMax;
      j["bytes_per_step"] = r.bytesPerStep;
      j["gb_per_s"] = r.gbPerSecond;
      j["fraction_of_copy_bandwidth"] = r.fractionOfCopy;
      j["speedup_over_dense"] = r.speedupOverDense;
      j["bits_per_weight"] = r.bitsPerWeight;
      if (!r.usPerGemvOfShape.empty()) {
        nlohmann::json shapes = nlohmann::json::object();
        for (const auto& [name, us] : r.usPerGemvOfShape) shapes[name] = us;
        j["us_per_gemv_of_each_shape_alone"] = shapes;
      }
    }
    results.push_back(j);
  }
  return {{"device", report.device},
          {"shape", report.shape},
          {"weights_per_step", report.weightsPerStep},
          {"copy_gb_per_s", report.copyGbPerSecond},
          {"results", results}};
}

std::string toText(const KernelBenchReport& report) {
  std::ostringstream out;
  out << "device: " << report.device << "\nshape: " << report.shape << " (" << report.weightsPerStep / 1e9
      << " G weights a step)\n";
  if (report.copyGbPerSecond > 0) out << "device-to-device copy: " << int(report.copyGbPerSecond + 0.5) << " GB/s\n";
  char line[256];
  std::snprintf(line, sizeof line, "\n%-24s %5s %10s %8s %9s %8s %8s\n", "format", "batch", "ms/step", "GB/s",
                "of copy", "vs dense", "bits/w");
  out << line;
  for (const auto& r : report.results) {
    if (!r.available) {
      std::snprintf(line, sizeof line, "%-24s %5d   unavailable: %s\n", r.format.c_str(), r.batch, r.note.c_str());
    } else {
      std::snprintf(line, sizeof line, "%-24s %5d %10.3f %8.0f %8.1f%% %7.2fx %8.3f\n", r.format.c_str(), r.batch,
                    r.msPerStep, r.gbPerSecond, 100.0 * r.fractionOfCopy, r.speedupOverDense, r.bitsPerWeight);
    }
    out << line;
  }
  bool header = false;
  for (const auto& r : report.results) {
    if (r.usPerGemvOfShape.empty()) continue;
    if (!header) out << "\nµs a GEMV of each shape alone (its GEMVs of every layer back to back; on CUDA in a graph of their own):\n";
    header = true;
    out << "  " << r.format << " batch " << r.batch << ":";
    for (const auto& [name, us] : r.usPerGemvOfShape) {
      std::snprintf(line, sizeof line, "  %s %.2f", name.c_str(), us);
      out << line;
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace pareto
