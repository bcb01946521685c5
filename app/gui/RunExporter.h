// The workbench's Export menu: the run selected in the Runs dock (its compressed folder) written where it deploys,
// as `pareto-cli export gguf | compressed-tensors | hf` writes it. Each action asks for the type (GGUF --type,
// or the dtype) and the destination, then the EngineWorker runs core's ExportJob on its thread while a progress
// dialog shows the stages; its Cancel stops the job between tensors and leaves the destination as it was. A
// refusal (a module GGUF or compressed-tensors has no type for) is shown as pareto-cli prints it.
#pragma once

#include <QObject>
#include <QPointer>
#include <QString>
#include <functional>
#include <memory>

#include "util/Progress.h"

class QAction;
class QMenu;
class QProgressDialog;
class QWidget;

namespace pareto {

class EngineWorker;
class RunHistory;
class RunsPanel;

class RunExporter : public QObject {
  Q_OBJECT

 public:
  // `window` parents the menu and the dialogs; the worker lives on its own thread.
  RunExporter(EngineWorker* worker, RunsPanel* runs, RunHistory* history, QWidget* window);

  QMenu* menu() const { return menu_; }
  // "gguf", "compressed-tensors", "hf"; null for another kind.
  QAction* action(const QString& kind) const;

  // Exports the selected run to `out` without asking (the menu's actions ask, then call this). Returns false and
  // reports why (the error reporter) when not exactly one run with a folder is selected, the engine is busy, or
  // an export is in progress.
  bool start(const QString& kind, const QString& out, const QString& type, bool overwrite);
  void cancel();
  bool isExporting() const { return static_cast<bool>(cancel_); }
  // The dialog of the export in progress (null when idle).
  QProgressDialog* progressDialog() const;

  // The folder that holds the last export that finished (a GGUF file's folder, or the exported folder); "" until
  // one has. Export ▸ Open Output Folder shows it.
  QString lastOutputFolder() const { return lastOutputFolder_; }
  QAction* openOutputFolderAction() const { return openOutput_; }

  // Why exports wait ("" : they can run): the engine's thread is busy with a run.
  void setBlocked(const QString& why);
  using ErrorReporter = std::function<void(const QString& title, const QString& message)>;
  void setErrorReporter(ErrorReporter reporter);

 signals:
  void exportStarted();
  void exportEnded(bool succeeded, const QString& message);

 private:
  void choose(const QString& kind);
  QString selectedFolder(QString* why) const;
  void updateActions();
  void done(bool succeeded, const QString& message);

  EngineWorker* worker_;
  RunsPanel* runs_;
  RunHistory* history_;
  QWidget* window_;
  QMenu* menu_ = nullptr;
  QAction* gguf_ = nullptr;
  QAction* compressedTensors_ = nullptr;
  QAction* hf_ = nullptr;
  QAction* openOutput_ = nullptr;
  QString out_;                // the destination of the export in progress
  QString lastOutputFolder_;
  QPointer<QProgressDialog> dialog_;
  std::shared_ptr<CancelToken> cancel_;
  QString blocked_;
  ErrorReporter reportError_;
};

}  // namespace pareto
