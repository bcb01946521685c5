#include "widgets/EvaluationPanel.h"

#include <QCheckBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStandardPaths>
#include <QVBoxLayout>

#include "widgets/FormCaptions.h"

namespace pareto {

namespace {

QSpinBox* spin(const char* name, int min, int max, const QString& meaning) {
  auto* s = new QSpinBox;
  s->setObjectName(name);
  s->setRange(min, max);
  s->setKeyboardTracking(false);
  s->setToolTip(meaning);
  return s;
}

QString defaultRunsFolder() {
  return QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation) + "/runs";
}

}  // namespace

EvaluationPanel::EvaluationPanel(QWidget* parent) : QWidget(parent) {
  form_ = new QFormLayout;
  heldOutText_ = addFileRow("eval.heldOutText", tr("Held-out text:"),
                            tr("Perplexity is measured on this UTF-8 text (use text the model was not calibrated "
                               "on). Leave empty to skip perplexity."),
                            false);
  window_ = spin("eval.window", 2, 1 << 16, tr("Perplexity window W: tokens per scored window."));
  form_->addRow(tr("Window:"), window_);
  maxWindows_ = spin("eval.maxWindows", 0, 1 << 20, tr("Score at most this many windows (0: every full window)."));
  form_->addRow(tr("Max windows:"), maxWindows_);
  prompts_ = addFileRow("eval.prompts", tr("Held-out prompts:"),
                        tr("One prompt per line, for decode fidelity, activation drift and the Hessian study's "
                           "target. Leave empty to skip them."),
                        false);
  maxPrompts_ = spin("eval.maxPrompts", 1, 10000, tr("Use the first N prompts."));
  form_->addRow(tr("Prompts:"), maxPrompts_);
  maxNewTokens_ = spin("eval.maxNewTokens", 1, 4096,
                       tr("Decode fidelity: tokens the dense model generates per prompt; the compressed model is "
                          "scored on them."));
  form_->addRow(tr("Continuation tokens:"), maxNewTokens_);
  driftSteps_ = spin("eval.driftSteps", 0, 4096, tr("Activation drift: decode steps measured (0 skips drift)."));
  form_->addRow(tr("Drift steps:"), driftSteps_);
  hessianStudy_ = new QCheckBox(tr("Hessian discrepancy study"));
  hessianStudy_->setObjectName("eval.hessianStudy");
  hessianStudy_->setToolTip(tr("Compare text and decode calibration Hessians with the decode-time Hessian of "
                               "held-out prompts, module by module (uses the held-out text and prompts; half of "
                               "the prompts calibrate, the other half are the target)."));
  form_->addRow(hessianStudy_);
  studyTokens_ = spin("eval.studyTokens", 16, 1 << 24, tr("Hessian study: tokens reaching each calibration Hessian."));
  form_->addRow(tr("Study tokens:"), studyTokens_);
  runsFolder_ = addFileRow("eval.runsFolder", tr("Runs folder:"),
                           tr("Each run writes its compressed model folder here."), true);
  notes_ = new QLabel;
  notes_->setObjectName("eval.notes");
  notes_->setWordWrap(true);
  notes_->setToolTip(tr("What this run will measure with the settings above."));
  run_ = new QPushButton(tr("Run: Compress and Evaluate"));
  run_->setObjectName("runButton");
  run_->setDefault(true);
  connect(run_, &QPushButton::clicked, this, &EvaluationPanel::runRequested);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form_);
  layout->addWidget(notes_);
  layout->addWidget(run_);

  for (QSpinBox* s : {window_, maxWindows_, maxPrompts_, maxNewTokens_, driftSteps_, studyTokens_})
    connect(s, qOverload<int>(&QSpinBox::valueChanged), this, [this] { updateNotes(); emit settingsChanged(); });
  for (QLineEdit* e : {heldOutText_, prompts_, runsFolder_})
    connect(e, &QLineEdit::textChanged, this, [this] { updateNotes(); emit settingsChanged(); });
  connect(hessianStudy_, &QCheckBox::toggled, this, [this] { updateNotes(); emit settingsChanged(); });
  shareTooltipsWithCaptions(this);
  setSettings(EvaluationSettings{});
  setRunnable(false, tr("Open a model first."));
}

QLineEdit* EvaluationPanel::addFileRow(const QString& key, const QString& caption, const QString& meaning, bool folder) {
  auto* row = new QWidget;
  auto* h = new QHBoxLayout(row);
  h->setContentsMargins(0, 0, 0, 0);
  auto* edit = new QLineEdit;
  edit->setObjectName(key);
  edit->setToolTip(meaning);
  edit->setClearButtonEnabled(true);
  auto* browse = new QPushButton(tr("…"));
  browse->setToolTip(folder ? tr("Choose a folder.") : tr("Choose a file."));
  browse->setMaximumWidth(32);
  connect(browse, &QPushButton::clicked, this, [this, edit, folder, caption] {
    const QString start = edit->text().isEmpty() ? QDir::homePath() : QFileInfo(edit->text()).absolutePath();
    const QString path = folder ? QFileDialog::getExistingDirectory(this, caption, edit->text())
                                : QFileDialog::getOpenFileName(this, caption, start);
    if (!path.isEmpty()) edit->setText(path);
  });
  h->addWidget(edit, 1);
  h->addWidget(browse);
  auto* label = new QLabel(caption);
  label->setToolTip(meaning);
  form_->addRow(label, row);
  return edit;
}

