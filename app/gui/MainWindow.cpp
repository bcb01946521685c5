#include "app/gui/MainWindow.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPixmap>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSet>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolBar>
#include <QToolButton>
#include <QUndoStack>
#include <QVBoxLayout>
#include <algorithm>
#include <exception>

#include "app/gui/HuggingFaceCache.h"
#include "app/gui/RecentModels.h"
#include "app/gui/RunExporter.h"
#include "app/gui/SyntheticModel.h"
#include "model/ModelSummary.h"
#include "store/ModelIdentity.h"
#include "jobs/JobProgress.h"
#include "util/Error.h"
#include "widgets/BenchmarkStrip.h"
#include "widgets/DiscrepancyView.h"
#include "widgets/DisplayFormat.h"
#include "widgets/DriftView.h"
#include "widgets/EvaluationPanel.h"
#include "widgets/GenerationPanel.h"
#include "widgets/ModelSummaryView.h"
#include "widgets/ParetoView.h"
#include "widgets/SearchView.h"
#include "search/Search.h"
#include "widgets/RecipePanel.h"
#include "widgets/RunCompareView.h"
#include "widgets/RunHistory.h"
#include "widgets/RunsPanel.h"
#include "util/Version.h"

namespace pareto {

namespace {

const char* kGeometryKey = "mainWindow/geometry";
const char* kStateKey = "mainWindow/state";
const char* kLastParentKey = "mainWindow/lastModelParent";
const char* kLastRecipeDirKey = "mainWindow/lastRecipeDir";
const char* kDeviceKey = "device";
const char* kRecipeKey = "recipe/current";

// The single local folder being dragged, or empty when the drag is anything else.
QString draggedFolder(const QMimeData* mime) {
  if (mime == nullptr || !mime->hasUrls() || mime->urls().size() != 1) return {};
  const QUrl url = mime->urls().constFirst();
  if (!url.isLocalFile()) return {};
  const QString path = url.toLocalFile();
  return QFileInfo(path).isDir() ? path : QString();
}

QDockWidget* makeDock(QMainWindow* window, const QString& title, const char* name, QWidget* content) {
  auto* dock = new QDockWidget(title, window);
  dock->setObjectName(name);   // saveState() identifies docks by object name
  dock->setWidget(content);
  return dock;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setObjectName("mainWindow");
  setWindowTitle(tr("Pareto"));
  setAcceptDrops(true);
  reportError_ = [this](const QString& title, const QString& message) {
    QMessageBox::critical(this, title, message);
  };
  history_ = new RunHistory(this);
  createWorker();
  createDocksAndTabs();
  createMenus();
  createStatusBar();
  connectWorker();
  connectBenchmarkWorker();
  restoreSettings();
  updateRunnable();
  refreshHuggingFaceModels();
  // The stored runs are read on the worker, before any run the window starts there (its calls run in order).
  QMetaObject::invokeMethod(worker_, [w = worker_] { w->loadHistory(); }, Qt::QueuedConnection);
  // The devices (and their copy bandwidth, for predicted tokens/s) are probed on the worker: CUDA's first call
  // can take seconds.
  QMetaObject::invokeMethod(worker_, [w = worker_] { w->probeDevices(); }, Qt::QueuedConnection);
}

void MainWindow::remeasureBandwidth() {
  const ComputeDevice* d = findDevice(currentDevice());
  if (d == nullptr) return;
  statusBar()->showMessage(tr("Measuring the copy bandwidth of %1…").arg(d->label));
  QMetaObject::invokeMethod(
      worker_, [w = worker_, label = d->label] { w->probeDevices({label}); },
      Qt::QueuedConnection);
}

MainWindow::~MainWindow() {
  if (runCancel_) runCancel_->cancel();
  if (searchCancel_) searchCancel_->cancel();
  if (generationCancel_) generationCancel_->cancel();
  if (benchCancel_) benchCancel_->cancel();
  workerThread_.quit();
  benchThread_.quit();
  workerThread_.wait();   // the job stops at its next check (within one layer or batch)
  benchThread_.wait();    // the benchmark at its next layer or format
}

void MainWindow::createWorker() {
  worker_ = new EngineWorker;
  worker_->moveToThread(&workerThread_);
  connect(&workerThread_, &QThread::finished, worker_, &QObject::deleteLater);
  workerThread_.setObjectName("engine");
  workerThread_.start();
  bench_ = new BenchmarkWorker;
  bench_->moveToThread(&benchThread_);
  connect(&benchThread_, &QThread::finished, bench_, &QObject::deleteLater);
  benchThread_.setObjectName("benchmark");
  benchThread_.start();
}

void MainWindow::createDocksAndTabs() {
  centralTabs_ = new QTabWidget;
  centralTabs_->setObjectName("centralTabs");
  centralTabs_->setDocumentMode(true);
  inspectText_ = new QPlainTextEdit;
  inspectText_->setObjectName("inspectText");
  inspectText_->setReadOnly(true);
  inspectText_->setLineWrapMode(QPlainTextEdit::NoWrap);
  inspectText_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  inspectText_->setPlaceholderText(
      tr("Open a model folder (File ▸ Open Model Folder…, or drop a folder on this window) to see its "
         "architecture and tensors."));
  inspectText_->setToolTip(tr("The model report exactly as `pareto-cli inspect` prints it, ready to copy."));
  driftView_ = new DriftView;
  discrepancyView_ = new DiscrepancyView;
  paretoView_ = new ParetoView(history_);
  searchView_ = new SearchView(history_);
  searchView_->setObjectName("searchView");
  compareView_ = new RunCompareView;
  benchmarkStrip_ = new BenchmarkStrip;
  benchmarkStrip_->setObjectName("benchmarkStrip");
  // Each view scrolls when the window is narrower than it needs, so that no view's minimum width takes room from
  // the docks (and switching tabs never resizes them).
  auto addPage = [this](QWidget* page, const QString& title) {
    auto* scroll = new QScrollArea;
    scroll->setWidget(page);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    centralTabs_->addTab(scroll, title);
  };
  addPage(inspectText_, tr("Inspect"));
  addPage(driftView_, tr("Drift"));
  addPage(discrepancyView_, tr("Discrepancy"));
  addPage(paretoView_, tr("Pareto"));
  addPage(compareView_, tr("Compare"));
  addPage(benchmarkStrip_, tr("Benchmark"));
  addPage(searchView_, tr("Search"));
  centralTabs_->setTabToolTip(0, tr("The model folder's report, as `pareto-cli inspect` prints it."));
  centralTabs_->setTabToolTip(1, tr("Activation drift of the current run: heatmap and per-layer curves."));
  centralTabs_->setTabToolTip(2, tr("Hessian discrepancy per module, text vs decode calibration."));
  centralTabs_->setTabToolTip(3, tr("Every run: quality against cost, with the Pareto front."));
  centralTabs_->setTabToolTip(4, tr("Runs chosen in the Runs dock, side by side."));
  centralTabs_->setTabToolTip(5, tr("The live benchmark: GB/s of the recipe's kernel formats and dense at the loaded "
                                    "model's shapes, then of the model's decode loop, against the copy bandwidth, "
                                    "with the tokens/s the kernels allow and the decode loop measures."));
  centralTabs_->setTabToolTip(6, tr("The best format per module under a budget: the predicted front, each "
                                    "candidate's estimated loss per module, a point's recipe a click away."));
  setCentralWidget(centralTabs_);

  // Docks scroll rather than impose their full height on the window (small screens, tiled window managers).
  auto* modelScroll = new QScrollArea;
  modelScroll->setObjectName("modelScroll");
  modelScroll->setWidget(createModelDock());
  modelScroll->setWidgetResizable(true);
  modelScroll->setFrameShape(QFrame::NoFrame);
  modelScroll_ = modelScroll;
  QDockWidget* modelDock = makeDock(this, tr("Model"), "modelDock", modelScroll);
  addDockWidget(Qt::LeftDockWidgetArea, modelDock);

  recipePanel_ = new RecipePanel;
  recipePanel_->setObjectName("recipePanel");
  evaluationPanel_ = new EvaluationPanel;
  evaluationPanel_->setObjectName("evaluationPanel");
  auto* recipeContent = new QWidget;
  auto* recipeLayout = new QVBoxLayout(recipeContent);
  recipeLayout->setContentsMargins(0, 0, 0, 0);
  recipeLayout->addWidget(recipePanel_);
  auto* evaluationCaption = new QLabel(tr("<b>Evaluation</b>"));
  evaluationCaption->setToolTip(tr("What a run measures after compressing."));
  recipeLayout->addWidget(evaluationCaption);
  recipeLayout->addWidget(evaluationPanel_);
  overlapWarning_ = new QLabel;
  overlapWarning_->setObjectName("calibrationOverlapWarning");
  overlapWarning_->setWordWrap(true);
  overlapWarning_->setToolTip(tr("Perplexity on the text a recipe calibrated on measures fit to that text, not "
                                 "quality on held-out data."));
  QPalette warn = overlapWarning_->palette();
  warn.setColor(QPalette::WindowText, QColor(0xc0, 0x39, 0x2b));
  overlapWarning_->setPalette(warn);
  overlapWarning_->hide();
  recipeLayout->addWidget(overlapWarning_);
  recipeLayout->addStretch(1);
  auto* recipeScroll = new QScrollArea;
  recipeScroll->setObjectName("recipeScroll");
  recipeScroll->setWidget(recipeContent);
  recipeScroll->setWidgetResizable(true);
  recipeScroll->setFrameShape(QFrame::NoFrame);
  recipeScroll_ = recipeScroll;
  QDockWidget* recipeDock = makeDock(this, tr("Recipe"), "recipeDock", recipeScroll);
  addDockWidget(Qt::RightDockWidgetArea, recipeDock);

  runsPanel_ = new RunsPanel(history_);
  generationPanel_ = new GenerationPanel;
  QDockWidget* runsDock = makeDock(this, tr("Runs"), "runsDock", runsPanel_);
  QDockWidget* generationDock = makeDock(this, tr("Generation"), "generationDock", generationPanel_);
  addDockWidget(Qt::BottomDockWidgetArea, runsDock);
  addDockWidget(Qt::BottomDockWidgetArea, generationDock);
  tabifyDockWidget(runsDock, generationDock);
  runsDock->raise();

  recipePanel_->setShippedRecipes(shippedRecipesDir());
  connect(recipePanel_, &RecipePanel::recipeChanged, this, &MainWindow::updateRunnable);
  connect(evaluationPanel_, &EvaluationPanel::runRequested, this, &MainWindow::startRun);
  connect(evaluationPanel_, &EvaluationPanel::settingsChanged, this, &MainWindow::updateRunnable);
  connect(runsPanel_, &RunsPanel::runActivated, this, &MainWindow::openRun);
  connect(paretoView_, &ParetoView::runActivated, this, &MainWindow::openRun);
  connect(runsPanel_, &RunsPanel::compareRequested, this, &MainWindow::compareRuns);
  connect(runsPanel_, &RunsPanel::deleteRequested, this, &MainWindow::deleteRuns);
  connect(runsPanel_, &RunsPanel::benchmarkRequested, this, &MainWindow::benchmarkRun);
  connect(benchmarkStrip_, &BenchmarkStrip::runRequested, this, &MainWindow::startBenchmark);
  connect(benchmarkStrip_, &BenchmarkStrip::cancelRequested, this, &MainWindow::cancelBenchmark);
  connect(runsPanel_, &RunsPanel::recipeRequested, this, [this](int id) {
    const RunRecord* run = history_->find(id);
    if (run == nullptr) return;
    QString error;
    const auto doc = nlohmann::json::parse(run->recipeJson, nullptr, false);
    if (!recipePanel_->setRecipe(doc, QString(), run->name, &error)) reportError_(tr("Cannot use recipe"), error);
  });
  connect(searchView_, &SearchView::searchRequested, this, &MainWindow::startSearch);
  connect(searchView_, &SearchView::cancelRequested, this, &MainWindow::cancelSearch);
  connect(searchView_, &SearchView::recipeChosen, this, [this](const nlohmann::json& recipe, const QString& source) {
    QString error;
    if (!recipePanel_->setRecipe(recipe, QString(), source, &error)) reportError_(tr("Cannot use recipe"), error);
    else statusBar()->showMessage(tr("Loaded the recipe of the %1 into the Recipe dock").arg(source), 10000);
  });
  connect(generationPanel_, &GenerationPanel::generateRequested, this, &MainWindow::startGeneration);
  connect(generationPanel_, &GenerationPanel::stopRequested, this, [this] {
    if (generationCancel_) generationCancel_->cancel();
  });
}

QWidget* MainWindow::createModelDock() {
  auto* content = new QWidget;
  auto* layout = new QVBoxLayout(content);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* form = new QFormLayout;

  auto* hfRow = new QHBoxLayout;
  hfModels_ = new QComboBox;
  hfModels_->setObjectName("huggingFaceModels");
  hfModels_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  hfModels_->setMinimumContentsLength(12);   // long repository names elide; the Open button stays in view
  hfModels_->setToolTip(tr("Models already downloaded to the Hugging Face cache (%1).").arg(huggingFaceHubDir()));
  auto* hfOpen = new QPushButton(tr("Open"));
  hfOpen->setObjectName("openHuggingFaceModel");
  hfOpen->setToolTip(tr("Open the chosen cached model."));
  connect(hfOpen, &QPushButton::clicked, this, [this] {
    const QString path = hfModels_->currentData().toString();
    if (!path.isEmpty()) openModel(path);
  });
  hfRow->addWidget(hfModels_, 1);
  hfRow->addWidget(hfOpen);
  auto* hfCaption = new QLabel(tr("HF cache:"));
  hfCaption->setToolTip(hfModels_->toolTip());
  form->addRow(hfCaption, hfRow);

  auto* syntheticRow = new QHBoxLayout;
  syntheticModels_ = new QComboBox;
  syntheticModels_->setObjectName("syntheticModels");
  syntheticModels_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  syntheticModels_->setMinimumContentsLength(12);
  syntheticModels_->setToolTip(
      tr("Synthetic models: the published configurations of well-known models, built into Pareto, with random "
         "weights. They show the architecture and let Benchmark measure its real speed without a download; they "
         "cannot be compressed or evaluated."));
  for (const QString& name : syntheticModelNames()) {
    syntheticModels_->addItem(name, name);
    syntheticModels_->setItemData(syntheticModels_->count() - 1, describeSyntheticModel(name), Qt::ToolTipRole);
  }
  auto* syntheticOpen = new QPushButton(tr("Open"));
  syntheticOpen->setObjectName("openSyntheticModel");
  syntheticOpen->setToolTip(tr("Open the chosen synthetic model (random weights of the published configuration)."));
  connect(syntheticOpen, &QPushButton::clicked, this, [this] {
    const QString name = syntheticModels_->currentData().toString();
    if (!name.isEmpty()) openSyntheticModel(name);
  });
  syntheticRow->addWidget(syntheticModels_, 1);
  syntheticRow->addWidget(syntheticOpen);
  auto* syntheticCaption = new QLabel(tr("Synthetic:"));
  syntheticCaption->setToolTip(syntheticModels_->toolTip());
  form->addRow(syntheticCaption, syntheticRow);

  deviceCombo_ = new QComboBox;
  deviceCombo_->setObjectName("deviceCombo");
  deviceCombo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  deviceCombo_->setMinimumContentsLength(12);
  deviceCombo_->addItem(tr("CPU"), "cpu");
  deviceCombo_->setToolTip(tr("Where models run for compression, evaluation and generation: the CPU or a CUDA "
                              "GPU (listed by name when this build has CUDA and a GPU is present)."));
  connect(deviceCombo_, qOverload<int>(&QComboBox::currentIndexChanged), this, &MainWindow::applyDevice);
  auto* deviceCaption = new QLabel(tr("Run on:"));
  deviceCaption->setToolTip(deviceCombo_->toolTip());
  form->addRow(deviceCaption, deviceCombo_);
  layout->addLayout(form);

  modelView_ = new ModelSummaryView;
  layout->addWidget(modelView_, 1);
  return content;
}

void MainWindow::createMenus() {
  QMenu* fileMenu = menuBar()->addMenu(tr("&File"));
  QAction* open = fileMenu->addAction(tr("&Open Model Folder…"), this, &MainWindow::chooseModelFolder);
  open->setShortcut(QKeySequence::Open);
  open->setStatusTip(tr("Open a folder with config.json and model.safetensors (or sharded safetensors)."));
  hfMenu_ = fileMenu->addMenu(tr("Open from &Hugging Face Cache"));
  hfMenu_->setObjectName("huggingFaceMenu");
  syntheticMenu_ = fileMenu->addMenu(tr("Open S&ynthetic Model"));
  syntheticMenu_->setObjectName("syntheticMenu");
  syntheticMenu_->setToolTipsVisible(true);
  for (const QString& name : syntheticModelNames()) {
    QAction* action = syntheticMenu_->addAction(name, this, [this, name] { openSyntheticModel(name); });
    action->setToolTip(tr("%1: %2, random weights").arg(name, describeSyntheticModel(name)));
    action->setStatusTip(action->toolTip());
  }
  recentMenu_ = fileMenu->addMenu(tr("Recent &Models"));
  recentMenu_->setObjectName("recentMenu");
  rebuildRecentMenu();
  fileMenu->addSeparator();
  fileMenu->addAction(tr("Open &Recipe…"), this, &MainWindow::openRecipe);
  QAction* saveRecipe = fileMenu->addAction(tr("&Save Recipe As…"), this, &MainWindow::saveRecipeAs);
  saveRecipe->setShortcut(QKeySequence::SaveAs);
  fileMenu->addSeparator();
  QAction* quit = fileMenu->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* editMenu = menuBar()->addMenu(tr("&Edit"));
  QAction* undo = recipePanel_->undoStack()->createUndoAction(this, tr("&Undo"));
  undo->setShortcut(QKeySequence::Undo);
  QAction* redo = recipePanel_->undoStack()->createRedoAction(this, tr("&Redo"));
  redo->setShortcut(QKeySequence::Redo);
  editMenu->addAction(undo);
  editMenu->addAction(redo);

  QMenu* runMenu = menuBar()->addMenu(tr("&Run"));
  runAction_ = runMenu->addAction(tr("&Compress and Evaluate"), this, &MainWindow::startRun);
  runAction_->setShortcut(Qt::CTRL | Qt::Key_R);
  cancelAction_ = runMenu->addAction(tr("C&ancel"), this, &MainWindow::cancelRun);
  cancelAction_->setObjectName("cancelAction");
  cancelAction_->setShortcut(Qt::Key_Escape);
  cancelAction_->setStatusTip(tr("Stop the run at its next layer or batch (Esc); nothing it wrote is kept."));
  cancelAction_->setEnabled(false);
  runMenu->addSeparator();
  benchAction_ = runMenu->addAction(tr("&Benchmark"), this, &MainWindow::startBenchmark);
  benchAction_->setObjectName("benchmarkAction");
  benchAction_->setShortcut(Qt::CTRL | Qt::Key_B);
  benchAction_->setStatusTip(tr("Time the current recipe's kernel formats and dense at the loaded model's shapes on "
                                "the current device, then the model's decode loop (tokens/s), live in the Benchmark "
                                "tab, and record them in the run store. Without CUDA: the CPU references, labelled."));
  QAction* measure = runMenu->addAction(tr("&Measure Copy Bandwidth"), this, &MainWindow::remeasureBandwidth);
  measure->setObjectName("measureBandwidthAction");
  measure->setStatusTip(tr("Measure the current device's copy bandwidth again. Predicted tokens/s without kernel "
                           "benchmarks come from it; it is measured once and kept, so predictions do not move "
                           "with the machine's load at each start."));
  QToolBar* tools = addToolBar(tr("Run"));
  tools->setObjectName("runToolBar");   // saveState() identifies tool bars by object name
  tools->addAction(runAction_);
  tools->addAction(cancelAction_);
  tools->addAction(benchAction_);

  exporter_ = new RunExporter(worker_, runsPanel_, history_, this);
  exporter_->setErrorReporter([this](const QString& title, const QString& message) { reportError_(title, message); });
  menuBar()->addMenu(exporter_->menu());
  runsPanel_->addExportMenu(exporter_->menu());
  connect(exporter_, &RunExporter::exportStarted, this, &MainWindow::updateRunnable);
  connect(exporter_, &RunExporter::exportEnded, this, [this](bool, const QString& message) {
    statusBar()->showMessage(message, 30000);
    updateRunnable();
  });

  viewMenu_ = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* dock : findChildren<QDockWidget*>()) viewMenu_->addAction(dock->toggleViewAction());
  viewMenu_->addSeparator();
  QAction* reset = viewMenu_->addAction(tr("&Reset Layout"), this, &MainWindow::resetLayout);
  reset->setObjectName("resetLayoutAction");
  reset->setStatusTip(tr("Put every dock back where a first start puts it, at its default size."));
  defaultState_ = saveState();   // the docks and tool bar as created: what Reset Layout goes back to

