#include "app/gui/MainWindow.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>
#include <exception>

#include "app/gui/RecentModels.h"
#include "model/ModelSummary.h"
#include "util/Error.h"
#include "widgets/DisplayFormat.h"
#include "widgets/ModelSummaryView.h"

namespace pareto {

namespace {

const char* kGeometryKey = "mainWindow/geometry";
const char* kStateKey = "mainWindow/state";
const char* kLastParentKey = "mainWindow/lastModelParent";

// The single local folder being dragged, or empty when the drag is anything else.
QString draggedFolder(const QMimeData* mime) {
  if (mime == nullptr || !mime->hasUrls() || mime->urls().size() != 1) return {};
  const QUrl url = mime->urls().constFirst();
  if (!url.isLocalFile()) return {};
  const QString path = url.toLocalFile();
  return QFileInfo(path).isDir() ? path : QString();
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setObjectName("mainWindow");
  setWindowTitle(tr("Pareto"));
  setAcceptDrops(true);
  reportError_ = [this](const QString& title, const QString& message) {
    QMessageBox::critical(this, title, message);
  };

  createDocksAndTabs();
  createMenus();
  modelStatus_ = new QLabel;
  modelStatus_->setObjectName("modelStatus");
  modelStatus_->setToolTip(tr("The model loaded in the workbench."));
  statusBar()->addPermanentWidget(modelStatus_);
  statusBar()->showMessage(tr("Open a model folder to begin."));
  restoreWindowLayout();
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
  centralTabs_->addTab(inspectText_, tr("Inspect"));
  setCentralWidget(centralTabs_);

  modelView_ = new ModelSummaryView;
  auto* modelDock = new QDockWidget(tr("Model"), this);
  modelDock->setObjectName("modelDock");  // saveState() identifies docks by object name
  modelDock->setWidget(modelView_);
  addDockWidget(Qt::LeftDockWidgetArea, modelDock);
  resizeDocks({modelDock}, {600}, Qt::Horizontal);
}

void MainWindow::createMenus() {
  QMenu* fileMenu = menuBar()->addMenu(tr("&File"));
  QAction* open = fileMenu->addAction(tr("&Open Model Folder…"), this, &MainWindow::chooseModelFolder);
  open->setShortcut(QKeySequence::Open);
  open->setStatusTip(tr("Open a folder with config.json and model.safetensors (or sharded safetensors)."));
  recentMenu_ = fileMenu->addMenu(tr("Recent &Models"));
  recentMenu_->setObjectName("recentMenu");
  rebuildRecentMenu();
  fileMenu->addSeparator();
  QAction* quit = fileMenu->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  viewMenu_ = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* dock : findChildren<QDockWidget*>()) viewMenu_->addAction(dock->toggleViewAction());

  QMenu* helpMenu = menuBar()->addMenu(tr("&Help"));
  helpMenu->addAction(tr("&About Pareto"), this, &MainWindow::showAbout);
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
  modelView_->setSummary(summary);
  inspectText_->setPlainText(QString::fromStdString(toText(summary)));
  const QString name = QFileInfo(currentModelDir_).fileName();
  setWindowTitle(tr("%1 — Pareto").arg(name));
  modelStatus_->setText(tr("%1 · %2 · %3 parameters · %4")
                            .arg(name, QString::fromStdString(summary.architecture),
                                 display::count(summary.parameters).section(' ', 0, 1),
                                 QString::fromStdString(summary.dtype)));
  statusBar()->showMessage(tr("Opened %1 in %2 ms").arg(currentModelDir_).arg(timer.elapsed()), 10000);

  RecentModels().add(currentModelDir_);
  QSettings().setValue(kLastParentKey, QFileInfo(currentModelDir_).absolutePath());
  rebuildRecentMenu();
  return true;
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

void MainWindow::showAbout() {
  QMessageBox::about(
      this, tr("About Pareto"),
      tr("<b>Pareto</b> %1<p>A workbench for compressing large language models and measuring what "
         "the compression costs.</p>")
          .arg(QStringLiteral(PARETO_VERSION)));
}

void MainWindow::restoreWindowLayout() {
  QSettings settings;
  if (!restoreGeometry(settings.value(kGeometryKey).toByteArray())) resize(1200, 800);
  restoreState(settings.value(kStateKey).toByteArray());
}

void MainWindow::saveWindowLayout() const {
  QSettings settings;
  settings.setValue(kGeometryKey, saveGeometry());
  settings.setValue(kStateKey, saveState());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  saveWindowLayout();
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
