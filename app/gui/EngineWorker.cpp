// LibTorch first: its headers use `slots` as an identifier, which Qt's headers (through EngineWorker.h) define
// as a macro.
#include <ATen/ATen.h>
#include <torch/cuda.h>

#include "app/gui/EngineWorker.h"

#include <QFileInfo>
#include <QLocale>
#include <QStringList>
#include <cmath>
#include <functional>

#include "jobs/CompressEvaluateJob.h"
#include "jobs/StoredAnalyses.h"
#include "jobs/ExportJob.h"
#include "jobs/GenerateJob.h"
#include "jobs/JobProgress.h"
#include "jobs/SearchJob.h"
#include "model/Device.h"
#include "jobs/DeviceBandwidth.h"
#include "store/ExperimentStore.h"
#include "store/ModelIdentity.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {

namespace {

std::string str(const QString& s) { return s.toStdString(); }
QString qs(const std::string& s) { return QString::fromStdString(s); }

// "" for a file that is not there: the evaluation it feeds is skipped.
std::string fileOrNothing(const QString& path) {
  return !path.isEmpty() && QFileInfo(path).isFile() ? str(path) : std::string();
}

EvaluationOptions evaluationOf(const EvaluationSettings& e) {
  return {fileOrNothing(e.heldOutText), e.perplexityWindow, e.perplexityMaxWindows, fileOrNothing(e.prompts),
          e.maxPrompts, e.maxNewTokens, e.driftSteps, e.hessianStudy, e.studyTokens};
}

RunRecord recordFromStore(const RunDetails& run) {
  RunRecord r;
  r.id = int(run.summary.id);
  r.kind = qs(run.summary.kind);
  r.status = qs(runStatusName(run.summary.status));
  r.error = qs(run.summary.error);
  r.modelDir = qs(run.summary.modelPath);
  r.modelHash = qs(run.summary.modelHash);
  r.drift = storedDrift(run);
  if (!r.drift)
    r.driftAbsent = QObject::tr("This run stored no drift curves: it measured no drift, or it was recorded before the "
                                "run store kept them (its summary metrics, largest plateau and steps to 90%, remain).");
  r.discrepancy = storedDiscrepancy(run);
  r.outDir = qs(run.summary.output);
  r.recipeJson = run.recipe.dump();
  r.device = qs(run.summary.device);
  if (!std::isnan(run.summary.endedAt))
    r.finishedAt = QDateTime::fromMSecsSinceEpoch(qint64(run.summary.endedAt * 1000.0));
  r.metrics = run.summary.metrics;   // under today's names (store/MetricNames.h), whoever recorded the run
  r.tag = qs(run.summary.tag);
  r.note = qs(run.summary.note);
  return r;
}

}  // namespace

DecodeBandwidth ComputeDevice::bandwidth() const {
  DecodeBandwidth b;
  b.bytesPerSecond = copyBytesPerSecond;
  StoredCopyBandwidth copy;
  copy.bytesPerSecond = copyBytesPerSecond;
  copy.measuredAt = measuredAt.isValid() ? double(measuredAt.toSecsSinceEpoch()) : 0.0;
  b.source = copyBandwidthSource(copy, label.toStdString()) + " (no stored kernel benchmarks)";
  return b;
}

EngineWorker::EngineWorker() : cache_(std::make_unique<EvaluationCache>()) {
  qRegisterMetaType<pareto::RunRecord>();
  qRegisterMetaType<pareto::ComputeDevice>();
  qRegisterMetaType<QVector<pareto::ComputeDevice>>();
  qRegisterMetaType<QVector<pareto::RunRecord>>();
  qRegisterMetaType<QMap<QString, double>>();
  qRegisterMetaType<std::shared_ptr<const pareto::SearchReport>>();
}

EngineWorker::~EngineWorker() = default;

ExperimentStore* EngineWorker::store() {
  if (!store_ && storeError_.isEmpty()) {
    try {
      store_ = std::make_unique<ExperimentStore>(str(QFileInfo(qs(defaultStorePath())).absoluteFilePath()));
    } catch (const std::exception& e) {
      storeError_ = qs(e.what());
      emit storeProblem(tr("Runs are not recorded: %1").arg(storeError_));
    }
  }
  return store_.get();
}

void EngineWorker::loadHistory(const QSet<qint64>& known) {
  QVector<RunRecord> runs;
  QString error;
  try {
    if (ExperimentStore* s = store()) {
      const std::vector<RunSummary> stored = s->listRuns();   // newest first
      for (auto it = stored.rbegin(); it != stored.rend(); ++it)
        if (!known.contains(it->id)) runs << recordFromStore(s->run(it->id));
      // The newest batch-1 decode measurement of each benchmarked folder (a run's compressed folder among them).
      QMap<QString, double> measured;
      for (const RunSummary& r : stored) {
        if (r.kind != "bench" || r.status != RunStatus::Finished || r.modelPath.empty()) continue;
        const QString folder = QFileInfo(qs(r.modelPath)).absoluteFilePath();
        if (measured.contains(folder)) continue;
        for (const BenchmarkRow& b : s->run(r.id).benchmarks)
          if (b.kernel.rfind("decode ", 0) == 0 && b.batch == 1 && b.timeUs > 0) {
            measured.insert(folder, 1e6 / b.timeUs);
            break;
          }
      }
      if (!measured.isEmpty()) emit measuredSpeeds(measured);
    } else {
      error = storeError_;
    }
  } catch (const std::exception& e) {
    error = qs(e.what());
  }
  emit historyLoaded(runs, error);
}

