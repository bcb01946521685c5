#include "decode/DecodeBenchmark.h"

#include "runtime/CopyBandwidth.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>

#include "checkpoint/ModelPresets.h"
#include "decode/DecodeModel.h"
#include "decode/DecodeSession.h"
#include "model/LoadedModel.h"
#include "model/OutOfMemory.h"
#include "runtime/KernelBenchmark.h"
#include "runtime/PackedLinear.h"
#include "util/Error.h"

#ifdef PARETO_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#endif

namespace pareto {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Milliseconds of `steps` decode steps, measured on the device (CUDA events) or the host clock (CPU).
double timeSteps(DecodeSession& session, int64_t steps, bool cuda) {
#ifdef PARETO_WITH_CUDA
  if (cuda) {
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    cudaEventRecord(start, stream);
    for (int64_t i = 0; i < steps; ++i) session.step();
    cudaEventRecord(stop, stream);
    const cudaError_t e = cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (e != cudaSuccess) throw Error(std::string("decode step failed on the GPU: ") + cudaGetErrorString(e));
    return ms;
  }
#endif
  (void)cuda;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) session.step();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double linearBitsPerWeight(const DecodeModel& m) {
  double bytes = 0, weights = 0;
  for (int64_t i = 0; i < m.numLayers(); ++i) {
    const DecodeLayer& L = m.layer(i);
    for (const FusedLinear* f : {&L.qkv, &L.o, &L.gateUp, &L.down}) {
      for (const auto& p : f->parts) {
        bytes += double(p.weightBytes() - (p.bias().defined() ? p.bias().numel() * p.bias().element_size() : 0));
        weights += double(p.rows()) * double(p.cols());
      }
    }
  }
  return weights > 0 ? 8.0 * bytes / weights : 0;
}

}  // namespace

