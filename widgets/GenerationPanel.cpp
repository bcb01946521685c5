#include "widgets/GenerationPanel.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFontDatabase>
#include <QTextEdit>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <utility>

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
  dense_ = makeOutput("denseContinuation", tr("The dense model's continuation (greedy unless Sample is on)."));
  compressed_ = makeOutput("compressedContinuation",
                           tr("The compressed model's continuation (greedy unless Sample is on)."));
  auto* denseCaption = new QLabel(tr("<b>Dense</b>"));
  denseCaption->setToolTip(dense_->toolTip());
  compressedCaption_ = new QLabel;
  compressedCaption_->setToolTip(compressed_->toolTip());
  status_ = new QLabel;
  status_->setObjectName("generationStatus");
  status_->setToolTip(tr("Progress of the generation and its speed on this device."));

  sample_ = new QCheckBox(tr("Sample"));
  sample_->setObjectName("generationSample");
  sample_->setToolTip(tr("Off: greedy (the most likely token each step). On: sample with the temperature, top-k, "
                         "top-p and seed beside it, as pareto-cli generate does; both models use the same seed."));
  temperature_ = new QDoubleSpinBox;
  temperature_->setObjectName("generationTemperature");
  temperature_->setRange(0.05, 5.0);
  temperature_->setSingleStep(0.1);
  temperature_->setValue(1.0);
  temperature_->setToolTip(tr("Sampling temperature: the logits are divided by it (below 1 sharper, above flatter)."));
  topK_ = new QSpinBox;
  topK_->setObjectName("generationTopK");
  topK_->setRange(0, 100000);
  topK_->setToolTip(tr("Sample among the K most likely tokens (0: all)."));
  topP_ = new QDoubleSpinBox;
  topP_->setObjectName("generationTopP");
  topP_->setRange(0.01, 1.0);
  topP_->setSingleStep(0.05);
  topP_->setValue(1.0);
  topP_->setToolTip(tr("Nucleus sampling: among the most likely tokens whose probabilities sum to P (1: all)."));
  seed_ = new QSpinBox;
  seed_->setObjectName("generationSeed");
  seed_->setRange(0, 2147483647);
  seed_->setToolTip(tr("Random seed of the sampler: the same seed gives the same tokens on every device."));
  auto enableSampling = [this] {
    for (QWidget* w : std::initializer_list<QWidget*>{temperature_, topK_, topP_, seed_}) w->setEnabled(sample_->isChecked());
  };
  connect(sample_, &QCheckBox::toggled, this, enableSampling);
  enableSampling();
  divergenceLabel_ = new QLabel;
  divergenceLabel_->setObjectName("generationDivergence");
  divergenceLabel_->setWordWrap(true);
  divergenceLabel_->setToolTip(tr("Where the compressed model's continuation first differs from the dense one's, "
                                  "marked in both texts."));

  auto* controls = new QHBoxLayout;
  auto* tokensCaption = new QLabel(tr("Max new tokens:"));
  tokensCaption->setToolTip(maxNewTokens_->toolTip());
  controls->addWidget(tokensCaption);
  controls->addWidget(maxNewTokens_);
  controls->addWidget(sample_);
  using Field = std::pair<QString, QWidget*>;
  for (const auto& [caption, field] : {Field{tr("T:"), temperature_}, Field{tr("top-k:"), topK_},
                                       Field{tr("top-p:"), topP_}, Field{tr("seed:"), seed_}}) {
    auto* label = new QLabel(caption);
    label->setToolTip(field->toolTip());
    controls->addWidget(label);
    controls->addWidget(field);
  }
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
  layout->addWidget(divergenceLabel_);
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
    markDivergence();
  }
  updateEnabled();
}

void GenerationPanel::showContinuation(bool compressed, const QString& text) {
  (compressed ? compressed_ : dense_)->setPlainText(text);
  markDivergence();
}

void GenerationPanel::markDivergence() {
  const QString a = dense_->toPlainText(), b = compressed_->toPlainText();
  int i = 0;
  const int n = int(std::min(a.size(), b.size()));
  while (i < n && a.at(i) == b.at(i)) ++i;
  divergence_ = (i < n) ? i : -1;
  for (QPlainTextEdit* text : {dense_, compressed_}) {
    QList<QTextEdit::ExtraSelection> marks;
    if (divergence_ >= 0) {
      QTextEdit::ExtraSelection mark;
      mark.cursor = QTextCursor(text->document());
      mark.cursor.setPosition(divergence_);
      mark.cursor.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
      mark.format.setBackground(QColor(0xf3, 0x9c, 0x12, 90));
      marks << mark;
    }
    text->setExtraSelections(marks);
  }
  if (a.isEmpty() || b.isEmpty())
    divergenceLabel_->clear();
  else if (divergence_ < 0)
    divergenceLabel_->setText(tr("The continuations agree so far (%1 characters).").arg(n));
  else
    divergenceLabel_->setText(tr("The continuations first differ at character %1, after “%2” (marked).")
                                  .arg(divergence_)
                                  .arg(a.left(divergence_).right(40)));
}

void GenerationPanel::showStatus(const QString& text) { status_->setText(text); }

QString GenerationPanel::prompt() const { return prompt_->toPlainText(); }

int GenerationPanel::maxNewTokens() const { return maxNewTokens_->value(); }

GenerationSampling GenerationPanel::sampling() const {
  GenerationSampling s;
  s.greedy = !sample_->isChecked();
  s.temperature = temperature_->value();
  s.topK = topK_->value();
  s.topP = topP_->value();
  s.seed = qulonglong(seed_->value());
  return s;
}

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
