#include "app/gui/RunExporter.h"

#include <QAction>
#include <QDesktopServices>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QItemSelectionModel>
#include <QMenu>
#include <QMessageBox>
#include <QProgressDialog>
#include <QTableView>
#include <QUrl>

#include "app/gui/EngineWorker.h"
#include "widgets/RunHistory.h"
#include "widgets/RunsPanel.h"

namespace pareto {
namespace {

struct ExportChoice {
  const char* kind;
  const char* title;
  const char* typeLabel;
  QStringList types;   // the first is the default; "" in the request for the export's own default
  const char* suffix;  // the destination proposed beside the run's folder
};

const ExportChoice* choiceFor(const QString& kind) {
  static const ExportChoice choices[] = {
      {"gguf", QT_TRANSLATE_NOOP("RunExporter", "Export GGUF"),
       QT_TRANSLATE_NOOP("RunExporter",
                         "GGUF type (auto: each module as stored, refused for a format GGUF has no type for; f16, "
                         "bf16, f32: every weight in that float type; q8_0, q4_0, q4_k, q6_k: the block linears "
                         "requantized by round-to-nearest):"),
       {"auto", "f16", "bf16", "f32", "q8_0", "q4_0", "q4_k", "q6_k"}, ".gguf"},
      {"compressed-tensors", QT_TRANSLATE_NOOP("RunExporter", "Export compressed-tensors"),
       QT_TRANSLATE_NOOP("RunExporter",
                         "dtype of the scales and dense tensors (float16 keeps Pareto's fp16 scales exact; source: "
                         "config.json's dtype):"),
       {"float16", "bfloat16", "float32", "source"}, "-compressed-tensors"},
      {"hf", QT_TRANSLATE_NOOP("RunExporter", "Export Hugging Face (dense)"),
       QT_TRANSLATE_NOOP("RunExporter", "Weight dtype (source: the checkpoint's, from config.json):"),
       {"source", "float32", "bfloat16", "float16"}, "-hf"},
  };
  for (const ExportChoice& c : choices)
    if (kind == c.kind) return &c;
  return nullptr;
}

}  // namespace

RunExporter::RunExporter(EngineWorker* worker, RunsPanel* runs, RunHistory* history, QWidget* window)
    : QObject(window), worker_(worker), runs_(runs), history_(history), window_(window) {
  reportError_ = [this](const QString& title, const QString& message) {
    QMessageBox::critical(window_, title, message);
  };
  menu_ = new QMenu(tr("E&xport"), window);
  menu_->setObjectName("exportMenu");
  menu_->setToolTipsVisible(true);
  gguf_ = menu_->addAction(tr("&GGUF (llama.cpp)…"), this, [this] { choose("gguf"); });
  gguf_->setToolTip(tr("Write the selected run's folder as one GGUF file that llama.cpp loads, as `pareto-cli "
                       "export gguf` does."));
  compressedTensors_ = menu_->addAction(tr("&compressed-tensors (vLLM)…"), this, [this] { choose("compressed-tensors"); });
  compressedTensors_->setToolTip(tr("Write the selected run's folder as a compressed-tensors pack-quantized "
                                    "checkpoint that vLLM and SGLang serve, as `pareto-cli export compressed-tensors` "
                                    "does."));
  hf_ = menu_->addAction(tr("&Hugging Face (dense)…"), this, [this] { choose("hf"); });
  hf_->setToolTip(tr("Write the selected run's folder as a dense Hugging Face checkpoint, as `pareto-cli export hf` "
                     "does."));
  menu_->addSeparator();
  openOutput_ = menu_->addAction(tr("&Open Output Folder"), this, [this] {
    if (!lastOutputFolder_.isEmpty()) QDesktopServices::openUrl(QUrl::fromLocalFile(lastOutputFolder_));
  });
  openOutput_->setObjectName("openExportFolder");
  openOutput_->setToolTip(tr("Show the folder the last export wrote, in the file manager."));
  openOutput_->setEnabled(false);
  for (QAction* a : {gguf_, compressedTensors_, hf_, openOutput_}) a->setStatusTip(a->toolTip());

  connect(runs_->table()->selectionModel(), &QItemSelectionModel::selectionChanged, this, &RunExporter::updateActions);
  connect(history_, &RunHistory::runsRemoved, this, &RunExporter::updateActions);
  connect(worker_, &EngineWorker::exportProgress, this, [this](double fraction, const QString& message) {
    if (!dialog_) return;
    dialog_->setLabelText(message);
    dialog_->setValue(int(fraction * 1000));   // last: a modal dialog's setValue processes events
  });
  connect(worker_, &EngineWorker::exportFinished, this, [this](const QString& summary) { done(true, summary); });
  connect(worker_, &EngineWorker::exportCancelled, this, [this](const QString& message) { done(false, message); });
  connect(worker_, &EngineWorker::exportFailed, this, [this](const QString& message) {
    done(false, message);
    reportError_(tr("Export failed"), message);
  });
  updateActions();
}

QAction* RunExporter::action(const QString& kind) const {
  if (kind == "gguf") return gguf_;
  if (kind == "compressed-tensors") return compressedTensors_;
  if (kind == "hf") return hf_;
  return nullptr;
}

QProgressDialog* RunExporter::progressDialog() const { return dialog_.data(); }

void RunExporter::setBlocked(const QString& why) {
  blocked_ = why;
  updateActions();
}

void RunExporter::setErrorReporter(ErrorReporter reporter) { reportError_ = std::move(reporter); }

QString RunExporter::selectedFolder(QString* why) const {
  const QList<int> ids = runs_->selectedRunIds();
  const RunRecord* run = ids.size() == 1 ? history_->find(ids.first()) : nullptr;
  if (run == nullptr) {
    *why = tr("Select one run in the Runs dock: its compressed folder is what is exported.");
    return {};
  }
  if (!run->isFinishedCompress()) {
    *why = tr("%1 is a %2 run (%3): only a finished compress run has a compressed folder to export.")
               .arg(run->name, run->kind, run->status);
    return {};
  }
  if (run->outDir.isEmpty() || !QFileInfo(run->outDir).isDir()) {
    *why = tr("The folder of %1 is not there any more: %2").arg(run->name, run->outDir);
    return {};
  }
  return run->outDir;
}

void RunExporter::updateActions() {
  QString why = blocked_;
  if (why.isEmpty() && isExporting()) why = tr("An export is in progress.");
  if (why.isEmpty()) selectedFolder(&why);
  for (QAction* a : {gguf_, compressedTensors_, hf_}) a->setEnabled(why.isEmpty());
  menu_->setToolTip(why);
}

void RunExporter::choose(const QString& kind) {
  const ExportChoice* c = choiceFor(kind);
  QString why;
  const QString folder = selectedFolder(&why);
  if (c == nullptr || folder.isEmpty()) {
    reportError_(tr("Cannot export"), why);
    return;
  }
  const QString title = tr(c->title);
  bool ok = false;
  const QString type = QInputDialog::getItem(window_, title, tr(c->typeLabel), c->types, 0, false, &ok);
  if (!ok) return;
  const QString proposed = QDir::cleanPath(folder) + QString::fromLatin1(c->suffix);
  const QString out = kind == "gguf"
                          ? QFileDialog::getSaveFileName(window_, title, proposed, tr("GGUF files (*.gguf)"))
                          : QFileDialog::getSaveFileName(window_, title, proposed, QString(), nullptr,
                                                         QFileDialog::ShowDirsOnly);
  if (out.isEmpty()) return;
  // The chooser asked before an existing destination was picked; the export replaces it only when Pareto wrote it.
  start(kind, out, kind == "hf" && type == "source" ? QString() : type, QFileInfo::exists(out));
}

bool RunExporter::start(const QString& kind, const QString& out, const QString& type, bool overwrite) {
  QString why = blocked_;
  if (why.isEmpty() && isExporting()) why = tr("An export is in progress.");
  QString folder;
  if (why.isEmpty()) folder = selectedFolder(&why);
  if (why.isEmpty() && choiceFor(kind) == nullptr) why = tr("Unknown export \"%1\".").arg(kind);
  if (!why.isEmpty()) {
    reportError_(tr("Cannot export"), why);
    return false;
  }
  ExportRequest request;
  request.kind = kind;
  request.modelDir = folder;
  request.out = out;
  request.type = type;
  request.overwrite = overwrite;
  request.cancel = std::make_shared<CancelToken>();
  cancel_ = request.cancel;
  out_ = out;

  dialog_ = new QProgressDialog(tr("Exporting %1 to %2").arg(QFileInfo(folder).fileName(), out), tr("Cancel"), 0,
                                1000, window_);
  dialog_->setObjectName("exportProgress");
  dialog_->setWindowTitle(tr(choiceFor(kind)->title));
  dialog_->setWindowModality(Qt::WindowModal);
  dialog_->setAutoClose(false);
  dialog_->setAutoReset(false);
  dialog_->setMinimumDuration(0);
  connect(dialog_.data(), &QProgressDialog::canceled, this, &RunExporter::cancel);
  dialog_->show();
  updateActions();
  emit exportStarted();
  QMetaObject::invokeMethod(worker_, [w = worker_, request] { w->exportModel(request); }, Qt::QueuedConnection);
  return true;
}

void RunExporter::cancel() {
  if (cancel_) cancel_->cancel();
  if (dialog_) dialog_->setLabelText(tr("Cancelling: the export stops at its next tensor…"));
}

void RunExporter::done(bool succeeded, const QString& message) {
  cancel_.reset();
  if (succeeded) {
    const QFileInfo written(out_);
    lastOutputFolder_ = written.isDir() ? written.absoluteFilePath() : written.absolutePath();
    openOutput_->setEnabled(true);
    openOutput_->setToolTip(tr("Show %1 in the file manager.").arg(lastOutputFolder_));
  }
  if (dialog_) {
    dialog_->hide();
    dialog_->deleteLater();
  }
  updateActions();
  emit exportEnded(succeeded, message);
}

}  // namespace pareto
