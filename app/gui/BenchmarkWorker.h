// The workbench's benchmark worker, on its own QThread beside the EngineWorker (so a benchmark never waits for a
// compress run's queue, nor a run for a benchmark). It also owns the window's second connection to the run store
// (core/store; connections coordinate as processes do), for what the window reads and deletes there: the kernel
// measurements predicted tokens/s use, and runs the user deletes. No SQLite or engine call runs on the GUI
// thread.
//
// A benchmark session (run()) is core's BenchmarkJob (jobs/BenchmarkJob.h) streamed: the kernels at the model's
// linear shapes (benchmarkShapeOf) format by format (dense first), then the decode loop at batch 1 (a model folder
// once, as stored; a synthetic model once per decode format), each result reaching the strip as soon as it is
// measured. On CUDA with `bench kernels` and `bench decode` defaults; without CUDA (no device, no CUDA build, or
// the CPU chosen) the kernels' float64 CPU references with tiny settings (CpuBenchmarkSettings), labelled as
// such. Results are BenchmarkPoints of the Kernel and Decode kinds. A finished session is recorded by the job as
// one bench run whose rows are as `pareto-cli bench kernels` and `bench decode` write them; a cancelled or failed
// one records nothing. Cancel is checked between formats and between decode runs.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <QVector>
#include <memory>
#include <vector>

#include "app/gui/EngineWorker.h"
#include "compress/RecipeEstimate.h"
#include "jobs/BenchmarkJob.h"
#include "util/Progress.h"
#include "widgets/BenchmarkStrip.h"

namespace pareto {

class ExperimentStore;
struct ModelSummary;

struct BenchmarkRequest {
  enum class Kind { Kernels, Decode, KernelsAndDecode };
  Kind kind = Kind::Kernels;
  QString modelDir;              // the loaded model folder: its identity is recorded with the bench run, or
  QString synthetic;             // a synthetic model (checkpoint/ModelPresets.h name); modelDir is then empty
  ModelShape shape;              // benchmarkShapeOf(the model)
  QStringList formats;           // kernel formats (runtime/KernelBenchmark.h names), dense first
  QStringList unbenchmarkable;   // layouts of the recipe no kernel runs (shown, not measured)
  QStringList decodeFormats;     // synthetic: weight formats of the decode loop (decodeFormatsOf), dense first
  QStringList notDecodable;      // kernel formats the decode loop has no weight format for (shown, not run)
  QString device;                // "cpu", "cuda:0"
  QString deviceLabel;           // "NVIDIA H200 (cuda:0)", "CPU"
  // On CUDA the settings `bench kernels` and `bench decode` default to; on the CPU references these tiny ones.
  CpuBenchmarkSettings cpu;
  std::shared_ptr<CancelToken> cancel;
};

// The decode loop's weight formats for a synthetic model benchmarked with these kernel formats: dense first, then
// each kernel format the decode runtime has a weight format of (runtime/PackedLinear.h); the others (cuSPARSELt)
// go to `left` when given.
QStringList decodeFormatsOf(const QStringList& kernelFormats, QStringList* left = nullptr);

// One layer's linears of the model as a decode step runs them (q, k, v fused; gate and up fused), and its layer
// count, named after the model's folder. Throws InputError when the config lacks a size it needs.
ModelShape benchmarkShapeOf(const ModelSummary& model, const std::string& name);

// The name core's device description gives a compute device ("NVIDIA H200" for "NVIDIA H200 (cuda:0)", "cpu"),
// which stored kernel benchmarks are matched against (compress/RecipeEstimate.h benchmarkDeviceMatches).
QString benchmarkDeviceName(const ComputeDevice& device);

// A run whose predicted tokens/s may be re-derived from new kernel measurements.
struct PredictionInput {
  int runId = 0;
  QString modelDir;
  std::string recipeJson;
};

struct RunPrediction {
  int runId = 0;
  double tokensPerSecond = 0, denseTokensPerSecond = 0;
  QString source;
};

class BenchmarkWorker : public QObject {
  Q_OBJECT

 public:
  BenchmarkWorker();
  ~BenchmarkWorker() override;

  // Called on the worker thread (through QMetaObject::invokeMethod with a queued functor).
  void run(const BenchmarkRequest& request);
  // The newest batch-1 kernel measurement per format recorded for this device (benchmarkDeviceName) in the run
  // store's bench runs, with the times they were recorded; emits measurementsLoaded.
  void loadMeasurements(const QString& deviceName);
  // Predicted tokens/s of these runs from `bandwidth` (the measurements of their device), where its kernels
  // cover the run's recipe; emits predictionsReady with those (runs whose model or recipe cannot be read are
  // left out).
  void predict(const QVector<PredictionInput>& runs, const DecodeBandwidth& bandwidth);
  // Deletes runs of the store (their metrics, module stats, curves and benchmark rows go with them); emits
  // runsDeleted with how many went and the errors, if any.
  void deleteRuns(const QVector<qint64>& storeIds);
  // Stores a run's tag and note (ExperimentStore::setRunLabel); labelSaved says how it went.
  void setRunLabel(qint64 storeId, const QString& tag, const QString& note);

 signals:
  void started(const pareto::BenchmarkSession& session);
  void progress(double fraction, const QString& message);
  void pointMeasured(const pareto::BenchmarkPoint& point);
  // Recorded as run storeRunId (0: not recorded, the message says why).
  void finished(const QString& message, qint64 storeRunId);
  void cancelled(const QString& message);
  void failed(const QString& message);
  void measurementsLoaded(const QString& deviceName, const std::vector<pareto::KernelMeasurement>& measurements);
  void predictionsReady(const QVector<pareto::RunPrediction>& predictions);
  void runsDeleted(int deleted, const QString& error);
  void labelSaved(qint64 storeId, const QString& error);

 private:
  ExperimentStore* store(QString* error);

  std::unique_ptr<ExperimentStore> store_;
  QString storeError_;
};

}  // namespace pareto

Q_DECLARE_METATYPE(pareto::RunPrediction)
Q_DECLARE_METATYPE(std::vector<pareto::KernelMeasurement>)
