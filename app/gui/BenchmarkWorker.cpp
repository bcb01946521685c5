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
#include "model/Device.h"
#include "model/ModelSummary.h"
#include "store/ExperimentStore.h"
#include "store/ModelIdentity.h"
#include "util/Error.h"

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

void BenchmarkWorker::run(const BenchmarkRequest& request) {
  switch (request.kind) {
    case BenchmarkRequest::Kind::Kernels:
      runKernels(request);
      return;
  }
}

void BenchmarkWorker::runKernels(const BenchmarkRequest& request) {
  const CancelToken none;
  const CancelToken& cancel = request.cancel ? *request.cancel : none;
  int done = 0;
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
    if (!cuda) {
      const QString why = !kCudaBuild   ? tr("This build has no CUDA kernels")
                          : !cudaDevice ? tr("No CUDA device on this machine")
                                        : tr("The CPU is the current device");
      session.note = tr("%1: timing the kernels' float64 CPU references over %2 layer(s), %3 runs each. They are "
                        "recorded but never used to predict tokens/s.")
                         .arg(why)
                         .arg(std::max(1, std::min(request.shape.layers, request.cpuLayers)))
                         .arg(request.cpuRuns);
    }
    KernelBenchOptions options;
    options.shape = request.shape;
    options.device = cuda ? "cuda" : "cpu";
    options.runs = cuda ? request.gpuRuns : request.cpuRuns;
    options.warmup = cuda ? 5 : 1;
    if (!cuda) options.shape.layers = std::max(1, std::min(options.shape.layers, request.cpuLayers));
    const int modelLayers = request.shape.layers;
    QStringList parts;
    for (const auto& l : options.shape.linears) parts << qs(l.name);
    session.shape = tr("%1: %2 of %3 layers (%4)")
                        .arg(qs(options.shape.name))
                        .arg(options.shape.layers)
                        .arg(modelLayers)
                        .arg(parts.join(", "));
    if (!request.unbenchmarkable.isEmpty())
      session.note += (session.note.isEmpty() ? "" : " ") +
                      tr("No kernel runs %1: not measured.").arg(request.unbenchmarkable.join(", "));
    session.formats = int(request.formats.size());
    // The ceiling line: the device's copy bandwidth, (read + written bytes) / time, as core measures it.
    session.copyGbPerSecond = measureCopyBandwidth(cuda ? str(request.device) : "cpu") / 1e9;
    emit started(session);

    // Format by format, so that each result is shown when it is measured.
    std::vector<BenchmarkRow> rows;
    std::string recordedDevice;
    double denseMs = 0;
    const double total = double(std::max<qsizetype>(1, request.formats.size()));
    for (int i = 0; i < request.formats.size(); ++i) {
      if (cancel.isCancelled()) throw Cancelled();
      options.formats = {str(request.formats[i])};
      const ProgressCallback progressCallback = [this, i, total](const ProgressUpdate& u) {
        emit progress((double(i) + std::clamp(u.fraction, 0.0, 1.0)) / total, qs(u.message));
      };
      const KernelBenchReport report = runKernelBenchmark(options, progressCallback, cancel);
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
          BenchmarkRow row;   // as `pareto-cli bench kernels` records its rows
          row.device = report.device;
          row.kernel = r.format;
          row.shape = report.shape + " step";
          row.batch = r.batch;
          row.timeUs = r.msPerStep * 1e3;
          row.gbps = r.gbPerSecond;
          rows.push_back(row);
        }
        emit pointMeasured(p);
      }
      ++done;
    }
    emit progress(1.0, tr("recording"));

    // One bench run with every row, or nothing.
    if (rows.empty()) {
      emit finished(tr("No format could run here; nothing recorded."), 0);
      return;
    }
    QString storeError;
    ExperimentStore* s = store(&storeError);
    if (s == nullptr) {
      emit finished(tr("Measured %1 formats; not recorded: %2").arg(rows.size()).arg(storeError), 0);
      return;
    }
    RunStart start;
    start.kind = "bench";
    try {
      start.model = identifyModel(str(request.modelDir));
    } catch (const std::exception&) {
      // a model folder that cannot be identified any more: the rows are still worth keeping
    }
    nlohmann::json formats = nlohmann::json::array();
    for (const QString& f : request.formats) formats.push_back(str(f));
    start.recipe = {{"benchmark", "kernels"},
                    {"source", "workbench"},
                    {"shape", options.shape.name},
                    {"layers", options.shape.layers},
                    {"model_layers", modelLayers},
                    {"formats", formats},
                    {"runs", options.runs},
                    {"copy_gb_per_s", session.copyGbPerSecond},
                    {"cpu_reference", session.cpuReference}};
    start.versions = {{"pareto", PARETO_VERSION}, {"libtorch", TORCH_VERSION}};
    start.device = recordedDevice;
    try {
      const int64_t id = recordBenchmarks(*s, start, rows);
      emit finished(tr("Recorded %1 kernel formats on %2 as run %3.").arg(rows.size()).arg(qs(recordedDevice)).arg(id),
                    id);
    } catch (const std::exception& e) {
      emit finished(tr("Measured %1 formats; not recorded: %2").arg(rows.size()).arg(qs(e.what())), 0);
    }
  } catch (const Cancelled&) {
    emit cancelled(
        tr("Benchmark cancelled after %1 of %2 formats; nothing recorded.").arg(done).arg(request.formats.size()));
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
