// LibTorch first: its headers use `slots` as an identifier, which Qt's headers define as a macro.
#include <ATen/ATen.h>

#include "app/gui/BenchmarkWorker.h"

#include <QFileInfo>
#include <QLocale>
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "compress/Recipe.h"
#include "jobs/BenchmarkJob.h"
#include "model/ModelSummary.h"
#include "runtime/PackedLinear.h"
#include "store/ExperimentStore.h"
#include "util/Error.h"

namespace pareto {

namespace {

std::string str(const QString& s) { return s.toStdString(); }
QString qs(const std::string& s) { return QString::fromStdString(s); }

// How many of the store's newest bench runs are read for measurements (each is a few rows).
constexpr int kBenchRunsRead = 200;

// What the strip's header says of a session: where it runs and why, the shape, the decode loop's settings.
BenchmarkSession describeSession(const BenchmarkRequest& request, const BenchmarkPlan& plan) {
  auto tr = [](const char* text) { return BenchmarkWorker::tr(text); };
  const bool synthetic = !request.synthetic.isEmpty();
  BenchmarkSession session;
  session.device = request.deviceLabel;
  session.cpuReference = plan.cpuReference();
  session.copyGbPerSecond = plan.copyGbPerSecond;
  session.formats = plan.expected;
  if (plan.cpuReference()) {
    const QString why = plan.where == BenchmarkPlan::Where::CpuNoCudaBuild    ? tr("This build has no CUDA kernels")
                        : plan.where == BenchmarkPlan::Where::CpuNoCudaDevice ? tr("No CUDA device on this machine")
                                                                               : tr("The CPU is the current device");
    QStringList what;
    if (plan.kernels)
      what << tr("timing the kernels' float64 CPU references over %1 layer(s), %2 runs each")
                  .arg(plan.kernels->shape.layers)
                  .arg(plan.kernels->runs);
    if (plan.decode) what << tr("running the decode loop eagerly through them with tiny settings");
    session.note = tr("%1: %2. They are recorded but never used to predict tokens/s.").arg(why, what.join(tr(", then ")));
  }
  if (plan.kernels) {
    QStringList parts;
    for (const auto& l : plan.kernels->shape.linears) parts << qs(l.name);
    session.shape = tr("%1: %2 of %3 layers (%4)")
                        .arg(qs(plan.kernels->shape.name))
                        .arg(plan.kernels->shape.layers)
                        .arg(plan.modelLayers)
                        .arg(parts.join(", "));
    if (!request.unbenchmarkable.isEmpty())
      session.note += (session.note.isEmpty() ? "" : " ") +
                      tr("No kernel runs %1: not measured.").arg(request.unbenchmarkable.join(", "));
  } else {
    session.shape = synthetic ? request.synthetic : QFileInfo(request.modelDir).fileName();
  }
  if (plan.decode) {
    const DecodeBenchOptions& d = *plan.decode;
    const QString model =
        synthetic ? (d.layers > 0 ? tr("%1 (%2 of %3 layers)").arg(request.synthetic).arg(d.layers).arg(plan.modelLayers)
                                  : request.synthetic)
                  : tr("%1 as stored").arg(QFileInfo(request.modelDir).fileName());
    session.decodeShape = tr("%1 · context %2 · %3 new tokens · %4 run(s) · %5")
                              .arg(model)
                              .arg(d.contexts.front())
                              .arg(d.newTokens)
                              .arg(d.runs)
                              .arg(plan.cpuReference() ? tr("eager (CPU references)") : tr("CUDA graph"));
    if (synthetic && !request.notDecodable.isEmpty())
      session.note += (session.note.isEmpty() ? "" : " ") +
                      tr("The decode loop has no weight format for %1: not run.").arg(request.notDecodable.join(", "));
  }
  return session;
}

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

void BenchmarkWorker::run(const BenchmarkRequest& request) {
  const CancelToken none;
  const CancelToken& cancel = request.cancel ? *request.cancel : none;
  const bool synthetic = !request.synthetic.isEmpty();
  BenchmarkOptions options;
  options.modelDir = str(request.modelDir);
  options.synthetic = str(request.synthetic);
  options.modelLayers = request.shape.layers;
  options.device = str(request.device);
  options.streamed = true;
  if (request.kind != BenchmarkRequest::Kind::Decode) {
    KernelBenchOptions k;
    k.shape = request.shape;
    k.formats.clear();
    for (const QString& f : request.formats) k.formats.push_back(str(f));
    options.kernels = k;
  }
  if (request.kind != BenchmarkRequest::Kind::Kernels) {
    DecodeBenchOptions d;
    d.batches = {1};
    if (synthetic) {
      d.formats.clear();
      for (const QString& f : request.decodeFormats) d.formats.push_back(str(f));
    }
    options.decode = d;
  }
  options.cpu = request.cpu;

  // The job's results as the strip shows them.
  BenchmarkSession session;
  int done = 0;
  double denseMs = 0, denseTokens = 0;
  int modelLayers = 0, timedLayers = 0;
  BenchmarkCallbacks callbacks;
  callbacks.planned = [&](const BenchmarkPlan& plan) {
    session = describeSession(request, plan);
    modelLayers = plan.modelLayers;
    timedLayers = plan.kernels ? plan.kernels->shape.layers : 0;
    emit started(session);
  };
  callbacks.kernel = [&](const KernelBenchReport&, const KernelBenchResult& r) {
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
      p.tokensPerSecond = linearStepTokensPerSecond(r.msPerStep, timedLayers, modelLayers);
    }
    emit pointMeasured(p);
  };
  callbacks.decode = [&](const DecodeBenchReport& report, const DecodeBenchResult& r) {
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
    }
    emit pointMeasured(p);
  };
  callbacks.decodeFailed = [&](const std::string& format, const std::string& message) {
    BenchmarkPoint p;
    p.kind = BenchmarkPoint::Kind::Decode;
    p.name = synthetic ? qs(format) : tr("model");
    p.available = false;
    p.note = qs(message).section('\n', 0, 0);
    emit pointMeasured(p);
  };
  callbacks.callDone = [&](int n) { done = n; };
  const ProgressCallback progressed = [this](const ProgressUpdate& u) { emit progress(u.fraction, qs(u.message)); };