DecodeBenchReport runDecodeBenchmark(const DecodeBenchOptions& o, const ProgressCallback& progress,
                                     const CancelToken& cancel) {
  if (o.modelDir.empty() == o.synthetic.empty())
    throw InputError("bench decode needs either --model DIR or --synthetic NAME");
  if (!o.modelDir.empty() && !(o.formats.size() == 1 && o.formats[0] == "dense"))
    throw InputError("--format applies to synthetic models; a model folder runs in the formats it stores");
  for (const auto& f : o.formats) checkPackedFormatName(f);
  if (o.headFormat != "dense") {
    if (!o.modelDir.empty())
      throw InputError("--head-format applies to synthetic models; a model folder runs the head it stores");
    checkPackedFormatName(o.headFormat);
  }
  if (o.newTokens < 1) throw InputError("--new-tokens must be at least 1");
  if (o.runs < 1) throw InputError("--runs must be at least 1");
  if (o.batches.empty() || o.contexts.empty()) throw InputError("no batch sizes or contexts given");
  for (int64_t b : o.batches)
    if (b < 1 || b > 16) throw InputError("batch " + std::to_string(b) + " is outside 1..16");
  for (int64_t c : o.contexts)
    if (c < 0) throw InputError("context must be >= 0, got " + std::to_string(c));
  const bool cuda = o.device == "cuda";
  std::optional<ModelConfig> preset;
  if (!o.synthetic.empty()) preset = modelPreset(o.synthetic);
  if (o.layers < 0) throw InputError("--layers must be >= 0");
  if (preset && o.layers > preset->numLayers)
    throw InputError("--layers " + std::to_string(o.layers) + ": " + o.synthetic + " has " +
                     std::to_string(preset->numLayers) + " layers; --layers times fewer of them (0: all)");
  if (preset) {
    // The KV cache holds context + new tokens positions; past the model's positions RoPE has no meaning.
    for (int64_t c : o.contexts)
      if (c > preset->maxPositionEmbeddings || o.newTokens > preset->maxPositionEmbeddings - c)
        throw InputError("--context " + std::to_string(c) + " plus --new-tokens " + std::to_string(o.newTokens) +
                         " exceed " + o.synthetic + "'s " + std::to_string(preset->maxPositionEmbeddings) +
                         " positions; lower either");
  }
  // float16 where it runs (CUDA); LibTorch has no float16 matrix products on the CPU.
  RuntimeOptions rt = makeRuntimeOptions(o.device, !o.dtype.empty() ? o.dtype : cuda ? "float16" : "bfloat16");
  rt.packedWeights = true;
  const bool graph = cuda && o.useGraph;
  SamplingOptions sampling;
  sampling.greedy = o.temperature == 0;
  sampling.temperature = sampling.greedy ? 1.0 : o.temperature;
  sampling.topK = o.topK;
  sampling.topP = o.topP;
  if (!sampling.greedy || o.topK != 0 || o.topP != 1.0) {
    if (sampling.greedy) throw InputError("--top-k and --top-p need a --temperature (sampling); without one the "
                                          "token is the argmax");
    validate(sampling);
  }

  DecodeBenchReport report;
  report.mode = graph ? "CUDA graph" : cuda ? "eager (CUDA)" : "eager (CPU references of the kernels)";
  {
    std::ostringstream s;
    if (sampling.greedy)
      s << "greedy";
    else
      s << "temperature " << sampling.temperature << ", top-k " << sampling.topK << ", top-p " << sampling.topP;
    report.sampling = s.str();
  }
  if (cuda) {
    report.device = cudaDeviceLabel();
    report.copyGbPerSecond = measureCopyBandwidth(c10::Device(c10::kCUDA)) / 1e9;
  } else {
    report.device = "cpu";
  }

  if (preset) {
    report.model = o.synthetic + (o.layers > 0 ? " (" + std::to_string(o.layers) + " layers)" : "") +
                   (o.headFormat != "dense" ? ", lm_head " + o.headFormat : "");
  } else {
    report.model = o.modelDir;
  }
  const std::vector<std::string> formats = preset ? o.formats : std::vector<std::string>{""};
  const double work = double(formats.size() * o.batches.size() * o.contexts.size());
  double done = 0;
  std::map<std::pair<int64_t, int64_t>, double> denseTps;

  for (const std::string& format : formats) {
    if (cancel.isCancelled()) throw Cancelled();
    std::optional<DecodeModel> model;
    std::string unavailable;
    try {
      if (preset) {
        DecodeModel::SyntheticOptions s;
        s.format = format;
        s.headFormat = o.headFormat;
        s.layers = o.layers;
        s.seed = o.seed;
        s.spqrOutlierFraction = o.spqrOutlierFraction;
        model = guardMemory("synthetic model " + o.synthetic + " (" + format + ")",
                            "use fewer --layers or a smaller model", [&] {
                              return DecodeModel::synthetic(*preset, s, rt, [&](const ProgressUpdate& u) {
                                if (progress) progress({"bench decode", done / work, format + ": " + u.message});
                              });
                            });
      } else {
        if (progress) progress({"bench decode", 0.0, "loading " + o.modelDir});
        LoadedModel loaded = loadModel(o.modelDir, rt, WeightResidency::Whole, {}, &cancel);
        model = DecodeModel::fromModel(*loaded.model);
        report.notes = model->notes();
      }
    } catch (const InputError& e) {
      if (!preset) throw;
      unavailable = e.what();
    } catch (const OutOfMemory& e) {   // a larger format may not fit where a smaller one does
      if (!preset) throw;
      unavailable = e.what();
    } catch (const c10::Error& e) {
      if (!preset) throw;
      unavailable = e.what_without_backtrace();
    }
    const std::string label = preset ? format : (model ? model->formatSummary() : "");
    const double bpw = model ? linearBitsPerWeight(*model) : 0;
    for (int64_t context : o.contexts) {
      for (int64_t batch : o.batches) {
        if (cancel.isCancelled()) throw Cancelled();
        DecodeBenchResult r;
        r.format = label;
        r.batch = batch;
        r.context = context;
        r.newTokens = o.newTokens;
        r.bitsPerWeight = bpw;
        if (!unavailable.empty()) {
          r.available = false;
          r.note = unavailable.substr(0, unavailable.find('\n'));
          report.results.push_back(r);
          done += 1;
          continue;
        }
        if (progress)
          progress({"bench decode", done / work,
                    label + ": batch " + std::to_string(batch) + ", context " + std::to_string(context)});
        try {
          // The KV cache (batch × (context + new tokens)) is what runs out first: one configuration fails, the
          // smaller ones still run.
          guardMemory("decode at batch " + std::to_string(batch) + ", context " + std::to_string(context),
                      "lower --batch or --context", [&] {
            DecodeSession session(*model, batch, context + o.newTokens);
            session.setSampling(sampling);
            if (graph) session.capture();
            if (preset) {
              session.fillRandomContext(context, o.seed);
            } else {
              // A real prompt of `context` random tokens, fed one per step (prefill is not timed).
              at::Tensor prompt = at::randint(model->config().vocabSize, {context}, at::TensorOptions().dtype(at::kLong));
              for (int64_t s = 0; s < context; ++s) {
                session.feed(std::vector<int64_t>(size_t(batch), prompt[s].item<int64_t>()),
                             std::vector<int64_t>(size_t(batch), s), std::vector<int64_t>(size_t(batch), 0));
                session.step();
              }
            }
            const DecodeSession::Snapshot start = session.snapshot();
            const int64_t weightBytes = model->weightBytesPerStep(batch);
            const int64_t kvStart = session.kvBytesPerStep();
            std::vector<double> ms;
            const int runs = cuda ? o.runs : std::min(o.runs, 3);
            for (int i = 0; i < o.warmup + runs; ++i) {
              if (cancel.isCancelled()) throw Cancelled();
              session.restore(start);
              const double t = timeSteps(session, o.newTokens, cuda);
              if (i >= o.warmup) ms.push_back(t);
            }
            const double perStepKv = double(kvStart) / double(context + 1) * (double(context) + double(o.newTokens + 1) / 2);
            const double runMs = median(ms);
            r.msPerToken = runMs / double(o.newTokens);
            r.msPerTokenMin = *std::min_element(ms.begin(), ms.end()) / double(o.newTokens);
            r.msPerTokenMax = *std::max_element(ms.begin(), ms.end()) / double(o.newTokens);
            r.tokensPerSecond = double(batch) * double(o.newTokens) / (runMs * 1e-3);
            r.bytesPerStep = double(weightBytes) + perStepKv;
            r.bytesPerToken = r.bytesPerStep / double(batch);
            r.gbPerSecond = r.bytesPerStep / (r.msPerToken * 1e-3) / 1e9;
            r.fractionOfCopy = report.copyGbPerSecond > 0 ? r.gbPerSecond / report.copyGbPerSecond : 0;
            if (o.breakdown) {
              // Each part alone in its own graph, from the same starting state (values are then meaningless).
              const std::vector<std::pair<std::string, unsigned>> parts = {
                  {"linears", DecodeSession::kLinears},
                  {"attention", DecodeSession::kAttention},
                  {"norms+activation", DecodeSession::kNormsAndActivation},
                  {"head", DecodeSession::kHead}};
              for (const auto& [partName, mask] : parts) {
                DecodeSession part(*model, batch, context + o.newTokens);
                part.setParts(mask);
                part.setSampling(sampling);
                if (graph) part.capture();
                part.restore(start);
                std::vector<double> partRuns;
                for (int i = 0; i < o.warmup + runs; ++i) {
                  part.restore(start);
                  const double t = timeSteps(part, o.newTokens, cuda);
                  if (i >= o.warmup) partRuns.push_back(t / double(o.newTokens));
                }
                r.partMs.emplace_back(partName, median(partRuns));
              }
            }
          });
          if (format == "dense") denseTps[{batch, context}] = r.tokensPerSecond;
          if (auto it = denseTps.find({batch, context}); it != denseTps.end())
            r.speedupOverDense = r.tokensPerSecond / it->second;
        } catch (const OutOfMemory& e) {
          r.available = false;
          r.note = std::string(e.what()).substr(0, 300);
        } catch (const InputError& e) {
          r.available = false;
          r.note = std::string(e.what()).substr(0, 300);
        } catch (const c10::Error& e) {
          r.available = false;
          r.note = std::string(e.what_without_backtrace()).substr(0, 300);
        }
        report.results.push_back(r);
        done += 1;
      }
    }
  }
  if (progress) progress({"bench decode", 1.0, "done"});
  return report;
}

