// LibTorch first: its headers use `slots` as an identifier, which Qt's headers define as a macro.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "app/gui/BenchmarkWorker.h"

#include <QFileInfo>
#include <QLocale>
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "compress/Recipe.h"
#include "decode/DecodeBenchmark.h"
#include "jobs/BenchmarkRecords.h"
#include "runtime/CopyBandwidth.h"
#include "model/Device.h"
#include "model/ModelSummary.h"
#include "runtime/PackedLinear.h"
#include "store/ExperimentStore.h"
#include "store/ModelIdentity.h"
#include "util/Error.h"
#include "util/Version.h"

namespace pareto {

namespace {

std::string str(const QString& s) { return s.toStdString(); }
QString qs(const std::string& s) { return QString::fromStdString(s); }

// How many of the store's newest bench runs are read for measurements (each is a few rows).
constexpr int kBenchRunsRead = 200;

// Whether this build has the CUDA kernels (runtime/KernelBenchmark.h refuses "cuda" without them).
#ifdef PARETO_WITH_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

}  // namespace

ModelShape benchmarkShapeOf(const ModelSummary& m, const std::string& name) {
  const int64_t headDim = m.headDim > 0 ? m.headDim : (m.numHeads > 0 ? m.hiddenSize / m.numHeads : 0);
  const int64_t kvHeads = m.numKvHeads > 0 ? m.numKvHeads : m.numHeads;
  if (m.numLayers <= 0 || m.hiddenSize <= 0 || m.intermediateSize <= 0 || m.numHeads <= 0 || headDim <= 0)
    throw InputError(fileMessage(m.path, "config.json lacks the sizes of a decoder layer (layers, hidden, "
                                         "intermediate, heads) needed for the kernel benchmark's shapes"));
  return decodeStepShape(name, int(m.numLayers), m.hiddenSize, m.intermediateSize, m.numHeads, kvHeads, headDim);
}

QString benchmarkDeviceName(const ComputeDevice& d) {
  if (d.id == "cpu") return QStringLiteral("cpu");
  const QString suffix = QStringLiteral(" (%1)").arg(d.id);
  return d.label.endsWith(suffix) ? d.label.chopped(suffix.size()) : d.label;
}

BenchmarkWorker::BenchmarkWorker() {
  qRegisterMetaType<pareto::BenchmarkPoint>();
  qRegisterMetaType<pareto::BenchmarkSession>();
  qRegisterMetaType<pareto::RunPrediction>();
  qRegisterMetaType<QVector<pareto::RunPrediction>>();
  qRegisterMetaType<std::vector<pareto::KernelMeasurement>>();
}

BenchmarkWorker::~BenchmarkWorker() = default;

ExperimentStore* BenchmarkWorker::store(QString* error) {
  if (!store_ && storeError_.isEmpty()) {
    try {
      store_ = std::make_unique<ExperimentStore>(str(QFileInfo(qs(defaultStorePath())).absoluteFilePath()));
    } catch (const std::exception& e) {
      storeError_ = qs(e.what());
    }
  }
  if (!store_ && error) *error = storeError_;
  return store_.get();
}

QStringList decodeFormatsOf(const QStringList& kernelFormats, QStringList* left) {
  QStringList formats{QStringLiteral("dense")};
  for (const QString& f : kernelFormats) {
    if (formats.contains(f)) continue;
    try {
      checkPackedFormatName(str(f));
      formats << f;
    } catch (const InputError&) {
      if (left) *left << f;   // e.g. cusparselt-2:4: a baseline of the kernel benchmark, not a weight format
    }
  }
  return formats;
}

void BenchmarkWorker::run(const BenchmarkRequest& request) { runSession(request); }

void BenchmarkWorker::runSession(const BenchmarkRequest& request) {
  const CancelToken none;
  const CancelToken& cancel = request.cancel ? *request.cancel : none;
  const bool doKernels = request.kind != BenchmarkRequest::Kind::Decode;
  const bool doDecode = request.kind != BenchmarkRequest::Kind::Kernels;
  const bool synthetic = !request.synthetic.isEmpty();
  int done = 0, expected = 0;
  try {
    // Where it runs: the GPU's kernels when CUDA is there, otherwise the float64 CPU references.
    BenchmarkSession session;
    session.device = request.deviceLabel;
    const bool wantsCuda = request.device.startsWith("cuda");
    const bool cudaDevice = torch::cuda::is_available();
    const bool cuda = wantsCuda && cudaDevice && kCudaBuild;
    std::optional<c10::DeviceGuard> guard;
    if (cuda) guard.emplace(parseDevice(str(request.device)));
    session.cpuReference = !cuda;

    KernelBenchOptions options;
    options.shape = request.shape;
    options.device = cuda ? "cuda" : "cpu";
    options.runs = cuda ? request.gpuRuns : request.cpuRuns;
    options.warmup = cuda ? 5 : 1;
    if (!cuda) options.shape.layers = std::max(1, std::min(options.shape.layers, request.cpuLayers));
    const int modelLayers = request.shape.layers;

    // The decode loop: one call per synthetic format (each result streams in), one call for a folder.
    DecodeBenchOptions decode;
    decode.modelDir = str(request.modelDir);
    decode.synthetic = str(request.synthetic);
    decode.device = cuda ? "cuda" : "cpu";
    decode.contexts = {cuda ? request.gpuDecodeContext : request.cpuDecodeContext};
    decode.newTokens = cuda ? request.gpuDecodeNewTokens : request.cpuDecodeNewTokens;
    decode.runs = cuda ? request.gpuDecodeRuns : request.cpuDecodeRuns;
    decode.warmup = cuda ? 1 : 0;
    decode.batches = {1};
    if (synthetic && !cuda && request.cpuDecodeLayers > 0)
      decode.layers = std::min<int64_t>(request.cpuDecodeLayers, modelLayers > 0 ? modelLayers : request.cpuDecodeLayers);
    const QStringList decodeTargets =
        !doDecode ? QStringList() : synthetic ? request.decodeFormats : QStringList{QString()};

    if (!cuda) {
      const QString why = !kCudaBuild   ? tr("This build has no CUDA kernels")
                          : !cudaDevice ? tr("No CUDA device on this machine")
                                        : tr("The CPU is the current device");
      QStringList what;
      if (doKernels)
        what << tr("timing the kernels' float64 CPU references over %1 layer(s), %2 runs each")
                    .arg(options.shape.layers)
                    .arg(request.cpuRuns);
      if (doDecode) what << tr("running the decode loop eagerly through them with tiny settings");
      session.note = tr("%1: %2. They are recorded but never used to predict tokens/s.").arg(why, what.join(tr(", then ")));
    }
    QString shapeName = qs(options.shape.name);
    if (doKernels) {
      QStringList parts;
      for (const auto& l : options.shape.linears) parts << qs(l.name);
      session.shape = tr("%1: %2 of %3 layers (%4)")
                          .arg(shapeName)
                          .arg(options.shape.layers)
                          .arg(modelLayers)
                          .arg(parts.join(", "));
    } else {
      session.shape = synthetic ? request.synthetic : QFileInfo(request.modelDir).fileName();
    }
    if (doKernels && !request.unbenchmarkable.isEmpty())
      session.note += (session.note.isEmpty() ? "" : " ") +
                      tr("No kernel runs %1: not measured.").arg(request.unbenchmarkable.join(", "));
    if (doDecode) {
      const QString model =
          synthetic ? (decode.layers > 0 ? tr("%1 (%2 of %3 layers)").arg(request.synthetic).arg(decode.layers).arg(modelLayers)
                                         : request.synthetic)
                    : tr("%1 as stored").arg(QFileInfo(request.modelDir).fileName());
      session.decodeShape = tr("%1 · context %2 · %3 new tokens · %4 run(s) · %5")
                                .arg(model)
                                .arg(decode.contexts.front())
                                .arg(decode.newTokens)
                                .arg(decode.runs)
                                .arg(cuda ? tr("CUDA graph") : tr("eager (CPU references)"));
      if (synthetic && !request.notDecodable.isEmpty())
        session.note += (session.note.isEmpty() ? "" : " ") +
                        tr("The decode loop has no weight format for %1: not run.").arg(request.notDecodable.join(", "));
    }
    expected = (doKernels ? int(request.formats.size()) : 0) + int(decodeTargets.size());
    session.formats = expected;
    // The ceiling line: the device's copy bandwidth, (read + written bytes) / time, as core measures it.
    session.copyGbPerSecond = measureCopyBandwidth(parseDevice(cuda ? str(request.device) : "cpu")) / 1e9;
    emit started(session);

    std::vector<BenchmarkRow> rows;
    std::string recordedDevice;
    const double total = double(std::max(1, expected));
    auto progressFrom = [this, total, &done](const ProgressUpdate& u) {
      emit progress((double(done) + std::clamp(u.fraction, 0.0, 1.0)) / total, qs(u.message));
    };

    // Kernels, format by format, so that each result is shown when it is measured.
    double denseMs = 0;
    for (int i = 0; doKernels && i < request.formats.size(); ++i) {
      if (cancel.isCancelled()) throw Cancelled();
      options.formats = {str(request.formats[i])};
      const KernelBenchReport report = runKernelBenchmark(options, progressFrom, cancel);
      if (cancel.isCancelled()) throw Cancelled();   // asked while this format was timed: it is not shown either
      recordedDevice = report.device;
      for (const KernelBenchResult& r : report.results) {
        BenchmarkPoint p;
        p.kind = BenchmarkPoint::Kind::Kernel;
        p.name = qs(r.format);
        p.available = r.available;
        p.note = qs(r.note);
        if (r.available) {
          p.msPerStep = r.msPerStep;
          p.gbPerSecond = r.gbPerSecond;
          p.bitsPerWeight = r.bitsPerWeight;
          if (session.copyGbPerSecond > 0) p.fractionOfCopy = r.gbPerSecond / session.copyGbPerSecond;
          if (r.format == "dense") denseMs = r.msPerStep;
          if (denseMs > 0 && r.msPerStep > 0) p.speedupOverDense = denseMs / r.msPerStep;
          p.tokensPerSecond = linearStepTokensPerSecond(r.msPerStep, options.shape.layers, modelLayers);
          rows.push_back(benchmarkRow(report, r));   // as `pareto-cli bench kernels` records its rows
        }
        emit pointMeasured(p);
      }
      ++done;
    }

    // The decode loop, after the kernels.
    double denseTokens = 0;
    std::string decodeModel, decodeMode;
    int decodeRows = 0;
    for (const QString& format : decodeTargets) {
      if (cancel.isCancelled()) throw Cancelled();
      DecodeBenchOptions o = decode;
      if (synthetic) o.formats = {str(format)};
      DecodeBenchReport report;
      QString failure;
      try {
        report = runDecodeBenchmark(o, progressFrom, cancel);
      } catch (const Cancelled&) {
        throw;
      } catch (const c10::Error& e) {   // a folder the decode runtime cannot load: shown, the kernels still count
        failure = qs(e.what_without_backtrace());
      } catch (const std::exception& e) {
        failure = qs(e.what());
      }
      if (cancel.isCancelled()) throw Cancelled();
      if (!failure.isEmpty()) {
        BenchmarkPoint p;
        p.kind = BenchmarkPoint::Kind::Decode;
        p.name = synthetic ? format : tr("model");
        p.available = false;
        p.note = failure.section('\n', 0, 0);
        emit pointMeasured(p);
        ++done;
        continue;
      }
      decodeModel = report.model;
      decodeMode = report.mode;
      if (recordedDevice.empty()) recordedDevice = report.device;
      for (const DecodeBenchResult& r : report.results) {
        BenchmarkPoint p;
        p.kind = BenchmarkPoint::Kind::Decode;
        p.name = qs(r.format);
        p.available = r.available;
        p.note = qs(r.note);
        p.context = int(r.context);
        p.newTokens = int(r.newTokens);
        if (!report.notes.empty()) {
          QStringList notes;
          for (const std::string& n : report.notes) notes << qs(n);
          p.note += (p.note.isEmpty() ? "" : "; ") + notes.join("; ");
        }
        if (r.available) {
          p.msPerStep = r.msPerToken;
          p.tokensPerSecond = r.tokensPerSecond;
          p.gbPerSecond = r.gbPerSecond;
          p.bitsPerWeight = r.bitsPerWeight;
          if (session.copyGbPerSecond > 0) p.fractionOfCopy = r.gbPerSecond / session.copyGbPerSecond;
          if (r.format == "dense") denseTokens = r.tokensPerSecond;
          if (denseTokens > 0 && r.tokensPerSecond > 0) p.speedupOverDense = r.tokensPerSecond / denseTokens;
          rows.push_back(benchmarkRow(report, r));   // as `pareto-cli bench decode` records its rows
          ++decodeRows;
        }
        emit pointMeasured(p);
      }
      ++done;
    }
    emit progress(1.0, tr("recording"));

    // One bench run with every row, or nothing.
    if (rows.empty()) {
      emit finished(tr("Nothing could run here; nothing recorded."), 0);
      return;
    }
    const int kernelRows = int(rows.size()) - decodeRows;
    QStringList measured;
    if (kernelRows > 0) measured << tr("%n kernel format(s)", nullptr, kernelRows);
    if (decodeRows > 0) measured << tr("%n decode format(s)", nullptr, decodeRows);
    const QString what = measured.join(tr(" and "));
    QString storeError;
    ExperimentStore* s = store(&storeError);
    if (s == nullptr) {
      emit finished(tr("Measured %1; not recorded: %2").arg(what, storeError), 0);
      return;
    }
    RunStart start;
    start.kind = "bench";
    if (!synthetic) {
      try {
        start.model = identifyModel(str(request.modelDir));
      } catch (const std::exception&) {
        // a model folder that cannot be identified any more: the rows are still worth keeping
      }
    }
    auto list = [](const QStringList& l) {
      nlohmann::json a = nlohmann::json::array();
      for (const QString& f : l) a.push_back(str(f));
      return a;
    };
    start.recipe = {{"benchmark", doKernels && doDecode ? "kernels+decode" : doKernels ? "kernels" : "decode"},
                    {"source", "workbench"},
                    {"copy_gb_per_s", session.copyGbPerSecond},
                    {"cpu_reference", session.cpuReference}};
    if (synthetic) start.recipe["synthetic"] = str(request.synthetic);
    if (doKernels) {
      start.recipe["shape"] = options.shape.name;
      start.recipe["layers"] = options.shape.layers;
      start.recipe["model_layers"] = modelLayers;
      start.recipe["formats"] = list(request.formats);
      start.recipe["runs"] = options.runs;
    }
    if (doDecode) {
      start.recipe["decode"] = {{"model", decodeModel},
                                {"mode", decodeMode},
                                {"formats", synthetic ? list(request.decodeFormats) : nlohmann::json::array({"stored"})},
                                {"context", decode.contexts.front()},
                                {"new_tokens", decode.newTokens},
                                {"runs", decode.runs},
                                {"warmup", decode.warmup},
                                {"layers", decode.layers}};
    }
    start.versions = {{"pareto", paretoVersion()}, {"libtorch", TORCH_VERSION}};
    start.device = recordedDevice;
    try {
      const int64_t id = recordBenchmarks(*s, start, rows);
      emit finished(tr("Recorded %1 on %2 as run %3.").arg(what, qs(recordedDevice)).arg(id), id);
    } catch (const std::exception& e) {
      emit finished(tr("Measured %1; not recorded: %2").arg(what, qs(e.what())), 0);
    }
  } catch (const Cancelled&) {
    emit cancelled(tr("Benchmark cancelled after %1 of %2 results; nothing recorded.").arg(done).arg(expected));
  } catch (const c10::Error& e) {
    emit failed(qs(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    emit failed(qs(e.what()));
  }
}

void BenchmarkWorker::loadMeasurements(const QString& deviceName) {
  std::vector<KernelMeasurement> rows;
  try {
    if (ExperimentStore* s = store(nullptr)) {
      RunFilter filter;
      filter.kind = "bench";
      const std::vector<RunSummary> runs = s->listRuns(filter);   // newest first
      int read = 0;
      for (const RunSummary& run : runs) {
        if (run.status != RunStatus::Finished || !benchmarkDeviceMatches(run.device, str(deviceName))) continue;
        if (++read > kBenchRunsRead) break;
        // The rows carry no time of their own: the run's end is when they were recorded.
        for (const BenchmarkRow& b : s->run(run.id).benchmarks)
          rows.push_back({b.kernel, b.device, b.shape, b.batch, b.gbps * 1e9,
                          std::isnan(run.endedAt) ? run.startedAt : run.endedAt});
      }
    }
  } catch (const std::exception&) {
    rows.clear();   // an unreadable store predicts from the copy bandwidth, as without benchmarks
  }
  emit measurementsLoaded(deviceName, selectKernelMeasurements(rows, str(deviceName)));
}

void BenchmarkWorker::predict(const QVector<PredictionInput>& runs, const DecodeBandwidth& bandwidth) {
  QVector<RunPrediction> predictions;
  std::map<QString, std::optional<ModelSummary>> models;   // read once per folder (headers only)
  for (const PredictionInput& in : runs) {
    try {
      auto it = models.find(in.modelDir);
      if (it == models.end()) {
        std::optional<ModelSummary> summary;
        try {
          summary = summarizeModel(str(in.modelDir));
        } catch (const std::exception&) {
          // moved or deleted: its runs keep their predictions
        }
        it = models.emplace(in.modelDir, std::move(summary)).first;
      }
      if (!it->second) continue;
      const nlohmann::json doc = nlohmann::json::parse(in.recipeJson);
      const RecipeEstimate e = estimateRecipe(Recipe::fromJson(doc, "", "run recipe"), *it->second, bandwidth);
      if (!e.fromKernelBenchmarks || e.tokensPerSecond <= 0) continue;
      predictions.push_back({in.runId, e.tokensPerSecond, e.denseTokensPerSecond, qs(e.bandwidthSource)});
    } catch (const std::exception&) {
      // a recipe this version no longer reads: the run keeps its prediction
    }
  }
  emit predictionsReady(predictions);
}

void BenchmarkWorker::deleteRuns(const QVector<qint64>& storeIds) {
  int deleted = 0;
  QStringList errors;
  QString storeError;
  ExperimentStore* s = storeIds.isEmpty() ? nullptr : store(&storeError);
  if (!storeIds.isEmpty() && s == nullptr) errors << storeError;
  for (qint64 id : storeIds) {
    if (s == nullptr) break;
    try {
      if (!s->hasRun(id)) continue;   // already gone (deleted by another window or pareto-cli runs delete)
      s->deleteRun(id);
      ++deleted;
    } catch (const std::exception& e) {
      errors << qs(e.what());
    }
  }
  emit runsDeleted(deleted, errors.join("\n"));
}

}  // namespace pareto
