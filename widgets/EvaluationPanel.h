// What a run measures after compressing, and where its output goes: the held-out text for perplexity, the
// held-out prompts for decode fidelity, activation drift and the Hessian study, their sizes, and the Run
// button. Settings persist in QSettings (group "evaluation"). A part whose file is not chosen is skipped, and
// the panel says so before the run.
#pragma once

#include <QString>
#include <QWidget>

class QCheckBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace pareto {

struct EvaluationSettings {
  QString heldOutText;         // perplexity text ("" skips perplexity)
  int perplexityWindow = 128;
  int perplexityMaxWindows = 8;     // 0: every full window
  QString prompts;             // held-out prompts ("" skips fidelity, drift and the study)
  int maxPrompts = 8;
  int maxNewTokens = 32;       // dense continuation length for decode fidelity
  int driftSteps = 32;         // 0 skips activation drift
  bool hessianStudy = false;
  int studyTokens = 1024;      // calibration tokens of each Hessian in the study
  QString runsFolder;          // where compressed folders are written
};

class EvaluationPanel : public QWidget {
  Q_OBJECT

 public:
  explicit EvaluationPanel(QWidget* parent = nullptr);

  EvaluationSettings settings() const;
  void setSettings(const EvaluationSettings& settings);
  void loadSettings();         // from QSettings
  void saveSettings() const;   // to QSettings

  // Enables Run; `why` (when not runnable) becomes the button's tooltip.
  void setRunnable(bool runnable, const QString& why);
  void setRunning(bool running);
  QPushButton* runButton() const { return run_; }

 signals:
  void runRequested();
  void settingsChanged();

 private:
  QLineEdit* addFileRow(const QString& key, const QString& caption, const QString& meaning, bool folder);
  void updateNotes();

  QLineEdit* heldOutText_ = nullptr;
  QSpinBox* window_ = nullptr;
  QSpinBox* maxWindows_ = nullptr;
  QLineEdit* prompts_ = nullptr;
  QSpinBox* maxPrompts_ = nullptr;
  QSpinBox* maxNewTokens_ = nullptr;
  QSpinBox* driftSteps_ = nullptr;
  QCheckBox* hessianStudy_ = nullptr;
  QSpinBox* studyTokens_ = nullptr;
  QLineEdit* runsFolder_ = nullptr;
  QLabel* notes_ = nullptr;
  QPushButton* run_ = nullptr;
  QFormLayout* form_ = nullptr;
  bool running_ = false;
  bool runnable_ = false;
};

}  // namespace pareto
