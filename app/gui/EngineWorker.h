// The workbench's only caller of the engine's compress+evaluate and generate jobs (core/jobs). It lives on its
// own QThread; the window hands it work through queued calls and hears back through queued signals, so no
// engine call ever runs on the GUI thread. It only turns the window's requests into job options and the jobs'
// reports into RunRecords and signals.
//
// An export of a run's folder (the window's Export menu) is core's ExportJob, the job `pareto-cli export` runs:
// the same bytes, the same refusals; a cancel leaves the destination as it was.
//
// A run is core's CompressEvaluateJob (jobs/CompressEvaluateJob.h) with the window's recipe and evaluation
// settings: compress, then perplexity and KL divergence to the dense model, decode fidelity, activation drift
// and, when asked, the Hessian study. Cancel stops within one layer and leaves no output folder. The dense model
// and the Hessian study are kept between runs (EvaluationCache).
//
// Every run is recorded in the experiment store (core/store) as pareto-cli records its compress runs: the job
// builds its run record (jobs/Job.h runRecorded). The database is pareto-cli's default ($PARETO_DB, else the XDG
// location), so CLI and GUI runs land in one file. The worker owns the only connection and uses it on its
// thread; loadHistory() reads the stored runs there too, so no SQLite call ever runs on the GUI
// thread. History never costs a result: a database that cannot be opened or written leaves the run unrecorded
// and is reported (storeProblem).
#pragma once

#include <QDateTime>
#include <QMap>
#include <QObject>
#include <QSet>
#include <QString>
#include <QStringList>
#include <QVector>
#include <map>
#include <memory>
#include <string>

#include "compress/RecipeEstimate.h"
#include "util/Progress.h"
#include "widgets/EvaluationPanel.h"
#include "widgets/GenerationPanel.h"
#include "widgets/RunRecord.h"

namespace pareto {

class ExperimentStore;
struct EvaluationCache;
struct SearchReport;

// A search of the trade-off (jobs/SearchJob.h), as `pareto-cli search` runs it; the report goes to the Search view.
struct SearchRequest {
  QString modelDir;
  QString baseRecipe;
  int budgetKind = 0;   // search/Search.h BudgetKind's order: bits per weight, bytes, tokens/s
  double budget = 0;
  QString device;
  bool refine = true;   // SearchOptions::refine: the estimate refined by measured KL
  DecodeBandwidth bandwidth;
  std::shared_ptr<CancelToken> cancel;   // the window keeps a copy to cancel with
};

struct RunRequest {
  QString modelDir;
  std::string recipeJson;
  QString outDir;       // must not exist yet
  QString device;       // "cpu", "cuda:0"
  EvaluationSettings evaluation;
  DecodeBandwidth bandwidth;
  std::shared_ptr<CancelToken> cancel;   // the window keeps a copy to cancel with
};

struct GenerationRequest {
  QString modelDir;         // dense
  QString compressedDir;    // "" for the dense model alone
  QString device;
  QString prompt;
  int maxNewTokens = 48;
  GenerationSampling sampling;
  std::shared_ptr<CancelToken> cancel;
};

// An export of a run's folder (jobs/ExportJob.h), as `pareto-cli export <kind>` writes it.
struct ExportRequest {
  QString kind;        // "hf", "gguf", "compressed-tensors"
  QString modelDir;    // the run's compressed folder
  QString out;         // the output folder, or the .gguf file
  QString type;        // gguf: --type; hf, compressed-tensors: --dtype; "": the export's default
  bool overwrite = false;
  std::shared_ptr<CancelToken> cancel;   // the window keeps a copy to cancel with
};

struct ComputeDevice {
  QString id;      // "cpu", "cuda:0"
  QString label;   // "CPU", "NVIDIA H200 (cuda:0)"
  double copyBytesPerSecond = 0;
  QDateTime measuredAt;   // when copyBytesPerSecond was measured (kept in the store; invalid: unknown)
  // Where predicted tokens/s on this device come from without kernel benchmarks: its copy bandwidth, the ceiling
  // of any decode kernel that streams the weights, as measured once (and re-measured on request), dated.
  DecodeBandwidth bandwidth() const;
};

class EngineWorker : public QObject {
  Q_OBJECT

 public:
  EngineWorker();
  ~EngineWorker() override;

  // Called on the worker thread (through QMetaObject::invokeMethod with a queued functor).
  // Lists the devices with their copy bandwidth as the experiment store keeps it (jobs/DeviceBandwidth.h, the
  // figure `pareto-cli bench copy` and `search` use too): the stored one, else (or for a label in `remeasure`)
  // measured now and stored.
  void probeDevices(const QSet<QString>& remeasure = {});
  void run(const RunRequest& request);
  void generate(const GenerationRequest& request);
  // Runs core's ExportJob; its report lines (what pareto-cli prints) arrive with exportFinished, a refusal's
  // message (what pareto-cli prints after "error:") with exportFailed.
  void exportModel(const ExportRequest& request);
  // Runs core's SearchJob; nothing is written (a front point's recipe is loaded into the Recipe dock).
  void search(const SearchRequest& request);
  // Reads the store's runs (every kind and status, as `pareto-cli runs` lists them) but those with the `known`
  // ids, oldest first, and emits historyLoaded (errors in its message).
  void loadHistory(const QSet<qint64>& known = {});

 signals:
  void devicesProbed(const QVector<pareto::ComputeDevice>& devices);
  void progress(const QString& stage, double fraction, const QString& message);
  // The whole run's fraction (jobs/JobProgress.h: its stages weighted by their expected time), after each report.
  void runProgress(double fraction);
  void runFinished(const pareto::RunRecord& record);
  void runCancelled(const QString& message);
  void runFailed(const QString& message);
  void generationText(bool compressed, const QString& text);
  void generationFinished(const QString& summary);
  void generationFailed(const QString& message);
  void historyLoaded(const QVector<pareto::RunRecord>& runs, const QString& error);
  // Batch-1 decode tokens/s measured on benchmarked folders (absolute paths), the newest of each; emitted by
  // loadHistory before historyLoaded.
  void measuredSpeeds(const QMap<QString, double>& byFolder);
  void exportProgress(double fraction, const QString& message);
  void exportFinished(const QString& summary);
  void exportCancelled(const QString& message);
  void exportFailed(const QString& message);
  void searchProgress(double fraction, const QString& message);
  void searchFinished(std::shared_ptr<const pareto::SearchReport> report);
  void searchCancelled(const QString& message);
  void searchFailed(const QString& message);
  // The store could not be used (opened or written); runs go on unrecorded.
  void storeProblem(const QString& message);

 private:
  ExperimentStore* store();   // opened on first use; null when it cannot be

  std::unique_ptr<ExperimentStore> store_;
  QString storeError_;

  QVector<ComputeDevice> devices_;   // as probed, for runs asked for before the window heard of them
  // The dense model and the Hessian study depend only on the model, the device and the data: kept between runs
  // (and the models for generation).
  std::unique_ptr<EvaluationCache> cache_;   // jobs/CompressEvaluateJob.h (LibTorch: not in a Qt header)
};

}  // namespace pareto

Q_DECLARE_METATYPE(pareto::RunRecord)
Q_DECLARE_METATYPE(pareto::ComputeDevice)
Q_DECLARE_METATYPE(std::shared_ptr<const pareto::SearchReport>)