EvaluationSettings EvaluationPanel::settings() const {
  EvaluationSettings s;
  s.heldOutText = heldOutText_->text().trimmed();
  s.perplexityWindow = window_->value();
  s.perplexityMaxWindows = maxWindows_->value();
  s.prompts = prompts_->text().trimmed();
  s.maxPrompts = maxPrompts_->value();
  s.maxNewTokens = maxNewTokens_->value();
  s.driftSteps = driftSteps_->value();
  s.hessianStudy = hessianStudy_->isChecked();
  s.studyTokens = studyTokens_->value();
  s.runsFolder = runsFolder_->text().trimmed().isEmpty() ? defaultRunsFolder() : runsFolder_->text().trimmed();
  return s;
}

void EvaluationPanel::setSettings(const EvaluationSettings& s) {
  heldOutText_->setText(s.heldOutText);
  window_->setValue(s.perplexityWindow);
  maxWindows_->setValue(s.perplexityMaxWindows);
  prompts_->setText(s.prompts);
  maxPrompts_->setValue(s.maxPrompts);
  maxNewTokens_->setValue(s.maxNewTokens);
  driftSteps_->setValue(s.driftSteps);
  hessianStudy_->setChecked(s.hessianStudy);
  studyTokens_->setValue(s.studyTokens);
  runsFolder_->setText(s.runsFolder);
  runsFolder_->setPlaceholderText(defaultRunsFolder());
  updateNotes();
}

void EvaluationPanel::loadSettings() {
  QSettings q;
  q.beginGroup("evaluation");
  EvaluationSettings s;
  s.heldOutText = q.value("heldOutText", s.heldOutText).toString();
  s.perplexityWindow = q.value("perplexityWindow", s.perplexityWindow).toInt();
  s.perplexityMaxWindows = q.value("perplexityMaxWindows", s.perplexityMaxWindows).toInt();
  s.prompts = q.value("prompts", s.prompts).toString();
  s.maxPrompts = q.value("maxPrompts", s.maxPrompts).toInt();
  s.maxNewTokens = q.value("maxNewTokens", s.maxNewTokens).toInt();
  s.driftSteps = q.value("driftSteps", s.driftSteps).toInt();
  s.hessianStudy = q.value("hessianStudy", s.hessianStudy).toBool();
  s.studyTokens = q.value("studyTokens", s.studyTokens).toInt();
  s.runsFolder = q.value("runsFolder", s.runsFolder).toString();
  setSettings(s);
}

void EvaluationPanel::saveSettings() const {
  const EvaluationSettings s = settings();
  QSettings q;
  q.beginGroup("evaluation");
  q.setValue("heldOutText", s.heldOutText);
  q.setValue("perplexityWindow", s.perplexityWindow);
  q.setValue("perplexityMaxWindows", s.perplexityMaxWindows);
  q.setValue("prompts", s.prompts);
  q.setValue("maxPrompts", s.maxPrompts);
  q.setValue("maxNewTokens", s.maxNewTokens);
  q.setValue("driftSteps", s.driftSteps);
  q.setValue("hessianStudy", s.hessianStudy);
  q.setValue("studyTokens", s.studyTokens);
  q.setValue("runsFolder", runsFolder_->text().trimmed());
}

void EvaluationPanel::setRunnable(bool runnable, const QString& why) {
  runnable_ = runnable;
  run_->setEnabled(runnable && !running_);
  run_->setToolTip(runnable ? tr("Compress the model with this recipe on a worker thread, then evaluate it as set "
                                 "above. Progress and Cancel are in the status bar.")
                            : why);
}

void EvaluationPanel::setRunning(bool running) {
  running_ = running;
  run_->setEnabled(runnable_ && !running);
}

void EvaluationPanel::updateNotes() {
  const EvaluationSettings s = settings();
  QStringList parts;
  auto file = [](const QString& path) { return !path.isEmpty() && QFileInfo(path).isFile(); };
  parts << (file(s.heldOutText) ? tr("perplexity") : tr("no perplexity (choose a held-out text)"));
  if (file(s.prompts)) {
    parts << tr("decode fidelity");
    parts << (s.driftSteps > 0 ? tr("activation drift") : tr("no drift (0 steps)"));
    if (s.hessianStudy) parts << (file(s.heldOutText) ? tr("Hessian study") : tr("no Hessian study (needs the text)"));
  } else {
    parts << tr("no decode fidelity, drift or Hessian study (choose held-out prompts)");
  }
  notes_->setText(tr("Measures: %1.").arg(parts.join(", ")));
  studyTokens_->setEnabled(s.hessianStudy);
}

}  // namespace pareto
