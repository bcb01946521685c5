// The workbench window. Docks: Model (folder, Hugging Face cache, recent models, synthetic models of known
// architectures, device, summary), Recipe
// (recipe controls with instant estimates, evaluation settings, Run), Runs (this session's history) and
// Generation (dense vs compressed, streaming). The Runs dock starts with the runs of the
// experiment store (pareto-cli's database) under their store ids, every kind and status as `pareto-cli runs` lists
// them, read on the worker thread; every run the window starts is recorded there by the worker and appears in the
// Runs dock (and, finished, in the Pareto view of its model) when it ends. Deleting runs there
// deletes them from the store too; Export writes the selected run's folder for llama.cpp (GGUF), vLLM
// (compressed-tensors) or transformers (dense), as pareto-cli's exports do (RunExporter). Central tabs: Inspect, Drift, Discrepancy, Pareto, Compare, Benchmark and Search. Search runs core's
// search of the trade-off on the engine worker and loads a clicked front point's recipe into the Recipe dock.
//
// All engine work (compress, evaluate, generate, device probing) runs on an EngineWorker on its own QThread,
// reached through queued calls and queued signals only. The benchmark (Run ▸ Benchmark, the Benchmark tab's live
// strip: the kernels at the model's shapes, then its decode loop) runs on a BenchmarkWorker on a second QThread,
// which also reads the store's kernel
// measurements of the current device: predicted tokens/s (the Recipe dock, new runs, and the runs of that device
// in the Runs dock and Pareto view) come from them wherever they cover the recipe. Reading a model folder's
// headers for the summary stays on the GUI thread: it touches no weights and is instant.
//
// A synthetic model (File ▸ Open Synthetic Model, or the Model dock) is a published configuration with random
// weights (checkpoint/ModelPresets.h): the Model dock and the Recipe dock's estimates work from its configuration and
// Benchmark measures it; compressing, evaluating and generating need real weights and are disabled with a reason.
#pragma once

#include <QElapsedTimer>
#include <QMainWindow>
#include <QThread>
#include <QVector>
#include <functional>
#include <memory>
#include <optional>

#include "app/gui/BenchmarkWorker.h"
#include "app/gui/EngineWorker.h"
#include "model/ModelSummary.h"

class QComboBox;
class QLabel;
class QMenu;
class QPlainTextEdit;
class QProgressBar;
class QScrollArea;
class QTabWidget;
class QToolButton;

namespace pareto {

class BenchmarkStrip;
class DiscrepancyView;
class DriftView;
class EvaluationPanel;
class GenerationPanel;
class ModelSummaryView;
class ParetoView;
class RecipePanel;
class RunCompareView;
class RunHistory;
class RunExporter;
class RunsPanel;
class SearchView;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Reads the folder's config and safetensors headers and shows them. On failure the message (naming the folder
  // or file at fault) goes to the error reporter and the model shown before stays; returns whether it loaded.
  bool openModel(const QString& dir);
  // Opens a synthetic model of a known architecture (a checkpoint/ModelPresets.h name); reports an unknown name.
  bool openSyntheticModel(const QString& preset);
  // The synthetic model open ("" : a folder or nothing).
  QString currentSyntheticModel() const { return syntheticPreset_; }

  // Where errors go: a modal message box unless replaced (tests replace it so that nothing blocks).
  using ErrorReporter = std::function<void(const QString& title, const QString& message)>;
  void setErrorReporter(ErrorReporter reporter);

  // Starts compress + evaluate of the Recipe dock's recipe on the worker. Returns false (and reports why) when
  // no model is open, the recipe has problems, or a run is in progress.
  bool startRun();
  void cancelRun();
  bool isRunning() const { return static_cast<bool>(runCancel_); }
  // The running job's token (null when idle); cancelling it is what the Cancel button does.
  std::shared_ptr<CancelToken> runCancelToken() const { return runCancel_; }

  // Makes a finished compress run the current one: its drift and discrepancy in the tabs, its folder for
  // generation. Another run (a benchmark, a failed run) is only selected in the Runs dock.
  void openRun(int runId);
  // The open model's key (RunRecord::modelKey(): its content hash); "" without a model folder.
  QString currentModelKey() const { return currentModelKey_; }
  int currentRunId() const { return currentRunId_; }
  void compareRuns(const QList<int>& runIds);
  // Removes the runs from the history (and its views) at once and deletes them from the store on the
  // benchmark worker (runsDeleted reports how it went). The Runs dock asks for confirmation before calling it.
  void deleteRuns(const QList<int>& runIds);

