// The Generation dock: one prompt through the dense model and the current run's compressed model side by side,
// the tokens appearing as they are generated (greedy, so the two texts differ only where compression changed
// the model's choices). The panel only shows; the worker generates and streams the texts in.
#pragma once

#include <QWidget>

class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace pareto {

class GenerationPanel : public QWidget {
  Q_OBJECT

 public:
  explicit GenerationPanel(QWidget* parent = nullptr);

  // The compressed side's run (empty name: no run yet, generation disabled).
  void setCompressedRun(const QString& runName);
  // Whether a dense model is there to generate with; `why` (shown on the Generate button) says why not.
  void setDenseAvailable(bool available, const QString& why = QString());
  void setBusy(bool busy);
  // The continuation so far of one side (replaces, so that multi-byte characters settle as tokens arrive).
  void showContinuation(bool compressed, const QString& text);
  void showStatus(const QString& text);

  QString prompt() const;
  int maxNewTokens() const;
  QPlainTextEdit* denseText() const { return dense_; }
  QPlainTextEdit* compressedText() const { return compressed_; }

 signals:
  void generateRequested(const QString& prompt, int maxNewTokens);
  void stopRequested();

 private:
  void updateEnabled();

  QPlainTextEdit* prompt_ = nullptr;
  QSpinBox* maxNewTokens_ = nullptr;
  QPushButton* generate_ = nullptr;
  QPushButton* stop_ = nullptr;
  QLabel* compressedCaption_ = nullptr;
  QLabel* status_ = nullptr;
  QPlainTextEdit* dense_ = nullptr;
  QPlainTextEdit* compressed_ = nullptr;
  QString runName_;
  bool denseAvailable_ = false;
  QString unavailableWhy_;
  bool busy_ = false;
};

}  // namespace pareto