  BenchmarkJob job(options, callbacks);
  try {
    QString storeError;
    ExperimentStore* s = store(&storeError);
    const int64_t id = runRecorded(job, s, progressed, cancel, [&](const std::string&, const std::string& error) {
      storeError = qs(error);
    });
    emit progress(1.0, tr("recording"));
    const BenchmarkReport& report = job.report();
    if (report.rows.empty()) {
      emit finished(tr("Nothing could run here; nothing recorded."), 0);
      return;
    }
    int decodeRows = 0;
    for (const BenchmarkRow& row : report.rows) decodeRows += row.kernel.rfind("decode ", 0) == 0 ? 1 : 0;
    const int kernelRows = int(report.rows.size()) - decodeRows;
    QStringList measured;
    if (kernelRows > 0) measured << tr("%n kernel format(s)", nullptr, kernelRows);
    if (decodeRows > 0) measured << tr("%n decode format(s)", nullptr, decodeRows);
    const QString what = measured.join(tr(" and "));
    if (id > 0)
      emit finished(tr("Recorded %1 on %2 as run %3.").arg(what, qs(report.device)).arg(id), id);
    else
      emit finished(tr("Measured %1; not recorded: %2").arg(what, storeError), 0);
  } catch (const Cancelled&) {
    emit cancelled(tr("Benchmark cancelled after %1 of %2 results; nothing recorded.")
                       .arg(done)
                       .arg(session.formats));
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

void BenchmarkWorker::setRunLabel(qint64 storeId, const QString& tag, const QString& note) {
  QString error;
  if (ExperimentStore* s = store(&error)) {
    try {
      s->setRunLabel(storeId, tag.toStdString(), note.toStdString());
    } catch (const std::exception& e) {
      error = qs(e.what());
    }
  }
  emit labelSaved(storeId, error);
}

}  // namespace pareto