  // Starts the benchmark on the current device: the current recipe's kernel formats and dense at the loaded
  // model's shapes, then the model's decode loop (a folder in its stored formats; a synthetic model in dense and
  // each of the recipe's kernel formats the decode runtime has). Returns false (and reports why) without a
  // model, or while a run or a benchmark is in progress.
  bool startBenchmark();
  void cancelBenchmark();
  // Measures the decode loop of a finished run's compressed folder on the current device (Runs dock ▸
  // Benchmark); recorded as a bench run of that folder, whose tok/s then stands for the run's speed.
  bool benchmarkRun(int runId);
  // Starts the Search view's search (jobs/SearchJob.h) on the worker for the open model and current device;
  // false (and the reason reported) without a model folder, or while a run or a search is in progress.
  bool startSearch(const QString& baseRecipe, int budgetKind, double budget);
  void cancelSearch();
  bool isSearching() const { return static_cast<bool>(searchCancel_); }
  bool isBenchmarking() const { return static_cast<bool>(benchCancel_); }
  // The store's kernel measurements of the current device (empty: none, or not read yet).
  const std::vector<KernelMeasurement>& kernelMeasurements() const { return measurements_; }
  // The bandwidth predicted tokens/s on the current device come from: its copy bandwidth and its measurements.
  DecodeBandwidth currentBandwidth() const;
  // The devices as probed (their copy bandwidth and when it was measured).
  const QVector<ComputeDevice>& devices() const { return devices_; }
  // Measures the current device's copy bandwidth again (Run ▸ Measure Copy Bandwidth); devicesReady follows.
  // Otherwise a device's bandwidth is measured once and kept (settings) across sessions.
  void remeasureBandwidth();

  // The folder of the shipped recipes: $PARETO_RECIPES, else the source tree's resources/recipes.
  static QString shippedRecipesDir();

  // View ▸ Reset Layout: every dock back where a first start puts it, at its default size.
  void resetLayout();

  // Selects the central tab whose title matches (case-insensitive); false when there is none.
  bool selectTab(const QString& name);
  QStringList tabNames() const;
  // Renders the window as it is now to a PNG file.
  bool saveScreenshot(const QString& path, QString* error);

  void selectDevice(const QString& id);
  QString currentDevice() const;

  ModelSummaryView* modelView() const { return modelView_; }
  RecipePanel* recipePanel() const { return recipePanel_; }
  EvaluationPanel* evaluationPanel() const { return evaluationPanel_; }
  RunsPanel* runsPanel() const { return runsPanel_; }
  GenerationPanel* generationPanel() const { return generationPanel_; }
  DriftView* driftView() const { return driftView_; }
  DiscrepancyView* discrepancyView() const { return discrepancyView_; }
  ParetoView* paretoView() const { return paretoView_; }
  SearchView* searchView() const { return searchView_; }
  RunCompareView* compareView() const { return compareView_; }
  RunHistory* history() const { return history_; }
  BenchmarkStrip* benchmarkStrip() const { return benchmarkStrip_; }
  EngineWorker* worker() const { return worker_; }
  // The Export menu: the selected run's folder as GGUF, compressed-tensors or a dense Hugging Face checkpoint.
  RunExporter* exporter() const { return exporter_; }
  BenchmarkWorker* benchmarkWorker() const { return bench_; }
  QAction* benchmarkAction() const { return benchAction_; }
  QAction* runAction() const { return runAction_; }
  QAction* cancelAction() const { return cancelAction_; }
  QString currentModelDir() const { return currentModelDir_; }

 signals:
  void runEnded(bool succeeded, const QString& message);
  void devicesReady();
  void generationEnded(bool succeeded);
  // The experiment store's finished compress runs are in the history (read on the worker at startup).
  void historyLoaded(int storedRuns, const QString& error);
  void benchmarkEnded(bool succeeded, const QString& message);
  // The kernel measurements of the current device were (re)read from the store.
  void measurementsLoaded(int measurements);
  // A search finished (succeeded), was cancelled or failed; the message says which.
  void searchEnded(bool succeeded, const QString& message);
  // Runs of the current device got their predicted tokens/s from new kernel measurements.
  void predictionsUpdated(int runs);
  void runsDeleted(int deletedFromStore, const QString& error);
  // A run's tag and note went to the store ("" error) or did not.
  void labelSaved(int runId, const QString& error);