void EngineWorker::probeDevices(const QSet<QString>& remeasure) {
  // A fresh measurement at every start would move every prediction with the machine's load of the moment: a
  // device's bandwidth is measured once, kept in the store, and measured again only when asked.
  auto copyOf = [&](ComputeDevice& d, const c10::Device& device) {
    try {
      const StoredCopyBandwidth b = copyBandwidthForPredictions(store(), device, remeasure.contains(d.label));
      d.copyBytesPerSecond = b.bytesPerSecond;
      d.measuredAt = b.measuredAt > 0 ? QDateTime::fromSecsSinceEpoch(qint64(b.measuredAt)) : QDateTime();
    } catch (const std::exception&) {
      d.copyBytesPerSecond = 0;   // listed, but no tokens/s is predicted for it
    }
  };
  QVector<ComputeDevice> devices;
  ComputeDevice cpu{"cpu", tr("CPU")};
  copyOf(cpu, c10::Device(c10::kCPU));
  devices << cpu;
  const size_t cudaDevices = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  for (size_t i = 0; i < cudaDevices; ++i) {
    const QString id = QStringLiteral("cuda:%1").arg(i);
    const c10::Device device(c10::kCUDA, c10::DeviceIndex(i));
    ComputeDevice d{id, QStringLiteral("%1 (%2)").arg(qs(deviceDescription(device)), id)};
    copyOf(d, device);
    devices << d;
  }
  devices_ = devices;
  emit devicesProbed(devices);
}

void EngineWorker::run(const RunRequest& request) {
  const CancelToken none;
  const CancelToken& cancel = request.cancel ? *request.cancel : none;
  const nlohmann::json recipe = nlohmann::json::parse(request.recipeJson, nullptr, false);
  const EvaluationOptions evaluation = evaluationOf(request.evaluation);
  auto whole = std::make_shared<JobProgress>(compressEvaluateStages(
      recipe.is_object() && recipe.contains("calibration"), !evaluation.heldOutText.empty(),
      !evaluation.prompts.empty(), evaluation.driftSteps > 0,
      evaluation.hessianStudy && !evaluation.heldOutText.empty() && !evaluation.prompts.empty()));
  const ProgressCallback progressCallback = [this, whole](const ProgressUpdate& u) {
    emit progress(qs(u.stage), u.fraction, qs(u.message));
    emit runProgress(whole->update(u));
  };
  try {
    RunRecord record;
    record.modelDir = QFileInfo(request.modelDir).absoluteFilePath();
    try {
      record.modelHash = qs(identifyModel(str(request.modelDir)).contentHash);
    } catch (const std::exception&) {
      // not a model folder: the job fails on it below and says why
    }
    if (fileOrNothing(request.evaluation.prompts).empty())
      record.driftAbsent = tr("No held-out prompts were chosen for this run (Evaluation ▸ Prompts): drift, like "
                              "decode fidelity, is measured on them.");
    else if (request.evaluation.driftSteps <= 0)
      record.driftAbsent = tr("This run measured no drift: its evaluation had 0 drift steps.");
    record.outDir = QFileInfo(request.outDir).absoluteFilePath();
    record.recipeJson = request.recipeJson;
    DecodeBandwidth bandwidth = request.bandwidth;
    if (bandwidth.bytesPerSecond <= 0)   // asked for before the window heard the probe's result
      for (const ComputeDevice& d : devices_)
        if (d.id == request.device) bandwidth = d.bandwidth();
    record.bandwidthSource = qs(bandwidth.source);
    record.device = qs(deviceDescription(parseDevice(str(request.device))));

    CompressEvaluateOptions options;
    options.compress.modelDir = str(request.modelDir);
    // The folder must not pre-exist (the window picks a fresh name), so anything there after a cancel was
    // written by this run and the job removes it.
    options.compress.outDir = str(request.outDir);
    options.compress.keepFinishedLayers = false;   // the workbench has no --resume: a cancelled run keeps nothing
    options.device = str(request.device);
    options.recipeSource = "the workbench's recipe";
    options.recipeDocument = parseJson(request.recipeJson, options.recipeSource);
    options.evaluation = evaluation;
    options.bandwidth = bandwidth;
    CompressEvaluateJob job(options, cache_.get());
    record.id = int(runRecorded(job, store(), progressCallback, cancel,
                                 [this](const std::string& stage, const std::string& error) {
                                   emit storeProblem(stage == "begin"
                                                         ? tr("This run is not recorded: %1").arg(qs(error))
                                                         : tr("The result was not recorded: %1").arg(qs(error)));
                                 }));
    // The metrics as the store keeps them, so a run shows the same now and when a later window reads it back.
    RunResults results;
    job.record(results);
    for (const Metric& m : results.metrics) record.metrics[m.name] = m.value;
    record.drift = job.report().drift;
    record.discrepancy = job.report().study;
    record.finishedAt = QDateTime::currentDateTime();
    emit runFinished(record);
  } catch (const Cancelled&) {
    emit runCancelled(tr("Run cancelled; %1 was not kept.").arg(request.outDir));
  } catch (const std::exception& e) {
    emit runFailed(qs(e.what()));
  }
}

