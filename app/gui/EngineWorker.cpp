// LibTorch first: its headers use `slots` as an identifier, which Qt's headers (through EngineWorker.h) define
// as a macro.
#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "app/gui/EngineWorker.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QLocale>
#include <QStringList>
#include <algorithm>
#include <cmath>
#include <fstream>

#include "analysis/ActivationDrift.h"
#include "analysis/HessianStudy.h"
#include "calib/CalibrationSet.h"
#include "compress/CompressJob.h"
#include "compress/Recipe.h"
#include "eval/DecodeFidelity.h"
#include "eval/Perplexity.h"
#include "model/Generation.h"
#include "model/LoadedModel.h"
#include "model/ModelSummary.h"
#include "store/ExperimentStore.h"
#include "store/ModelIdentity.h"
#include "store/RunRecorder.h"
#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/Json.h"
#include "runtime/CopyBandwidth.h"
#include "util/Version.h"

namespace pareto {

namespace {

std::string str(const QString& s) { return s.toStdString(); }
QString qs(const std::string& s) { return QString::fromStdString(s); }

// The CLI's default compute dtype on every device, so that a run gives the numbers pareto-cli gives.
RuntimeOptions runtimeFor(const QString& device) {
  return makeRuntimeOptions(str(device), kDefaultComputeDtype);
}

std::vector<std::string> firstPrompts(const QString& file, int count) {
  std::vector<std::string> prompts = readPrompts(str(file));
  if (count > 0 && int(prompts.size()) > count) prompts.resize(size_t(count));
  return prompts;
}

bool isFile(const QString& path) { return !path.isEmpty() && QFileInfo(path).isFile(); }

// pareto-cli compress records the names of its result JSON; the workbench's names for the same numbers.
std::string workbenchMetricName(const std::string& stored) {
  if (stored == "linear_bits_per_weight") return metric::kLinearBitsPerWeight;
  if (stored == "model_bits_per_weight") return metric::kModelBitsPerWeight;
  if (stored == "timings.total_s") return metric::kSeconds;
  return stored;
}

RunRecord recordFromStore(const RunDetails& run) {
  RunRecord r;
  r.storeId = run.summary.id;
  r.modelDir = qs(run.summary.modelPath);
  r.outDir = qs(run.summary.output);
  r.recipeJson = run.recipe.dump();
  r.device = qs(run.summary.device);
  if (!std::isnan(run.summary.endedAt))
    r.finishedAt = QDateTime::fromMSecsSinceEpoch(qint64(run.summary.endedAt * 1000.0));
  for (const auto& [name, value] : run.summary.metrics) {
    const std::string key = workbenchMetricName(name);
    if (r.metrics.count(key) == 0 || key == name) r.metrics[key] = value;
  }
  return r;
}

}  // namespace

DecodeBandwidth ComputeDevice::bandwidth() const {
  DecodeBandwidth b;
  b.bytesPerSecond = copyBytesPerSecond;
  b.source = QObject::tr("measured %1 copy bandwidth %2 GB/s (no stored kernel benchmarks)")
                 .arg(label, QLocale().toString(copyBytesPerSecond / 1e9, 'f', 1))
                 .toStdString();
  return b;
}

EngineWorker::EngineWorker() {
  qRegisterMetaType<pareto::RunRecord>();
  qRegisterMetaType<pareto::ComputeDevice>();
  qRegisterMetaType<QVector<pareto::ComputeDevice>>();
  qRegisterMetaType<QVector<pareto::RunRecord>>();
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

std::unique_ptr<RunRecorder> EngineWorker::beginRecording(const RunRequest& request, const RunRecord& record) {
  ExperimentStore* s = store();
  if (s == nullptr) return nullptr;
  RunStart start;
  start.kind = "compress";
  try {
    start.model = identifyModel(str(request.modelDir));
  } catch (const std::exception&) {
    // not a model folder: the run fails on it in a moment and records why
  }
  nlohmann::json recipe = nlohmann::json::parse(request.recipeJson, nullptr, /*allow_exceptions=*/false);
  start.recipe = recipe.is_object() ? recipe : nlohmann::json{{"recipe_text", request.recipeJson}};
  start.versions = {{"pareto", paretoVersion()}, {"libtorch", TORCH_VERSION}};
  start.device = str(record.device);
  start.output = str(record.outDir);
  try {
    return std::make_unique<RunRecorder>(*s, start);
  } catch (const std::exception& e) {
    emit storeProblem(tr("This run is not recorded: %1").arg(qs(e.what())));
    return nullptr;
  }
}

void EngineWorker::loadHistory() {
  QVector<RunRecord> runs;
  QString error;
  try {
    if (ExperimentStore* s = store()) {
      RunFilter filter;
      filter.kind = "compress";
      const std::vector<RunSummary> stored = s->listRuns(filter);   // newest first
      for (auto it = stored.rbegin(); it != stored.rend(); ++it)
        if (it->status == RunStatus::Finished) runs << recordFromStore(s->run(it->id));
    } else {
      error = storeError_;
    }
  } catch (const std::exception& e) {
    error = qs(e.what());
  }
  emit historyLoaded(runs, error);
}

void EngineWorker::probeDevices() {
  QVector<ComputeDevice> devices;
  ComputeDevice cpu{"cpu", tr("CPU"), measureHostCopyBandwidth()};
  devices << cpu;
  const size_t cudaDevices = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  for (size_t i = 0; i < cudaDevices; ++i) {
    const QString id = QStringLiteral("cuda:%1").arg(i);
    ComputeDevice d{id, QStringLiteral("%1 (%2)").arg(qs(deviceDescription(c10::Device(c10::kCUDA, c10::DeviceIndex(i)))), id), 0};
    try {
      d.copyBytesPerSecond = measureCopyBandwidth(parseDevice(str(id)));
    } catch (const std::exception&) {
      d.copyBytesPerSecond = 0;   // listed, but no tokens/s is predicted for it
    }
    devices << d;
  }
  devices_ = devices;
  emit devicesProbed(devices);
}

LoadedModel& EngineWorker::denseModel(const QString& dir, const QString& device) {
  const QString key = QFileInfo(dir).absoluteFilePath() + "|" + device;
  if (!dense_ || denseKey_ != key) {
    dense_.reset();   // free the old one before loading the next
    dense_ = std::make_unique<LoadedModel>(loadModel(str(dir), runtimeFor(device)));
    denseKey_ = key;
  }
  return *dense_;
}

LoadedModel& EngineWorker::compressedModel(const QString& dir, const QString& device) {
  const QString key = QFileInfo(dir).absoluteFilePath() + "|" + device;
  if (!compressed_ || compressedKey_ != key) {
    compressed_.reset();
    compressed_ = std::make_unique<LoadedModel>(loadModel(str(dir), runtimeFor(device)));
    compressedKey_ = key;
  }
  return *compressed_;
}

void EngineWorker::run(const RunRequest& request) {
  QElapsedTimer timer;
  timer.start();
  const CancelToken* cancel = request.cancel.get();
  const ProgressCallback progressCallback = [this](const ProgressUpdate& u) {
    emit progress(qs(u.stage), u.fraction, qs(u.message));
  };
  bool wroteOutput = false;
  std::unique_ptr<RunRecorder> recorder;
  try {
    RunRecord record;
    record.modelDir = QFileInfo(request.modelDir).absoluteFilePath();
    record.outDir = QFileInfo(request.outDir).absoluteFilePath();
    record.recipeJson = request.recipeJson;
    DecodeBandwidth bandwidth = request.bandwidth;
    if (bandwidth.bytesPerSecond <= 0)   // asked for before the window heard the probe's result
      for (const ComputeDevice& d : devices_)
        if (d.id == request.device) bandwidth = d.bandwidth();
    record.bandwidthSource = qs(bandwidth.source);

    // The dock's recipe as the job takes it; its calibration paths are absolute, so no folder resolves them.
    const Recipe recipe =
        Recipe::fromJson(parseJson(request.recipeJson, "the workbench's recipe"), "", "the workbench's recipe");

    CompressOptions options;
    options.modelDir = str(request.modelDir);
    options.outDir = str(request.outDir);
    options.runtime = runtimeFor(request.device);
    record.device = qs(deviceDescription(options.runtime.device));
    recorder = beginRecording(request, record);
    // The folder the job was given must not pre-exist (the window picks a fresh name), so anything there after
    // a cancel was written by this run.
    const CompressReport report = runCompress(recipe, options, progressCallback, cancel);
    wroteOutput = true;
    record.metrics[metric::kLinearBitsPerWeight] = report.linearBitsPerWeight;
    record.metrics[metric::kModelBitsPerWeight] = report.modelBitsPerWeight;
    record.metrics[metric::kBytes] = double(report.bytes);

    // Predicted decode speed from the same estimate the Recipe dock showed (its bytes are the bytes written).
    const ModelSummary summary = summarizeModel(options.modelDir);
    const RecipeEstimate estimate = estimateRecipe(recipe, summary, bandwidth);
    record.metrics[metric::kDenseLinearBitsPerWeight] = estimate.denseLinearBitsPerWeight;
    if (estimate.tokensPerSecond > 0) {
      record.metrics[metric::kPredictedTokensPerSecond] = estimate.tokensPerSecond;
      record.metrics[metric::kDensePredictedTokensPerSecond] = estimate.denseTokensPerSecond;
    }

    evaluate(request, record, progressCallback);
    record.metrics[metric::kSeconds] = double(timer.elapsed()) / 1000.0;
    record.finishedAt = QDateTime::currentDateTime();
    compressed_.reset();   // the evaluation's copy; generation loads the folder again when asked
    if (recorder) {
      for (const auto& [name, value] : record.metrics) recorder->metric(name, value);
      try {
        recorder->finish();
        record.storeId = recorder->id();
      } catch (const std::exception& e) {
        emit storeProblem(tr("The result was not recorded: %1").arg(qs(e.what())));
      }
    }
    emit runFinished(record);
  } catch (const Cancelled&) {
    if (recorder) recorder->cancel();
    compressed_.reset();
    if (wroteOutput) removeTree(str(request.outDir));
    emit runCancelled(tr("Run cancelled; %1 was not kept.").arg(request.outDir));
  } catch (const std::exception& e) {
    if (recorder) recorder->fail(e.what());
    compressed_.reset();
    // A run that did not finish keeps nothing, like a cancelled one: the folder alone, without its evaluation,
    // would look like a complete run in the runs folder.
    if (wroteOutput) {
      try {
        removeTree(str(request.outDir));
      } catch (const std::exception&) {
        // the failure being reported matters more
      }
    }
    emit runFailed(qs(e.what()));
  }
}

void EngineWorker::evaluate(const RunRequest& request, RunRecord& record, const ProgressCallback& progress) {
  const EvaluationSettings& eval = request.evaluation;
  const CancelToken* cancel = request.cancel.get();
  const bool text = isFile(eval.heldOutText), prompts = isFile(eval.prompts);
  if (!text && !prompts) return;
  if (progress) progress({"load", 0, "dense and compressed models"});
  LoadedModel& dense = denseModel(request.modelDir, request.device);
  LoadedModel& compressed = compressedModel(request.outDir, request.device);
  const QString modelKey = denseKey_;

  if (text) {
    const std::vector<TokenId> ids = dense.tokenizer->encode(readTextFile(str(eval.heldOutText)), false);
    PerplexityOptions o;
    o.window = eval.perplexityWindow;
    o.maxWindows = eval.perplexityMaxWindows;
    record.metrics[metric::kPerplexity] = computePerplexity(*compressed.model, ids, o, progress, cancel).ppl;
    const QString key = QStringLiteral("%1|%2|%3|%4").arg(modelKey, eval.heldOutText).arg(o.window).arg(o.maxWindows);
    auto cached = densePerplexity_.find(key);
    if (cached == densePerplexity_.end())
      cached = densePerplexity_.emplace(key, computePerplexity(*dense.model, ids, o, progress, cancel).ppl).first;
    record.metrics[metric::kDensePerplexity] = cached->second;
  }
  if (prompts) {
    const std::vector<std::vector<TokenId>> ids =
        comparablePromptIds(dense, compressed, firstPrompts(eval.prompts, eval.maxPrompts));
    DecodeFidelityOptions f;
    f.maxNewTokens = eval.maxNewTokens;
    f.eosTokenIds = dense.eosTokenIds;
    const FidelityResult fidelity = decodeFidelity(*dense.model, *compressed.model, ids, f, progress, cancel);
    record.metrics[metric::kDecodeNll] = fidelity.decodeNll;
    record.metrics[metric::kDenseDecodeNll] = fidelity.denseNll;
    record.metrics[metric::kTop1Agreement] = fidelity.top1Agreement;
    record.metrics[metric::kSharedPrefix] = fidelity.sharedPrefixMean;

    if (eval.driftSteps > 0) {
      ActivationDriftOptions d;
      d.steps = eval.driftSteps;
      d.eosTokenIds = dense.eosTokenIds;
      auto drift = std::make_shared<ActivationDriftResult>(
          activationDrift(*dense.model, *compressed.model, ids, d, progress, cancel));
      double plateau = 0;
      int64_t settling = -1;
      for (const DriftCurveSummary& s : drift->free.summary) {
        if (!std::isnan(s.plateau)) plateau = std::max(plateau, s.plateau);
        settling = std::max(settling, s.stepsTo90);
      }
      record.metrics[metric::kDriftPlateauMax] = plateau;
      if (settling >= 0) record.metrics[metric::kDriftStepsTo90Max] = double(settling);
      record.drift = std::move(drift);
    }
    if (eval.hessianStudy && text) {
      const QString key = QStringLiteral("%1|%2|%3|%4|%5|%6")
                              .arg(modelKey, eval.heldOutText, eval.prompts)
                              .arg(eval.studyTokens)
                              .arg(eval.perplexityWindow)
                              .arg(eval.maxNewTokens);
      auto cached = studies_.find(key);
      if (cached == studies_.end()) {
        HessianStudyOptions h;
        h.textFile = str(eval.heldOutText);
        h.promptsFile = str(eval.prompts);
        h.calibTokens = eval.studyTokens;
        h.window = eval.perplexityWindow;
        h.maxNewTokens = eval.maxNewTokens;
        auto study = std::make_shared<const HessianStudyResult>(runHessianStudy(dense, h, progress, cancel));
        cached = studies_.emplace(key, std::move(study)).first;
      }
      record.discrepancy = cached->second;
      record.metrics[metric::kDiscrepancyFraction] = cached->second->summary.fractionDecodeSmaller;
      record.metrics[metric::kDiscrepancyMedianRatio] = cached->second->summary.medianRatio;
    }
  }
}

void EngineWorker::generate(const GenerationRequest& request) {
  try {
    QElapsedTimer timer;
    timer.start();
    LoadedModel& dense = denseModel(request.modelDir, request.device);
    LoadedModel* compressed =
        request.compressedDir.isEmpty() ? nullptr : &compressedModel(request.compressedDir, request.device);
    const std::vector<TokenId> prompt = dense.promptIds(str(request.prompt));
    if (compressed != nullptr && compressed->promptIds(str(request.prompt)) != prompt)
      throw InputError(fileMessage(str(request.compressedDir), "its tokenizer reads the prompt differently from the dense model's"));
    // The core's generation stream for each model, taking turns a token at a time so that both texts grow as
    // they come; greedy: the same choice rule for both.
    GenerationOptions options;
    options.maxNewTokens = request.maxNewTokens;
    options.eosTokenIds = dense.eosTokenIds;
    struct Side {
      LoadedModel* model;
      bool compressed;
      GenerationStream stream;
    };
    std::vector<Side> sides;
    sides.push_back({&dense, false, GenerationStream(*dense.model, prompt, options)});
    if (compressed != nullptr) {
      options.eosTokenIds = compressed->eosTokenIds;
      sides.push_back({compressed, true, GenerationStream(*compressed->model, prompt, options)});
    }
    int64_t generated = 0;
    for (bool any = true; any;) {
      if (request.cancel && request.cancel->isCancelled()) break;
      any = false;
      for (Side& s : sides) {
        if (!s.stream.step()) continue;
        ++generated;
        any = true;
        emit generationText(s.compressed, qs(s.model->tokenizer->decode(s.stream.tokens(), /*skipSpecialTokens=*/true)));
      }
    }
    // Each model's decode speed over its own steps after the first (which holds the prompt's prefill), taken in
    // turns on the same device: the LibTorch loop with unpacked weights, not the packed-kernel runtime.
    QStringList speeds;
    for (const Side& s : sides)
      if (s.stream.tokens().size() > 1 && s.stream.decodeSeconds() > 0)
        speeds << tr("%1 %2 tok/s")
                      .arg(s.compressed ? tr("compressed") : tr("dense"))
                      .arg(QLocale().toString(double(s.stream.tokens().size() - 1) / s.stream.decodeSeconds(), 'f', 1));
    const double seconds = double(timer.elapsed()) / 1000.0;
    emit generationFinished(tr("%1 tokens in %2 s on %3%4")
                                .arg(generated)
                                .arg(QLocale().toString(seconds, 'f', 1))
                                .arg(qs(deviceDescription(dense.model->options().device)))
                                .arg(speeds.isEmpty() ? QString() : " · " + speeds.join(", ")));
  } catch (const std::exception& e) {
    emit generationFailed(qs(e.what()));
  }
}

}  // namespace pareto