nlohmann::json toJson(const DecodeBenchReport& report) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& r : report.results) {
    nlohmann::json j = {{"format", r.format}, {"batch", r.batch}, {"context", r.context},
                        {"new_tokens", r.newTokens}, {"available", r.available}};
    if (!r.note.empty()) j["note"] = r.note;
    if (r.available) {
      j["tokens_per_second"] = r.tokensPerSecond;
      j["ms_per_token"] = r.msPerToken;
      j["ms_per_token_min"] = r.msPerTokenMin;
      j["ms_per_token_max"] = r.msPerTokenMax;
      j["bytes_per_step"] = r.bytesPerStep;
      j["bytes_per_token"] = r.bytesPerToken;
      j["gb_per_s"] = r.gbPerSecond;
      j["fraction_of_copy_bandwidth"] = r.fractionOfCopy;
      if (r.speedupOverDense > 0) j["speedup_over_dense"] = r.speedupOverDense;
      j["bits_per_weight"] = r.bitsPerWeight;
      if (!r.partMs.empty()) {
        nlohmann::json parts = nlohmann::json::object();
        for (const auto& [name, ms] : r.partMs) parts[name] = ms;
        j["ms_per_step_of_each_part_alone"] = parts;
      }
    }
    results.push_back(j);
  }
  return {{"device", report.device}, {"model", report.model}, {"mode", report.mode}, {"sampling", report.sampling},
          {"copy_gb_per_s", report.copyGbPerSecond}, {"notes", report.notes}, {"results", results}};
}

