#include "compress/RecipeEstimate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>

#include <ATen/ATen.h>

#include "compress/ModulePlan.h"
#include "compress/Recipe.h"
#include "model/Device.h"
#include "model/ModelSummary.h"
#include "util/Error.h"

namespace pareto {
namespace {

const std::string kWeightSuffix = ".weight";

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The linears the compress job visits: the 2-D weights of the decoder blocks.
bool isBlockLinear(const TensorSummary& t) {
  return t.shape.size() == 2 && endsWith(t.name, kWeightSuffix) && t.name.find(".layers.") != std::string::npos;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

struct ModuleLayout {
  ModuleEstimate estimate;
  std::string problem;   // non-empty: the job would refuse this module
  std::string note;
};

// Weights an unstructured prune keeps in a [rows, cols] weight, counted as compress/PruneMask.cpp counts them:
// exactly floor(s · count) removed per scope (magnitude: the whole tensor; Wanda: each row; SparseGPT: each
// lazy-update block of columns). SpQR's outlier ratio is a share of these.
int64_t removedCount(double sparsity, int64_t count) { return int64_t(std::floor(sparsity * double(count) + 1e-9)); }

int64_t unstructuredKept(const PruneSpec& prune, int64_t rows, int64_t cols) {
  const double s = prune.pattern.sparsity();
  if (prune.method == "wanda") return rows * (cols - removedCount(s, cols));
  if (prune.method == "sparsegpt") {
    int64_t kept = 0;
    for (int64_t c = 0; c < cols; c += prune.block) {
      const int64_t n = rows * std::min(prune.block, cols - c);
      kept += n - removedCount(s, n);
    }
    return kept;
  }
  return rows * cols - removedCount(s, rows * cols);   // magnitude
}

ModuleLayout layoutOf(const TensorSummary& t, const Recipe& recipe) {
  ModuleLayout out;
  ModuleEstimate& e = out.estimate;
  e.module = t.name.substr(0, t.name.size() - kWeightSuffix.size());
  const int64_t rows = t.shape[0], cols = t.shape[1];
  e.weights = rows * cols;
  e.format = "dense";
  e.kernel = "dense";
  e.bytes = t.bytes;
  const int64_t valueBytes = e.weights ? int64_t(t.bytes) / e.weights : 0;   // the checkpoint's dtype
  try {
    const ModulePlan plan = planModule(recipe, e.module, rows, cols);
    int64_t outliers = 0;
    if (plan.format.values == WeightFormat::Values::Spqr) {
      if (plan.quant->outlierRatio >= 0) {
        // A share of the weights pruning kept: N of every M (packed as a bitmask or not), or the unstructured
        // count of the pruning method.
        int64_t kept = e.weights;
        if (plan.prune)
          kept = plan.prune->pattern.isNM() ? e.weights / plan.prune->pattern.m() * plan.prune->pattern.n()
                                            : unstructuredKept(*plan.prune, rows, cols);
        outliers = std::llround(plan.quant->outlierRatio * double(kept));
      } else {
        out.note = "SpQR with an outlier threshold: outliers are only known after the run, estimated without them";
      }
    }
    // Deduplicated across modules: one line per kind of GGUF fallback, one per narrowed group and row width.
    if (!plan.note.empty())
      out.note = plan.quant && plan.quant->format ? plan.note.substr(0, plan.note.find(':')) +
                                                        " on modules whose input columns are not whole 256-weight "
                                                        "super-blocks"
                                                  : plan.note;
    e.format = plan.format.name();
    e.kernel = plan.format.kernel();
    e.bytes = plan.format.isDense() ? t.bytes : plan.storedBytes(valueBytes, outliers);
  } catch (const InputError& err) {
    out.problem = err.what();
    e.format = "dense";
    e.kernel = "dense";
    e.bytes = t.bytes;
  }
  return out;
}

void addOnce(std::vector<std::string>& list, const std::string& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

std::string dateOf(double secondsSinceEpoch) {
  const std::time_t t = std::time_t(secondsSinceEpoch);
  std::tm local{};
  localtime_r(&t, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d", &local);
  return text;
}

std::string gbPerSecondText(double bytesPerSecond) {
  char text[32];
  const double gb = bytesPerSecond / 1e9;
  std::snprintf(text, sizeof text, gb >= 100 ? "%.0f GB/s" : "%.3g GB/s", gb);
  return text;
}

// "bench kernels on NVIDIA H200 (132 SMs), 2025-03-01 (dense 3890 GB/s, bitmask-2:4 3012 GB/s)".
std::string kernelSource(const std::vector<const KernelMeasurement*>& used) {
  double first = 0, last = 0;
  std::string rates;
  for (const KernelMeasurement* m : used) {
    if (m->recordedAt > 0) {
      first = first > 0 ? std::min(first, m->recordedAt) : m->recordedAt;
      last = std::max(last, m->recordedAt);
    }
    rates += (rates.empty() ? "" : ", ") + m->kernel + " " + gbPerSecondText(m->bytesPerSecond);
  }
  std::string text = "bench kernels on " + used.front()->device;
  if (last > 0) {
    const std::string a = dateOf(first), b = dateOf(last);
    text += ", " + (a == b ? a : a + " to " + b);
  }
  return text + " (" + rates + ")";
}

// Seconds per token with every module read at its kernel's measured bandwidth and the rest (output head,
// norms) at the dense kernel's; fills the estimate's kernel fields. False when the measurements do not cover it.
bool predictFromKernels(RecipeEstimate& r, const std::vector<KernelMeasurement>& kernels) {
  std::map<std::string, const KernelMeasurement*> measured;
  for (const KernelMeasurement& k : kernels)
    if (std::isfinite(k.bytesPerSecond) && k.bytesPerSecond > 0) measured.emplace(k.kernel, &k);   // first: newest
  for (const std::string& k : r.kernels)
    if (measured.count(k) == 0) r.unmeasuredKernels.push_back(k);
  if (!r.unmeasuredKernels.empty() || !r.unbenchmarkable.empty()) return false;
  const KernelMeasurement* dense = measured.at("dense");
  double seconds = 0;
  uint64_t linearBytes = 0;
  for (const ModuleEstimate& m : r.modules) {
    seconds += double(m.bytes) / measured.at(m.kernel)->bytesPerSecond;
    linearBytes += m.bytes;
  }
  seconds += double(r.bytesPerToken - std::min(r.bytesPerToken, linearBytes)) / dense->bytesPerSecond;
  const double denseSeconds = double(r.denseBytesPerToken) / dense->bytesPerSecond;
  if (seconds <= 0 || denseSeconds <= 0) return false;
  r.tokensPerSecond = 1.0 / seconds;
  r.denseTokensPerSecond = 1.0 / denseSeconds;
  std::vector<const KernelMeasurement*> used;
  for (const std::string& k : r.kernels) used.push_back(measured.at(k));
  r.bandwidthSource = kernelSource(used);
  r.fromKernelBenchmarks = true;
  return true;
}

}  // namespace

bool benchmarkDeviceMatches(const std::string& recordedDevice, const std::string& deviceName) {
  if (deviceName.empty() || recordedDevice.rfind("cpu", 0) == 0 || deviceName == "cpu") return false;
  return recordedDevice == deviceName || recordedDevice.rfind(deviceName + " (", 0) == 0;
}

std::vector<KernelMeasurement> selectKernelMeasurements(const std::vector<KernelMeasurement>& newestFirst,
                                                        const std::string& deviceName) {
  std::vector<KernelMeasurement> chosen;
  for (const KernelMeasurement& m : newestFirst) {
    if (m.batch != 1 || !std::isfinite(m.bytesPerSecond) || m.bytesPerSecond <= 0) continue;
    if (!benchmarkDeviceMatches(m.device, deviceName)) continue;
    const bool seen =
        std::any_of(chosen.begin(), chosen.end(), [&](const KernelMeasurement& c) { return c.kernel == m.kernel; });
    if (!seen) chosen.push_back(m);
  }
  return chosen;
}

std::string gemvShapeText(int64_t rows, int64_t cols, const std::string& what) {
  return "gemv " + std::to_string(rows) + "x" + std::to_string(cols) + (what.empty() ? "" : " (" + what + ")");
}

bool parseGemvShape(const std::string& shape, int64_t& rows, int64_t& cols) {
  long long r = 0, c = 0;
  int used = 0;
  if (shape.rfind("gemv ", 0) != 0 || std::sscanf(shape.c_str(), "gemv %lldx%lld%n", &r, &c, &used) != 2) return false;
  if (r <= 0 || c <= 0 || (used < int(shape.size()) && shape[size_t(used)] != ' ')) return false;
  rows = r;
  cols = c;
  return true;
}

std::vector<KernelMeasurement> selectGemvMeasurements(const std::vector<KernelMeasurement>& newestFirst,
                                                      const std::string& deviceName) {
  std::vector<KernelMeasurement> chosen;
  for (const KernelMeasurement& m : newestFirst) {
    int64_t rows = 0, cols = 0;
    if (m.batch != 1 || !(m.secondsPerCall > 0) || !std::isfinite(m.secondsPerCall)) continue;
    if (!parseGemvShape(m.shape, rows, cols) || !benchmarkDeviceMatches(m.device, deviceName)) continue;
    const bool seen = std::any_of(chosen.begin(), chosen.end(), [&](const KernelMeasurement& c) {
      int64_t r = 0, k = 0;
      return c.kernel == m.kernel && parseGemvShape(c.shape, r, k) && r == rows && k == cols;
    });
    if (!seen) chosen.push_back(m);
  }
  return chosen;
}

double linearStepTokensPerSecond(double msPerStep, int benchLayers, int64_t modelLayers) {
  if (!(msPerStep > 0) || benchLayers <= 0 || modelLayers <= 0) return 0;
  return 1000.0 / (msPerStep * double(modelLayers) / double(benchLayers));
}

RecipeEstimate estimateRecipe(const Recipe& recipe, const ModelSummary& model, const DecodeBandwidth& bandwidth) {
  if (model.compressed)
    throw InputError(fileMessage(model.path, "is already a compressed folder; estimates and runs start from the "
                                             "dense source model"));
  RecipeEstimate r;
  r.bandwidthSource = bandwidth.source;
  uint64_t linearBytes = 0, denseLinearBytes = 0;
  int64_t linearWeights = 0;
  std::vector<std::string> notes;
  for (const TensorSummary& t : model.tensors) {
    const int64_t n = numel(t.shape);
    r.parameters += n;
    r.denseModelBytes += t.bytes;
    uint64_t bytes = t.bytes;
    if (isBlockLinear(t)) {
      ModuleLayout layout = layoutOf(t, recipe);
      if (!layout.problem.empty()) r.problems.push_back(layout.problem);
      if (!layout.note.empty() && std::find(notes.begin(), notes.end(), layout.note) == notes.end())
        notes.push_back(layout.note);
      bytes = layout.estimate.bytes;
      linearBytes += bytes;
      denseLinearBytes += t.bytes;
      linearWeights += n;
      r.modules.push_back(layout.estimate);
    }
    r.modelBytes += bytes;
    // A decode step reads each block weight and the output head in full; of the embedding it reads one row,
    // unless the head is tied to it (then the head's read is the embedding's).
    const bool embedding = t.name.find("embed_tokens") != std::string::npos;
    if (!embedding || model.tiedEmbeddings) {
      r.bytesPerToken += bytes;
      r.denseBytesPerToken += t.bytes;
    }
  }
  if (recipe.headQuantize) {
    // The head compress stores as its own packed tensor: it replaces the dense head's read in every step and,
    // when the checkpoint ties it to the embedding, adds its weights and bytes beside the embedding (kept dense).
    const TensorSummary* source = nullptr;
    for (const TensorSummary& t : model.tensors)
      if (t.name == (model.tiedEmbeddings ? "model.embed_tokens.weight" : "lm_head.weight")) source = &t;
    if (source != nullptr && source->shape.size() == 2) {
      TensorSummary head = *source;
      head.name = "lm_head.weight";
      const ModuleLayout layout = layoutOf(head, recipe);
      if (!layout.problem.empty()) r.problems.push_back(layout.problem);
      if (!layout.note.empty()) notes.push_back("lm_head: " + layout.note);
      const uint64_t bytes = layout.estimate.bytes;
      r.modules.push_back(layout.estimate);   // read at its kernel's bandwidth, listed as compress lists it
      r.bytesPerToken = r.bytesPerToken - source->bytes + bytes;
      if (model.tiedEmbeddings) {
        r.modelBytes += bytes;
        r.parameters += numel(source->shape);
      } else {
        r.modelBytes = r.modelBytes - source->bytes + bytes;
      }
    }
  }
  r.kernels = {"dense"};
  for (const ModuleEstimate& m : r.modules) {
    if (m.kernel.empty())
      addOnce(r.unbenchmarkable, m.format);
    else
      addOnce(r.kernels, m.kernel);
  }
  r.linearBitsPerWeight = linearWeights ? 8.0 * double(linearBytes) / double(linearWeights) : 0;
  r.denseLinearBitsPerWeight = linearWeights ? 8.0 * double(denseLinearBytes) / double(linearWeights) : 0;
  r.modelBitsPerWeight = r.parameters ? 8.0 * double(r.modelBytes) / double(r.parameters) : 0;
  r.denseModelBitsPerWeight = r.parameters ? 8.0 * double(r.denseModelBytes) / double(r.parameters) : 0;
  if (!bandwidth.kernels.empty() && r.bytesPerToken > 0 && !predictFromKernels(r, bandwidth.kernels)) {
    std::string missing;
    for (const auto& k : r.unmeasuredKernels) missing += (missing.empty() ? "" : ", ") + k;
    for (const auto& f : r.unbenchmarkable) missing += (missing.empty() ? "" : ", ") + f + " (no kernel)";
    notes.push_back("the kernel benchmarks of this device lack " + missing +
                    ": tokens/s is estimated from bytes / bandwidth");
  }
  r.notes = notes;
  if (!r.fromKernelBenchmarks && bandwidth.bytesPerSecond > 0 && r.bytesPerToken > 0) {
    r.tokensPerSecond = bandwidth.bytesPerSecond / double(r.bytesPerToken);
    r.denseTokensPerSecond = bandwidth.bytesPerSecond / double(r.denseBytesPerToken);
  }
  return r;
}

}  // namespace pareto