 protected:
  void showEvent(QShowEvent* event) override;
  void closeEvent(QCloseEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void createWorker();
  // Each dock's minimum width: what its widest row of controls needs (it scrolls vertically, never sideways).
  void fitDocks();
  void applyDefaultDockSizes();
  // Makes the central tab holding this view the current one.
  void showPage(QWidget* page);
  void connectBenchmarkWorker();
  void requestMeasurements();
  void predictRuns();
  void benchmarkDone(bool succeeded, const QString& message);
  const ComputeDevice* findDevice(const QString& id) const;
  void createDocksAndTabs();
  QWidget* createModelDock();
  void createMenus();
  void createStatusBar();
  void connectWorker();
  void chooseModelFolder();
  void rebuildRecentMenu();
  void refreshHuggingFaceModels();
  QString syntheticModelReason() const;
  void openRecipe();
  void saveRecipeAs();
  void showAbout();
  void restoreSettings();
  void saveSettings() const;
  void updateRunnable();
  void applyDevice();
  void startGeneration(const QString& prompt, int maxNewTokens);
  void runDone(bool succeeded, const QString& message);
  // The status bar's one bar for the whole run: stage, percent and the time left at the pace so far.
  void showRunProgress();
  // Reads the store's runs the history does not have yet (a cancelled, failed or benchmark run; a CLI's).
  void syncHistory();
  // Clears the views of the current run (drift, discrepancy, the Generation dock's compressed model).
  void closeRun();
  QString uniqueRunFolder() const;

  QThread workerThread_;
  EngineWorker* worker_ = nullptr;
  QThread benchThread_;
  BenchmarkWorker* bench_ = nullptr;
  std::shared_ptr<CancelToken> benchCancel_;
  std::vector<KernelMeasurement> measurements_;
  QString measurementsDevice_;   // the device name the measurements are of
  QList<int> comparedIds_;
  std::shared_ptr<CancelToken> runCancel_;
  std::shared_ptr<CancelToken> searchCancel_;
  std::shared_ptr<CancelToken> generationCancel_;
  QVector<ComputeDevice> devices_;

  std::optional<ModelSummary> summary_;
  ModelSummaryView* modelView_ = nullptr;
  QComboBox* hfModels_ = nullptr;
  QComboBox* syntheticModels_ = nullptr;
  QComboBox* deviceCombo_ = nullptr;
  RecipePanel* recipePanel_ = nullptr;
  EvaluationPanel* evaluationPanel_ = nullptr;
  RunHistory* history_ = nullptr;
  RunsPanel* runsPanel_ = nullptr;
  GenerationPanel* generationPanel_ = nullptr;
  QPlainTextEdit* inspectText_ = nullptr;
  DriftView* driftView_ = nullptr;
  DiscrepancyView* discrepancyView_ = nullptr;
  ParetoView* paretoView_ = nullptr;
  SearchView* searchView_ = nullptr;
  RunCompareView* compareView_ = nullptr;
  BenchmarkStrip* benchmarkStrip_ = nullptr;
  QTabWidget* centralTabs_ = nullptr;
  QMenu* viewMenu_ = nullptr;
  QMenu* recentMenu_ = nullptr;
  QMenu* hfMenu_ = nullptr;
  QMenu* syntheticMenu_ = nullptr;
  QLabel* modelStatus_ = nullptr;
  QLabel* overlapWarning_ = nullptr;   // calibration text == held-out text
  QProgressBar* progressBar_ = nullptr;
  QLabel* progressLabel_ = nullptr;
  QToolButton* cancelButton_ = nullptr;
  RunExporter* exporter_ = nullptr;
  QAction* runAction_ = nullptr;
  QAction* cancelAction_ = nullptr;
  QAction* benchAction_ = nullptr;
  QString currentModelDir_;   // empty with a synthetic model
  QString syntheticPreset_;
  QString currentModelKey_;
  QMap<QString, double> measuredSpeeds_;   // batch-1 decode tok/s of benchmarked folders, from the store   // the open model's content hash (RunRecord::modelKey()); "" for none or synthetic
  QString runOutDir_;
  int currentRunId_ = 0;
  QElapsedTimer runTimer_;
  double runFraction_ = 0;
  QString runStage_;
  QScrollArea* modelScroll_ = nullptr;
  QScrollArea* recipeScroll_ = nullptr;
  QByteArray defaultState_;   // the layout as created (View ▸ Reset Layout)
  QByteArray savedState_;     // the layout of the last session, restored on the first show
  bool shown_ = false;
  ErrorReporter reportError_;
};

}  // namespace pareto
