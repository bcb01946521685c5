#include "widgets/GenerationPanel.h"

#include <QFontDatabase>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace pareto {

GenerationPanel::GenerationPanel(QWidget* parent) : QWidget(parent) {
  prompt_ = new QPlainTextEdit;
  prompt_->setObjectName("generationPrompt");
  prompt_->setPlaceholderText(tr("A prompt to continue, e.g. “The history of the city begins”"));
  prompt_->setToolTip(tr("The prompt both models continue (BOS is put first when the model has one)."));
  prompt_->setMaximumHeight(70);
  maxNewTokens_ = new QSpinBox;
  maxNewTokens_->setObjectName("generationMaxNewTokens");
  maxNewTokens_->setRange(1, 4096);
  maxNewTokens_->setValue(48);
  maxNewTokens_->setToolTip(tr("Most tokens each model generates (it stops earlier at end-of-sequence)."));
  generate_ = new QPushButton(tr("Generate"));
  generate_->setObjectName("generateButton");
  stop_ = new QPushButton(tr("Stop"));
  stop_->setObjectName("stopGenerationButton");
  stop_->setToolTip(tr("Stop after the current token."));
  connect(generate_, &QPushButton::clicked, this, [this] { emit generateRequested(prompt(), maxNewTokens()); });
  connect(stop_, &QPushButton::clicked, this, &GenerationPanel::stopRequested);
  connect(prompt_, &QPlainTextEdit::textChanged, this, &GenerationPanel::updateEnabled);

  auto makeOutput = [](const char* name, const QString& tip) {
    auto* text = new QPlainTextEdit;
    text->setObjectName(name);
    text->setReadOnly(true);
    text->setToolTip(tip);
    return text;
  };
  dense_ = makeOutput("denseContinuation", tr("The dense model's greedy continuation."));
  compressed_ = makeOutput("compressedContinuation", tr("The compressed model's greedy continuation."));
  auto* denseCaption = new QLabel(tr("<b>Dense</b>"));
  denseCaption->setToolTip(dense_->toolTip());
  compressedCaption_ = new QLabel;
  compressedCaption_->setToolTip(compressed_->toolTip());
  status_ = new QLabel;
  status_->setObjectName("generationStatus");
  status_->setToolTip(tr("Progress of the generation and its speed on this device."));

  auto* controls = new QHBoxLayout;
  auto* tokensCaption = new QLabel(tr("Max new tokens:"));
  tokensCaption->setToolTip(maxNewTokens_->toolTip());
  controls->addWidget(tokensCaption);
  controls->addWidget(maxNewTokens_);
  controls->addStretch(1);
  controls->addWidget(status_);
  controls->addWidget(generate_);
  controls->addWidget(stop_);
  auto* sides = new QGridLayout;
  sides->addWidget(denseCaption, 0, 0);
  sides->addWidget(compressedCaption_, 0, 1);
  sides->addWidget(dense_, 1, 0);
  sides->addWidget(compressed_, 1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(prompt_);
  layout->addLayout(controls);
  layout->addLayout(sides, 1);
  setCompressedRun(QString());
}

void GenerationPanel::setCompressedRun(const QString& runName) {
  runName_ = runName;
  compressedCaption_->setText(runName.isEmpty() ? tr("<b>Compressed</b> (no run yet)")
                                                : tr("<b>Compressed</b>: %1").arg(runName.toHtmlEscaped()));
  updateEnabled();
}

void GenerationPanel::setDenseAvailable(bool available, const QString& why) {
  denseAvailable_ = available;
  unavailableWhy_ = why;
  updateEnabled();
}

void GenerationPanel::setBusy(bool busy) {
  busy_ = busy;
  if (busy) {
    dense_->clear();
    compressed_->clear();
  }
  updateEnabled();
}

void GenerationPanel::showContinuation(bool compressed, const QString& text) {
  (compressed ? compressed_ : dense_)->setPlainText(text);
}

void GenerationPanel::showStatus(const QString& text) { status_->setText(text); }

QString GenerationPanel::prompt() const { return prompt_->toPlainText(); }

int GenerationPanel::maxNewTokens() const { return maxNewTokens_->value(); }

void GenerationPanel::updateEnabled() {
  const bool ready = denseAvailable_ && !prompt_->toPlainText().trimmed().isEmpty();
  generate_->setEnabled(ready && !busy_);
  generate_->setToolTip(!denseAvailable_ ? (unavailableWhy_.isEmpty() ? tr("Open a model first.") : unavailableWhy_)
                        : prompt_->toPlainText().trimmed().isEmpty()
                            ? tr("Type a prompt first.")
                            : runName_.isEmpty() ? tr("Continue the prompt with the dense model (no run to compare "
                                                      "with yet).")
                                                 : tr("Continue the prompt with both models, token by token."));
  stop_->setEnabled(busy_);
}

}  // namespace pareto