std::string toText(const DecodeBenchReport& report) {
  std::ostringstream out;
  out << "device: " << report.device << "\nmodel: " << report.model << "\nmode: " << report.mode << "\n";
  if (!report.sampling.empty() && report.sampling != "greedy") out << "sampling: " << report.sampling << "\n";
  if (report.copyGbPerSecond > 0) out << "device-to-device copy: " << int(report.copyGbPerSecond + 0.5) << " GB/s\n";
  for (const auto& n : report.notes) out << "note: " << n << "\n";
  char line[320];
  std::snprintf(line, sizeof line, "\n%-24s %5s %7s %10s %9s %9s %8s %8s %8s %7s\n", "format", "batch", "context",
                "tok/s", "ms/token", "MB/token", "GB/s", "of copy", "vs dense", "bits/w");
  out << line;
  for (const auto& r : report.results) {
    if (!r.available) {
      std::snprintf(line, sizeof line, "%-24s %5lld %7lld   unavailable: %s\n", r.format.c_str(), (long long)r.batch,
                    (long long)r.context, r.note.c_str());
    } else {
      const std::string vs = r.speedupOverDense > 0 ? std::to_string(r.speedupOverDense).substr(0, 4) + "x" : "-";
      std::snprintf(line, sizeof line, "%-24s %5lld %7lld %10.1f %9.3f %9.1f %8.0f %7.1f%% %8s %7.3f\n",
                    r.format.c_str(), (long long)r.batch, (long long)r.context, r.tokensPerSecond, r.msPerToken,
                    r.bytesPerToken / 1e6, r.gbPerSecond, 100.0 * r.fractionOfCopy, vs.c_str(), r.bitsPerWeight);
    }
    out << line;
  }
  bool header = false;
  for (const auto& r : report.results) {
    if (r.partMs.empty()) continue;
    if (!header) out << "\nms per step of each part alone (its own graph):\n";
    header = true;
    out << "  " << r.format << " batch " << r.batch << " context " << r.context << ":";
    for (const auto& [name, ms] : r.partMs) out << "  " << name << " " << ms;
    out << "  (whole step " << r.msPerToken << ")\n";
  }
  return out.str();
}

}  // namespace pareto
