// The Generation dock: one prompt through the dense model and the current run's compressed model side by side,
// the tokens appearing as they are generated, greedy (so the two texts differ only where compression changed the
// model's choices) or sampled with the CLI's settings (temperature, top-k, top-p, seed; the same seed for both).
// Where the two continuations first differ is marked in both and named below them. The panel only shows; the
// worker generates and streams the texts in.
#pragma once

#include <QWidget>

class QCheckBox;
class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace pareto {

// How the next token is chosen, as `pareto-cli generate` takes it (model/Generation.h SamplingOptions).
struct GenerationSampling {
  bool greedy = true;
  double temperature = 1.0;
  int topK = 0;          // 0: no top-k cut
  double topP = 1.0;     // 1: no nucleus cut
  qulonglong seed = 0;
};

class GenerationPanel : public QWidget {
  Q_OBJECT

 public:
  explicit GenerationPanel(QWidget* parent = nullptr);

  // The compressed side's run (empty name: no run yet, generation disabled).
  void setCompressedRun(const QString& runName);
  QString compressedRun() const { return runName_; }
  // Whether a dense model is there to generate with; `why` (shown on the Generate button) says why not.
  void setDenseAvailable(bool available, const QString& why = QString());
  void setBusy(bool busy);
  // The continuation so far of one side (replaces, so that multi-byte characters settle as tokens arrive).
  void showContinuation(bool compressed, const QString& text);
  void showStatus(const QString& text);

  QString prompt() const;
  int maxNewTokens() const;
  GenerationSampling sampling() const;
  // The character where the two continuations first differ (-1: none shown yet, or one is the other's start).
  int divergence() const { return divergence_; }
  QPlainTextEdit* denseText() const { return dense_; }
  QPlainTextEdit* compressedText() const { return compressed_; }

 signals:
  void generateRequested(const QString& prompt, int maxNewTokens);
  void stopRequested();

 private:
  void updateEnabled();
  void markDivergence();

  QPlainTextEdit* prompt_ = nullptr;
  QSpinBox* maxNewTokens_ = nullptr;
  QPushButton* generate_ = nullptr;
  QPushButton* stop_ = nullptr;
  QLabel* compressedCaption_ = nullptr;
  QLabel* status_ = nullptr;
  QLabel* divergenceLabel_ = nullptr;
  QCheckBox* sample_ = nullptr;
  QDoubleSpinBox* temperature_ = nullptr;
  QSpinBox* topK_ = nullptr;
  QDoubleSpinBox* topP_ = nullptr;
  QSpinBox* seed_ = nullptr;
  int divergence_ = -1;
  QPlainTextEdit* dense_ = nullptr;
  QPlainTextEdit* compressed_ = nullptr;
  QString runName_;
  bool denseAvailable_ = false;
  QString unavailableWhy_;
  bool busy_ = false;
};

}  // namespace pareto