void EngineWorker::search(const SearchRequest& request) {
  const CancelToken none;
  try {
    SearchOptions options;
    options.modelDir = str(request.modelDir);
    options.baseRecipe = str(request.baseRecipe);
    options.budget = {BudgetKind(request.budgetKind), request.budget};
    options.device = str(request.device);
    options.bandwidth = request.bandwidth;
    // The window's bandwidth carries the step benchmarks; the time model also wants the single GEMVs and this
    // model's measured decode step (search/DecodeTimeModel.h), which the worker reads from the store itself.
    if (ExperimentStore* s = store()) {
      const std::string deviceName = deviceDescription(parseDevice(options.device));
      addStoredGemvs(options.bandwidth, *s, deviceName);
      addDenseDecodeStep(options.bandwidth, *s, deviceName, options.modelDir);
    }
    options.refine = request.refine;
    SearchJob job(options);
    job.run([this](const ProgressUpdate& u) {
              emit searchProgress(u.fraction, u.message.empty() ? qs(u.stage) : tr("%1: %2").arg(qs(u.stage), qs(u.message)));
            },
            request.cancel ? *request.cancel : none);
    emit searchFinished(std::make_shared<const SearchReport>(job.report()));
  } catch (const Cancelled&) {
    emit searchCancelled(tr("Search cancelled."));
  } catch (const std::exception& e) {
    emit searchFailed(qs(e.what()));
  }
}

void EngineWorker::exportModel(const ExportRequest& request) {
  const CancelToken none;
  try {
    ExportOptions options;
    options.kind = parseExportKind(str(request.kind));
    options.modelDir = str(request.modelDir);
    options.out = str(request.out);
    options.type = str(request.type);
    options.overwrite = request.overwrite;
    ExportJob job(options);
    job.run(
        [this](const ProgressUpdate& u) {
          emit exportProgress(u.fraction, u.message.empty() ? qs(u.stage) : tr("%1: %2").arg(qs(u.stage), qs(u.message)));
        },
        request.cancel ? *request.cancel : none);
    emit exportFinished(qs(job.summary()));
  } catch (const Cancelled&) {
    emit exportCancelled(tr("Export cancelled; %1 is as it was.").arg(request.out));
  } catch (const std::exception& e) {
    emit exportFailed(qs(e.what()));
  }
}

void EngineWorker::generate(const GenerationRequest& request) {
  const CancelToken none;
  GenerateOptions options;
  options.modelDir = str(request.modelDir);
  options.compressedDir = str(request.compressedDir);
  options.device = str(request.device);
  options.prompt = str(request.prompt);
  options.generation.maxNewTokens = request.maxNewTokens;
  options.generation.sampling.greedy = request.sampling.greedy;
  options.generation.sampling.temperature = request.sampling.temperature;
  options.generation.sampling.topK = request.sampling.topK;
  options.generation.sampling.topP = request.sampling.topP;
  options.generation.sampling.seed = request.sampling.seed;
  GenerateJob* running = nullptr;
  GenerateJob job(options,
                  [this, &running](size_t i, const GeneratedSequence& s) {
                    emit generationText(s.compressed,
                                        qs(running->model(i).tokenizer->decode(s.tokens, /*skipSpecialTokens=*/true)));
                  },
                  &cache_->models);
  running = &job;
  try {
    try {
      job.run({}, request.cancel ? *request.cancel : none);
    } catch (const Cancelled&) {
      // stopped by the user: what was generated until then is the result
    }
    // Each model's decode speed over its own steps after the first (which holds the prompt's prefill), taken in
    // turns on the same device: the LibTorch loop with unpacked weights, not the packed-kernel runtime.
    const GenerateReport& report = job.report();
    QStringList speeds;
    for (const GeneratedSequence& s : report.sequences)
      if (s.tokensPerSecond() > 0)
        speeds << tr("%1 %2 tok/s")
                      .arg(s.compressed ? tr("compressed") : tr("dense"))
                      .arg(QLocale().toString(s.tokensPerSecond(), 'f', 1));
    emit generationFinished(tr("%1 tokens in %2 s on %3%4")
                                .arg(report.generated)
                                .arg(QLocale().toString(report.seconds, 'f', 1))
                                .arg(qs(report.device))
                                .arg(speeds.isEmpty() ? QString() : " · " + speeds.join(", ")));
  } catch (const std::exception& e) {
    emit generationFailed(qs(e.what()));
  }
}

}  // namespace pareto