  QMenu* helpMenu = menuBar()->addMenu(tr("&Help"));
  helpMenu->addAction(tr("&About Pareto"), this, &MainWindow::showAbout);
}

void MainWindow::createStatusBar() {
  modelStatus_ = new QLabel;
  modelStatus_->setObjectName("modelStatus");
  modelStatus_->setToolTip(tr("The model loaded in the workbench."));
  progressLabel_ = new QLabel;
  progressLabel_->setObjectName("progressLabel");
  progressLabel_->setToolTip(tr("The stage the run is in and its position (layer, window, prompt)."));
  progressBar_ = new QProgressBar;
  progressBar_->setObjectName("progressBar");
  progressBar_->setRange(0, 1000);
  progressBar_->setMaximumWidth(220);
  progressBar_->setTextVisible(false);
  progressBar_->setToolTip(progressLabel_->toolTip());
  cancelButton_ = new QToolButton;
  cancelButton_->setObjectName("cancelButton");
  cancelButton_->setText(tr("Cancel"));
  cancelButton_->setToolTip(tr("Stop the run at its next layer or batch; nothing it wrote is kept."));
  connect(cancelButton_, &QToolButton::clicked, this, &MainWindow::cancelRun);
  statusBar()->addPermanentWidget(progressLabel_);
  statusBar()->addPermanentWidget(progressBar_);
  statusBar()->addPermanentWidget(cancelButton_);
  statusBar()->addPermanentWidget(modelStatus_);
  for (QWidget* w : std::initializer_list<QWidget*>{progressLabel_, progressBar_, cancelButton_}) w->setVisible(false);
  statusBar()->showMessage(tr("Open a model folder to begin."));
}

void MainWindow::connectWorker() {
  connect(worker_, &EngineWorker::devicesProbed, this, [this](const QVector<ComputeDevice>& devices) {
    devices_ = devices;
    const QString wanted = QSettings().value(kDeviceKey, "cpu").toString();
    const QSignalBlocker block(deviceCombo_);
    deviceCombo_->clear();
    for (const ComputeDevice& d : devices) deviceCombo_->addItem(d.label, d.id);
    const int index = deviceCombo_->findData(wanted);
    deviceCombo_->setCurrentIndex(index >= 0 ? index : 0);
    applyDevice();
    emit devicesReady();
  });
  connect(worker_, &EngineWorker::progress, this, [this](const QString& stage, double, const QString& message) {
    runStage_ = message.isEmpty() ? stage : tr("%1: %2").arg(stage, message);
    showRunProgress();
  });
  connect(worker_, &EngineWorker::runProgress, this, [this](double fraction) {
    runFraction_ = fraction;
    showRunProgress();
  });
  connect(worker_, &EngineWorker::runFinished, this, [this](const RunRecord& record) {
    const int id = history_->add(record);   // under its store id
    const RunRecord* run = history_->find(id);
    openRun(id);
    QStringList parts;
    for (const char* key : {metric::kPerplexity, metric::kDecodeNll, metric::kLinearBitsPerWeight}) {
      const double v = run->metric(key);
      if (!std::isnan(v)) parts << tr("%1 %2").arg(findMetric(key)->caption.toLower(), formatMetric(key, v));
    }
    runDone(true, tr("%1 finished in %2 s: %3")
                      .arg(run->name)
                      .arg(QLocale().toString(run->metric(metric::kSeconds), 'f', 1))
                      .arg(parts.join(", ")));
  });
  connect(worker_, &EngineWorker::measuredSpeeds, this, [this](const QMap<QString, double>& byFolder) {
    measuredSpeeds_ = byFolder;
  });
  connect(worker_, &EngineWorker::historyLoaded, this, [this](const QVector<RunRecord>& runs, const QString& error) {
    for (const RunRecord& run : runs) history_->add(run);   // a run read again replaces the one shown
    history_->setMeasured(measuredSpeeds_);   // a measurement gives way to no prediction
    if (!error.isEmpty()) statusBar()->showMessage(tr("Run history not read: %1").arg(error));
    emit historyLoaded(int(runs.size()), error);
    predictRuns();   // the stored runs of this device, from its kernel measurements if they arrived first
  });
  connect(worker_, &EngineWorker::storeProblem, this,
          [this](const QString& message) { statusBar()->showMessage(message); });
  connect(worker_, &EngineWorker::runCancelled, this, [this](const QString& message) { runDone(false, message); });
  connect(worker_, &EngineWorker::runFailed, this, [this](const QString& message) {
    runDone(false, message);
    reportError_(tr("Run failed"), message);
  });
  auto searchDone = [this](bool succeeded, const QString& message) {
    searchCancel_.reset();
    searchView_->setRunning(false);
    searchView_->setMessage(message);
    updateRunnable();
    emit searchEnded(succeeded, message);
  };
  connect(worker_, &EngineWorker::searchProgress, searchView_, &SearchView::setProgress);
  connect(worker_, &EngineWorker::searchFinished, this,
          [this, searchDone](std::shared_ptr<const SearchReport> report) {
            searchView_->setSearch(report);
            searchDone(true, tr("Search finished: %1 front points; click one to load its recipe.")
                                 .arg(report->front.points.size()));
          });
  connect(worker_, &EngineWorker::searchCancelled, this, [searchDone](const QString& m) { searchDone(false, m); });
  connect(worker_, &EngineWorker::searchFailed, this, [this, searchDone](const QString& message) {
    searchDone(false, message);
    reportError_(tr("Search failed"), message);
  });
  connect(worker_, &EngineWorker::generationText, generationPanel_, &GenerationPanel::showContinuation);
  connect(worker_, &EngineWorker::generationFinished, this, [this](const QString& summary) {
    generationCancel_.reset();
    generationPanel_->setBusy(false);
    generationPanel_->showStatus(summary);
    emit generationEnded(true);
  });
  connect(worker_, &EngineWorker::generationFailed, this, [this](const QString& message) {
    generationCancel_.reset();
    generationPanel_->setBusy(false);
    generationPanel_->showStatus(tr("failed"));
    reportError_(tr("Generation failed"), message);
    emit generationEnded(false);
  });
}

void MainWindow::setErrorReporter(ErrorReporter reporter) { reportError_ = std::move(reporter); }

bool MainWindow::openModel(const QString& dir) {
  QElapsedTimer timer;
  timer.start();
  ModelSummary summary;
  QString error;
  // Nothing from a bad folder may escape into Qt's event loop: every failure becomes a message.
  try {
    summary = summarizeModel(QDir::cleanPath(dir).toStdString());
  } catch (const InputError& e) {
    error = QString::fromStdString(e.what());
  } catch (const std::exception& e) {
    error = tr("Unexpected error while reading %1: %2").arg(dir, QString::fromStdString(e.what()));
  } catch (...) {
    error = tr("Unexpected error while reading %1").arg(dir);
  }
  if (!error.isEmpty()) {
    statusBar()->showMessage(tr("Could not open %1").arg(dir), 10000);
    reportError_(tr("Cannot open model"), error);
    return false;
  }

  currentModelDir_ = QFileInfo(dir).absoluteFilePath();
  syntheticPreset_.clear();
  // Runs are of one model (its content hash): the Pareto view shows this model's, and a run of another model
  // leaves the views (and the Generation dock) rather than pass for one of this model.
  QString modelKey = currentModelDir_;
  try {
    modelKey = QString::fromStdString(identifyModel(currentModelDir_.toStdString()).contentHash);
  } catch (const std::exception&) {
    // summarized but not identified (no config.json hash): its runs are grouped by folder
  }
  currentModelKey_ = modelKey;
  paretoView_->setModel(modelKey, QFileInfo(currentModelDir_).fileName());
  if (const RunRecord* run = history_->find(currentRunId_); run != nullptr && run->modelKey() != modelKey) closeRun();
  searchView_->setModelDir(currentModelDir_);
  summary_ = summary;
  modelView_->setSummary(summary);
  recipePanel_->setModel(summary);
  generationPanel_->setDenseAvailable(true);
  inspectText_->setPlainText(QString::fromStdString(toText(summary)));
  const QString name = QFileInfo(currentModelDir_).fileName();
  setWindowTitle(tr("%1 — Pareto").arg(name));
  modelStatus_->setText(tr("%1 · %2 · %3 parameters · %4")
                            .arg(name, QString::fromStdString(summary.architecture),
                                 display::count(summary.parameters).section(' ', 0, 1),
                                 QString::fromStdString(summary.dtype)));
  statusBar()->showMessage(tr("Opened %1 in %2 ms").arg(currentModelDir_).arg(timer.elapsed()), 10000);

  fitDocks();   // the summary's rows may need more width now
  RecentModels().add(currentModelDir_);
  QSettings().setValue(kLastParentKey, QFileInfo(currentModelDir_).absolutePath());
  rebuildRecentMenu();
  updateRunnable();
  return true;
}

bool MainWindow::openSyntheticModel(const QString& preset) {
  ModelSummary summary;
  try {
    summary = syntheticModelSummary(preset);
  } catch (const std::exception& e) {
    statusBar()->showMessage(tr("Could not open synthetic model %1").arg(preset), 10000);
    reportError_(tr("Cannot open model"), QString::fromStdString(e.what()));
    return false;
  }
  currentModelDir_.clear();
  syntheticPreset_ = preset;
  currentModelKey_.clear();
  closeRun();   // a synthetic model has no runs to compare with
  summary_ = summary;
  modelView_->setSyntheticSummary(summary, preset);
  recipePanel_->setModel(summary);
  generationPanel_->setDenseAvailable(false, syntheticModelReason());   // random weights, no tokenizer
  inspectText_->setPlainText(tr("Synthetic model %1: the published configuration with random weights (no files).\n\n%2")
                                 .arg(preset, QString::fromStdString(toText(summary))));
  if (const int index = syntheticModels_->findData(preset); index >= 0) syntheticModels_->setCurrentIndex(index);
  setWindowTitle(tr("%1 (synthetic) — Pareto").arg(preset));
  modelStatus_->setText(tr("%1 (synthetic) · %2 · %3 parameters · %4")
                            .arg(preset, QString::fromStdString(summary.architecture),
                                 display::count(summary.parameters).section(' ', 0, 1),
                                 QString::fromStdString(summary.dtype)));
  statusBar()->showMessage(tr("Opened synthetic model %1: benchmark it; compressing needs a model folder.").arg(preset),
                           10000);
  updateRunnable();
  return true;
}

QString MainWindow::syntheticModelReason() const {
  return tr("%1 is a synthetic model: its weights are random, so there is nothing to compress, evaluate or generate "
            "with. Open a model folder for that (File ▸ Open Model Folder…); Benchmark works on synthetic models.")
      .arg(syntheticPreset_);
}

void MainWindow::chooseModelFolder() {
  const QString start = QSettings().value(kLastParentKey, QDir::homePath()).toString();
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Open Model Folder"), start);
  if (!dir.isEmpty()) openModel(dir);
}

void MainWindow::rebuildRecentMenu() {
  recentMenu_->clear();
  const QStringList paths = RecentModels().paths();
  for (const QString& path : paths) {
    QAction* action = recentMenu_->addAction(path, this, [this, path] { openModel(path); });
    // A folder since moved or deleted stays listed (it may be on an unmounted drive) but cannot be chosen.
    action->setEnabled(QFileInfo(path).isDir());
  }
  if (!paths.isEmpty()) recentMenu_->addSeparator();
  QAction* clear = recentMenu_->addAction(tr("Clear List"), this, [this] {
    RecentModels().clear();
    rebuildRecentMenu();
  });
  clear->setEnabled(!paths.isEmpty());
}

void MainWindow::refreshHuggingFaceModels() {
  const QString hub = huggingFaceHubDir();
  const QList<CachedModel> models = discoverCachedModels(hub);
  hfModels_->clear();
  hfMenu_->clear();
  for (const CachedModel& m : models) {
    hfModels_->addItem(m.repo, m.path);
    hfModels_->setItemData(hfModels_->count() - 1, tr("%1\nrevision %2").arg(m.path, m.revision), Qt::ToolTipRole);
    const QString path = m.path;
    hfMenu_->addAction(m.repo, this, [this, path] { openModel(path); });
  }
  if (models.isEmpty()) {
    hfModels_->addItem(tr("(no models in %1)").arg(hub), QString());
    hfMenu_->addAction(tr("No models in %1").arg(hub))->setEnabled(false);
  }
  hfMenu_->addSeparator();
  hfMenu_->addAction(tr("Rescan"), this, &MainWindow::refreshHuggingFaceModels);
}

QString MainWindow::shippedRecipesDir() {
  const QByteArray env = qgetenv("PARETO_RECIPES");
  return env.isEmpty() ? QStringLiteral(PARETO_RECIPES_DIR) : QString::fromLocal8Bit(env);
}

void MainWindow::openRecipe() {
  // The first time: the shipped recipes' folder (where their relative calibration paths resolve).
  const QString shipped = shippedRecipesDir();
  const QString start =
      QSettings().value(kLastRecipeDirKey, QFileInfo(shipped).isDir() ? shipped : QDir::homePath()).toString();
  const QString path = QFileDialog::getOpenFileName(this, tr("Open Recipe"), start, tr("Recipes (*.json)"));
  if (path.isEmpty()) return;
  QString error;
  if (!recipePanel_->loadRecipeFile(path, &error)) {
    reportError_(tr("Cannot open recipe"), error);
    return;
  }
  QSettings().setValue(kLastRecipeDirKey, QFileInfo(path).absolutePath());
  statusBar()->showMessage(tr("Loaded recipe %1").arg(path), 10000);
}

void MainWindow::saveRecipeAs() {
  const QString start = QSettings().value(kLastRecipeDirKey, QDir::homePath()).toString();
  const QString path = QFileDialog::getSaveFileName(this, tr("Save Recipe"), start + "/recipe.json", tr("Recipes (*.json)"));
  if (path.isEmpty()) return;
  QString error;
  if (!recipePanel_->saveRecipeFile(path, &error)) {
    reportError_(tr("Cannot save recipe"), error);
    return;
  }
  QSettings().setValue(kLastRecipeDirKey, QFileInfo(path).absolutePath());
  statusBar()->showMessage(tr("Saved recipe %1").arg(path), 10000);
}

void MainWindow::applyDevice() {
  const QString id = deviceCombo_->currentData().toString();
  if (const ComputeDevice* d = findDevice(id)) {
    modelView_->setDevice(d->label);
    if (benchmarkDeviceName(*d) != measurementsDevice_) {
      measurements_.clear();   // another device's: never predict this one from them
      measurementsDevice_.clear();
    }
    recipePanel_->setBandwidth(currentBandwidth());
    requestMeasurements();
  }
  QSettings().setValue(kDeviceKey, id);
}

const ComputeDevice* MainWindow::findDevice(const QString& id) const {
  for (const ComputeDevice& d : devices_)
    if (d.id == id) return &d;
  return nullptr;
}

DecodeBandwidth MainWindow::currentBandwidth() const {
  const ComputeDevice* d = findDevice(currentDevice());
  if (d == nullptr) return {};
  DecodeBandwidth b = d->bandwidth();
  if (!measurements_.empty() && measurementsDevice_ == benchmarkDeviceName(*d)) {
    b.kernels = measurements_;
    b.source = tr("%1 copy bandwidth %2 GB/s measured %3")
                   .arg(d->label, QLocale().toString(d->copyBytesPerSecond / 1e9, 'f', 1),
                        d->measuredAt.toString(QStringLiteral("yyyy-MM-dd HH:mm")))
                   .toStdString();
  }
  return b;
}

void MainWindow::requestMeasurements() {
  const ComputeDevice* d = findDevice(currentDevice());
  if (d == nullptr) return;
  const QString name = benchmarkDeviceName(*d);
  QMetaObject::invokeMethod(bench_, [w = bench_, name] { w->loadMeasurements(name); }, Qt::QueuedConnection);
}

void MainWindow::predictRuns() {
  if (measurements_.empty()) return;
  QVector<PredictionInput> inputs;
  for (const RunRecord& run : history_->runs())
    if (run.isFinishedCompress() && benchmarkDeviceMatches(run.device.toStdString(), measurementsDevice_.toStdString()))
      inputs.push_back({run.id, run.modelDir, run.recipeJson});
  if (inputs.isEmpty()) return;
  const DecodeBandwidth bandwidth = currentBandwidth();
  QMetaObject::invokeMethod(bench_, [w = bench_, inputs, bandwidth] { w->predict(inputs, bandwidth); },
                            Qt::QueuedConnection);
}

void MainWindow::connectBenchmarkWorker() {
  connect(bench_, &BenchmarkWorker::measurementsLoaded, this,
          [this](const QString& deviceName, const std::vector<KernelMeasurement>& measurements) {
            const ComputeDevice* d = findDevice(currentDevice());
            if (d == nullptr || benchmarkDeviceName(*d) != deviceName) return;   // the device changed meanwhile
            measurements_ = measurements;
            measurementsDevice_ = deviceName;
            recipePanel_->setBandwidth(currentBandwidth());
            emit measurementsLoaded(int(measurements.size()));
            predictRuns();
          });
  connect(bench_, &BenchmarkWorker::predictionsReady, this, [this](const QVector<RunPrediction>& predictions) {
    for (const RunPrediction& p : predictions)
      history_->setPrediction(p.runId, p.tokensPerSecond, p.denseTokensPerSecond, p.source);
    emit predictionsUpdated(int(predictions.size()));
  });
  connect(bench_, &BenchmarkWorker::started, benchmarkStrip_, &BenchmarkStrip::start);
  connect(bench_, &BenchmarkWorker::progress, benchmarkStrip_, &BenchmarkStrip::setProgress);
  connect(bench_, &BenchmarkWorker::pointMeasured, benchmarkStrip_, &BenchmarkStrip::addPoint);
  connect(bench_, &BenchmarkWorker::finished, this, [this](const QString& message, qint64) {
    benchmarkDone(true, message);
    requestMeasurements();   // the Recipe dock and the runs of this device predict from the new rows
  });
  connect(bench_, &BenchmarkWorker::cancelled, this, [this](const QString& message) { benchmarkDone(false, message); });
  connect(bench_, &BenchmarkWorker::failed, this, [this](const QString& message) {
    benchmarkDone(false, tr("Benchmark failed: %1").arg(message));
    reportError_(tr("Benchmark failed"), message);
  });
  connect(history_, &RunHistory::labelEdited, this, [this](int id, const QString& tag, const QString& note) {
    if (id > 0)
      QMetaObject::invokeMethod(bench_, [w = bench_, id, tag, note] { w->setRunLabel(id, tag, note); },
                                Qt::QueuedConnection);
  });
  connect(bench_, &BenchmarkWorker::labelSaved, this, [this](qint64 id, const QString& error) {
    if (!error.isEmpty()) reportError_(tr("Tag and note of run %1 not stored").arg(id), error);
    emit labelSaved(int(id), error);
  });
  connect(bench_, &BenchmarkWorker::runsDeleted, this, [this](int deleted, const QString& error) {
    if (!error.isEmpty()) reportError_(tr("Runs not deleted from the store"), error);
    emit runsDeleted(deleted, error);
  });
}

bool MainWindow::startBenchmark() {
  if (isBenchmarking()) return false;
  QString why;
  if (isRunning())
    why = tr("A run is in progress; its work would disturb the timings.");
  else if (!summary_)
    why = tr("Open a model first: the benchmark runs at its linear layers' shapes.");
  ModelShape shape;
  if (why.isEmpty()) {
    try {
      const QString name = syntheticPreset_.isEmpty() ? QFileInfo(currentModelDir_).fileName() : syntheticPreset_;
      shape = benchmarkShapeOf(*summary_, name.toStdString());
    } catch (const InputError& e) {
      why = QString::fromStdString(e.what());
    }
  }
  if (!why.isEmpty()) {
    reportError_(tr("Cannot benchmark"), why);
    return false;
  }
  BenchmarkRequest request;
  request.kind = BenchmarkRequest::Kind::KernelsAndDecode;
  request.modelDir = currentModelDir_;
  request.synthetic = syntheticPreset_;
  request.shape = shape;
  // The kernels core says the recipe decodes with (dense first); the dense model alone without a recipe.
  request.formats = {QStringLiteral("dense")};
  if (const auto& estimate = recipePanel_->estimate()) {
    request.formats.clear();
    for (const std::string& k : estimate->kernels) request.formats << QString::fromStdString(k);
    for (const std::string& f : estimate->unbenchmarkable) request.unbenchmarkable << QString::fromStdString(f);
  }
  // The decode loop: a folder runs in the formats it stores; a synthetic model in dense and each recipe format.
  if (!request.synthetic.isEmpty()) request.decodeFormats = decodeFormatsOf(request.formats, &request.notDecodable);
  request.device = currentDevice().isEmpty() ? QStringLiteral("cpu") : currentDevice();
  const ComputeDevice* d = findDevice(request.device);
  request.deviceLabel = d ? d->label : request.device;
  request.cancel = std::make_shared<CancelToken>();
  benchCancel_ = request.cancel;
  BenchmarkSession pending;   // shown until the worker's own arrives (after it measured the copy bandwidth)
  pending.device = request.deviceLabel;
  pending.shape = tr("%1, starting…").arg(QString::fromStdString(shape.name));
  pending.formats = int(request.formats.size()) + (request.synthetic.isEmpty() ? 1 : int(request.decodeFormats.size()));
  pending.decodeShape = tr("after the kernels");
  benchmarkStrip_->start(pending);
  showPage(benchmarkStrip_);
  QMetaObject::invokeMethod(bench_, [w = bench_, request] { w->run(request); }, Qt::QueuedConnection);
  statusBar()->showMessage(tr("Benchmarking %1 and the decode loop on %2").arg(request.formats.join(", "), request.deviceLabel));
  updateRunnable();
  return true;
}

bool MainWindow::benchmarkRun(int runId) {
  const RunRecord* run = history_->find(runId);
  QString why;
  if (isBenchmarking())
    why = tr("A benchmark is running.");
  else if (isRunning())
    why = tr("A run is in progress; its work would disturb the timings.");
  else if (run == nullptr || !run->isFinishedCompress())
    why = tr("Choose a finished compress run: its compressed folder is what is measured.");
  else if (!QFileInfo(run->outDir).isDir())
    why = tr("The folder of %1 is not there any more: %2").arg(run->name, run->outDir);
  if (!why.isEmpty()) {
    reportError_(tr("Cannot benchmark"), why);
    return false;
  }
  BenchmarkRequest request;
  request.kind = BenchmarkRequest::Kind::Decode;
  request.modelDir = run->outDir;   // in its stored formats: what a user of the folder decodes with
  request.device = currentDevice().isEmpty() ? QStringLiteral("cpu") : currentDevice();
  const ComputeDevice* d = findDevice(request.device);
  request.deviceLabel = d ? d->label : request.device;
  request.cancel = std::make_shared<CancelToken>();
  benchCancel_ = request.cancel;
  BenchmarkSession pending;
  pending.device = request.deviceLabel;
  pending.shape = run->name;
  pending.formats = 1;
  pending.decodeShape = tr("%1 as stored").arg(QFileInfo(run->outDir).fileName());
  benchmarkStrip_->start(pending);
  showPage(benchmarkStrip_);
  QMetaObject::invokeMethod(bench_, [w = bench_, request] { w->run(request); }, Qt::QueuedConnection);
  statusBar()->showMessage(tr("Benchmarking the decode loop of %1 on %2").arg(run->name, request.deviceLabel));
  updateRunnable();
  return true;
}

void MainWindow::cancelBenchmark() {
  if (benchCancel_) benchCancel_->cancel();
}

void MainWindow::benchmarkDone(bool succeeded, const QString& message) {
  benchCancel_.reset();
  syncHistory();   // the bench run the message names is listed under that id
  benchmarkStrip_->finish(message);
  statusBar()->showMessage(message, 30000);
  updateRunnable();
  emit benchmarkEnded(succeeded, message);
}

void MainWindow::deleteRuns(const QList<int>& runIds) {
  QVector<qint64> storeIds;
  for (int id : runIds)
    if (id > 0 && history_->find(id) != nullptr) storeIds << id;
  if (runIds.contains(currentRunId_)) closeRun();   // its views and its model for generation go with it
  const int removed = history_->remove(runIds);
  bool compared = false;
  for (int id : runIds) compared = comparedIds_.removeAll(id) > 0 || compared;
  if (compared) {   // the Compare tab drops them, and stays where it is
    std::vector<const RunRecord*> runs;
    for (int id : comparedIds_)
      if (const RunRecord* r = history_->find(id)) runs.push_back(r);
    compareView_->setRuns(runs);
  }
  QMetaObject::invokeMethod(bench_, [w = bench_, storeIds] { w->deleteRuns(storeIds); }, Qt::QueuedConnection);
  statusBar()->showMessage(tr("Deleted %n run(s).", nullptr, removed), 10000);
}

void MainWindow::selectDevice(const QString& id) {
  const int index = deviceCombo_->findData(id);
  if (index >= 0) deviceCombo_->setCurrentIndex(index);
}

QString MainWindow::currentDevice() const { return deviceCombo_->currentData().toString(); }

void MainWindow::updateRunnable() {
  // Calibrating and evaluating on one text file: allowed, but the perplexity then flatters the recipe.
  const QString calibration = recipePanel_->value(RecipePanel::kCalibrationFile).toString();
  const QString heldOut = evaluationPanel_->settings().heldOutText;
  const bool overlap = recipePanel_->value(RecipePanel::kCalibrationSource).toString() == QLatin1String("text") &&
                       !calibration.isEmpty() && !heldOut.isEmpty() &&
                       QFileInfo(calibration).canonicalFilePath() == QFileInfo(heldOut).canonicalFilePath() &&
                       QFileInfo(heldOut).exists();
  overlapWarning_->setText(overlap ? tr("The calibration text is also the held-out text (%1): the perplexity will "
                                        "flatter the recipe. Evaluate on another file.")
                                         .arg(QFileInfo(heldOut).fileName())
                                   : QString());
  overlapWarning_->setVisible(overlap);
  QString why;
  if (isRunning())
    why = tr("A run is in progress.");
  else if (isSearching())
    why = tr("A search is running.");
  else if (isBenchmarking())
    why = tr("A benchmark is running.");
  else if (exporter_ != nullptr && exporter_->isExporting())
    why = tr("An export is in progress.");
  else if (!summary_)
    why = tr("Open a model first.");
  else if (!syntheticPreset_.isEmpty())
    why = syntheticModelReason();
  else if (!recipePanel_->problems().isEmpty())
    why = recipePanel_->problems().join("\n");
  evaluationPanel_->setRunnable(why.isEmpty(), why);
  evaluationPanel_->setRunning(isRunning());
  runAction_->setEnabled(why.isEmpty());
  runAction_->setToolTip(why);
  // Exports run on the engine's thread too: behind a run they would only wait.
  if (exporter_ != nullptr) exporter_->setBlocked(isRunning() ? tr("A run is in progress; export when it has finished.") : QString());

  QString benchWhy;
  if (isBenchmarking())
    benchWhy = tr("A benchmark is running.");
  else if (isRunning())
    benchWhy = tr("A run is in progress; its work would disturb the timings.");
  else if (!summary_)
    benchWhy = tr("Open a model first: the benchmark runs at its linear layers' shapes.");
  benchmarkStrip_->setRunnable(benchWhy.isEmpty(), benchWhy);
  benchAction_->setEnabled(benchWhy.isEmpty());
  benchAction_->setToolTip(benchWhy.isEmpty() ? benchAction_->statusTip() : benchWhy);
}

QString MainWindow::uniqueRunFolder() const {
  const QString root = evaluationPanel_->settings().runsFolder;
  const QString base = QStringLiteral("%1-%2").arg(QFileInfo(currentModelDir_).fileName(),
                                                   QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss"));
  QString path = QDir(root).filePath(base);
  for (int n = 2; QFileInfo::exists(path) || QFileInfo::exists(QDir(root).filePath("." + QFileInfo(path).fileName() + ".partial")); ++n)
    path = QDir(root).filePath(QStringLiteral("%1-%2").arg(base).arg(n));
  return path;
}

bool MainWindow::startRun() {
  if (isRunning()) return false;
  QString why;
  if (isBenchmarking()) why = tr("A benchmark is running; wait for it or cancel it.");
  else if (isSearching()) why = tr("A search is running; wait for it or cancel it.");
  else if (exporter_->isExporting()) why = tr("An export is running; wait for it or cancel it.");
  else if (!summary_) why = tr("Open a model first.");
  else if (!syntheticPreset_.isEmpty()) why = syntheticModelReason();
  else if (!recipePanel_->problems().isEmpty()) why = recipePanel_->problems().join("\n");
  if (!why.isEmpty()) {
    reportError_(tr("Cannot run"), why);
    return false;
  }
  evaluationPanel_->saveSettings();
  RunRequest request;
  request.modelDir = currentModelDir_;
  request.recipeJson = recipePanel_->recipeJson().dump();
  request.outDir = uniqueRunFolder();
  request.device = currentDevice();
  request.evaluation = evaluationPanel_->settings();
  // Predicted tokens/s as the Recipe dock showed them: from this device's kernel measurements where they cover
  // the recipe, else bytes over its copy bandwidth; the run's tooltip says which.
  request.bandwidth = currentBandwidth();
  if (const auto& estimate = recipePanel_->estimate(); estimate && estimate->fromKernelBenchmarks)
    request.bandwidth.source = estimate->bandwidthSource;
  request.cancel = std::make_shared<CancelToken>();
  runCancel_ = request.cancel;
  runOutDir_ = request.outDir;
  QMetaObject::invokeMethod(worker_, [w = worker_, request] { w->run(request); }, Qt::QueuedConnection);

  progressBar_->setValue(0);
  runFraction_ = 0;
  runStage_ = tr("starting");
  runTimer_.start();
  progressLabel_->setText(runStage_);
  for (QWidget* w : std::initializer_list<QWidget*>{progressLabel_, progressBar_, cancelButton_}) w->setVisible(true);
  cancelButton_->setEnabled(true);
  cancelAction_->setEnabled(true);
  statusBar()->showMessage(tr("Running %1 → %2").arg(describeRecipe(request.recipeJson), request.outDir));
  updateRunnable();
  return true;
}

bool MainWindow::startSearch(const QString& baseRecipe, int budgetKind, double budget) {
  QString why;
  if (isSearching()) why = tr("A search is running; wait for it or cancel it.");
  else if (isRunning()) why = tr("A run is in progress; wait for it or cancel it.");
  else if (!summary_ || currentModelDir_.isEmpty()) why = !syntheticPreset_.isEmpty() ? syntheticModelReason() : tr("Open a model first.");
  else if (baseRecipe.isEmpty()) why = tr("Choose a base recipe (its calibration block; docs/search.md).");
  if (!why.isEmpty()) {
    reportError_(tr("Cannot search"), why);
    return false;
  }
  SearchRequest request;
  request.modelDir = currentModelDir_;
  request.baseRecipe = baseRecipe;
  request.budgetKind = budgetKind;
  request.budget = budget;
  request.device = currentDevice();
  request.refine = searchView_->refineRequested();
  request.bandwidth = currentBandwidth();
  request.cancel = std::make_shared<CancelToken>();
  searchCancel_ = request.cancel;
  searchView_->setRunning(true);
  searchView_->setMessage(tr("starting"));
  QMetaObject::invokeMethod(worker_, [w = worker_, request] { w->search(request); }, Qt::QueuedConnection);
  updateRunnable();
  return true;
}

void MainWindow::cancelSearch() {
  if (!searchCancel_) return;
  searchCancel_->cancel();
  searchView_->setMessage(tr("cancelling at the next module…"));
}

void MainWindow::showRunProgress() {
  if (!isRunning()) return;
  progressBar_->setValue(int(runFraction_ * 1000));
  const double left = JobProgress::secondsLeft(runFraction_, runTimer_.elapsed() / 1000.0);
  progressLabel_->setText(left < 0 ? tr("%1 · %2%").arg(runStage_).arg(int(runFraction_ * 100))
                                   : tr("%1 · %2% · about %3 left")
                                         .arg(runStage_)
                                         .arg(int(runFraction_ * 100))
                                         .arg(display::duration(left)));
}

void MainWindow::cancelRun() {
  if (!runCancel_) return;
  runCancel_->cancel();
  cancelButton_->setEnabled(false);
  cancelAction_->setEnabled(false);
  progressLabel_->setText(tr("cancelling at the next layer…"));
}

void MainWindow::syncHistory() {
  // A running run is read again: its status moves on.
  QSet<qint64> known;
  for (const RunRecord& run : history_->runs())
    if (run.id > 0 && run.status != QLatin1String("running")) known.insert(run.id);
  QMetaObject::invokeMethod(worker_, [w = worker_, known] { w->loadHistory(known); }, Qt::QueuedConnection);
}

void MainWindow::runDone(bool succeeded, const QString& message) {
  runCancel_.reset();
  syncHistory();   // a cancelled or failed run is in the store too, as pareto-cli runs lists it
  for (QWidget* w : std::initializer_list<QWidget*>{progressLabel_, progressBar_, cancelButton_}) w->setVisible(false);
  cancelAction_->setEnabled(false);
  statusBar()->showMessage(message, 30000);
  updateRunnable();
  emit runEnded(succeeded, message);
}

void MainWindow::openRun(int runId) {
  const RunRecord* run = history_->find(runId);
  if (run == nullptr) return;
  runsPanel_->selectRun(runId);
  if (!run->isFinishedCompress()) {   // nothing compressed to show or generate with
    statusBar()->showMessage(tr("%1 is a %2 run (%3): only finished compress runs open in the views.")
                                 .arg(run->name, run->kind, run->status),
                             10000);
    return;
  }
  currentRunId_ = runId;
  driftView_->setDrift(run->name, run->drift, run->driftAbsent);
  discrepancyView_->setStudy(run->name, run->discrepancy);
  generationPanel_->setCompressedRun(run->name);
}

void MainWindow::closeRun() {
  currentRunId_ = 0;
  driftView_->setDrift(QString(), nullptr);
  discrepancyView_->setStudy(QString(), nullptr);
  generationPanel_->setCompressedRun(QString());
}

void MainWindow::compareRuns(const QList<int>& runIds) {
  comparedIds_ = runIds;
  std::vector<const RunRecord*> runs;
  for (int id : runIds)
    if (const RunRecord* r = history_->find(id)) runs.push_back(r);
  compareView_->setRuns(runs);
  // The drift curves and discrepancy points of the compared runs that measured them, overlaid in one colour per
  // run; the views go back to one run when a run is opened.
  QVector<DriftView::OverlayRun> drifts;
  QVector<DiscrepancyView::OverlayRun> studies;
  for (const RunRecord* r : runs) {
    if (r->drift) drifts.push_back({r->name, r->drift});
    if (r->discrepancy) studies.push_back({r->name, r->discrepancy});
  }
  if (drifts.size() >= 2) driftView_->setOverlay(drifts);
  if (studies.size() >= 2) discrepancyView_->setOverlay(studies);
  showPage(compareView_);
}

void MainWindow::startGeneration(const QString& prompt, int maxNewTokens) {
  if (generationCancel_ || currentModelDir_.isEmpty()) return;
  GenerationRequest request;
  request.modelDir = currentModelDir_;
  if (const RunRecord* run = history_->find(currentRunId_)) request.compressedDir = run->outDir;
  request.device = currentDevice();
  request.prompt = prompt;
  request.maxNewTokens = maxNewTokens;
  request.sampling = generationPanel_->sampling();
  request.cancel = std::make_shared<CancelToken>();
  generationCancel_ = request.cancel;
  generationPanel_->setBusy(true);
  generationPanel_->showStatus(tr("generating…"));
  QMetaObject::invokeMethod(worker_, [w = worker_, request] { w->generate(request); }, Qt::QueuedConnection);
}

void MainWindow::showPage(QWidget* page) {
  for (int i = 0; i < centralTabs_->count(); ++i)
    if (const auto* scroll = qobject_cast<QScrollArea*>(centralTabs_->widget(i)); scroll && scroll->widget() == page)
      centralTabs_->setCurrentIndex(i);
}

bool MainWindow::selectTab(const QString& name) {
  for (int i = 0; i < centralTabs_->count(); ++i) {
    if (centralTabs_->tabText(i).compare(name, Qt::CaseInsensitive) == 0) {
      centralTabs_->setCurrentIndex(i);
      return true;
    }
  }
  return false;
}

QStringList MainWindow::tabNames() const {
  QStringList names;
  for (int i = 0; i < centralTabs_->count(); ++i) names << centralTabs_->tabText(i);
  return names;
}

bool MainWindow::saveScreenshot(const QString& path, QString* error) {
  const QPixmap shot = grab();
  if (shot.isNull() || !shot.save(path, "PNG")) {
    if (error) *error = tr("%1: could not write the screenshot").arg(path);
    return false;
  }
  return true;
}

void MainWindow::showAbout() {
  QMessageBox::about(
      this, tr("About Pareto"),
      tr("<b>Pareto</b> %1<p>A workbench for compressing large language models and measuring what "
         "the compression costs.</p>")
          .arg(QString::fromUtf8(pareto::paretoVersion())));
}

void MainWindow::restoreSettings() {
  QSettings settings;
  if (!restoreGeometry(settings.value(kGeometryKey).toByteArray())) resize(1400, 900);
  // The docks' layout is restored (or, on a first start, the default sizes applied) once the window is shown:
  // resizeDocks and restoreState need its final size.
  savedState_ = settings.value(kStateKey).toByteArray();
  evaluationPanel_->loadSettings();
  const QString recipe = settings.value(kRecipeKey).toString();
  if (!recipe.isEmpty()) {
    const auto doc = nlohmann::json::parse(recipe.toStdString(), nullptr, false);
    QString ignored;   // a recipe that no longer parses (files moved) is simply not restored
    if (!doc.is_discarded() && recipePanel_->setRecipe(doc, QString(), tr("the last session's recipe"), &ignored))
      recipePanel_->undoStack()->clear();
  }
}

void MainWindow::saveSettings() const {
  QSettings settings;
  settings.setValue(kGeometryKey, saveGeometry());
  settings.setValue(kStateKey, saveState());
  settings.setValue(kRecipeKey, QString::fromStdString(recipePanel_->recipeJson().dump()));
  evaluationPanel_->saveSettings();
}

void MainWindow::fitDocks() {
  // A dock scrolls vertically but never sideways: it is as wide as its widest row needs, so no combo arrow or
  // button is cut off, whatever the window's size or the model's names.
  for (QScrollArea* scroll : {modelScroll_, recipeScroll_}) {
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    const int width = scroll->widget()->minimumSizeHint().width() + scroll->verticalScrollBar()->sizeHint().width() +
                      2 * scroll->frameWidth();
    scroll->setMinimumWidth(width);
  }
}

void MainWindow::applyDefaultDockSizes() {
  // The plots get most of the room; each dock at least what its controls need.
  auto dock = [this](const char* name) { return findChild<QDockWidget*>(name); };
  resizeDocks({dock("modelDock"), dock("recipeDock")},
              {std::max(380, modelScroll_->minimumWidth()), std::max(400, recipeScroll_->minimumWidth())},
              Qt::Horizontal);
  resizeDocks({dock("runsDock")}, {190}, Qt::Vertical);
}

void MainWindow::resetLayout() {
  restoreState(defaultState_);
  for (QDockWidget* dock : findChildren<QDockWidget*>()) dock->setVisible(true);
  findChild<QDockWidget*>("runsDock")->raise();
  applyDefaultDockSizes();
  statusBar()->showMessage(tr("Layout reset: the docks are where a first start puts them."), 10000);
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  if (shown_) return;
  shown_ = true;
  fitDocks();
  // The saved layout is restored once the window has its saved size: restored before, the docks are fitted to
  // the default size and come back different.
  if (savedState_.isEmpty() || !restoreState(savedState_)) applyDefaultDockSizes();
}

void MainWindow::closeEvent(QCloseEvent* event) {
  saveSettings();
  QMainWindow::closeEvent(event);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (!draggedFolder(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const QString dir = draggedFolder(event->mimeData());
  if (dir.isEmpty()) return;
  event->acceptProposedAction();
  openModel(dir);
}

}  // namespace pareto
