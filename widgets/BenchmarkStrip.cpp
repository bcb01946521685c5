#include "widgets/BenchmarkStrip.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "widgets/PlotSupport.h"

namespace pareto {

const QString BenchmarkStrip::kCpuReferenceLabel = QStringLiteral("CPU reference (float64) — not GPU speed");

namespace {

QString number(double v, int decimals) {
  return std::isfinite(v) ? QLocale().toString(v, 'f', decimals) : QStringLiteral("—");
}

// GB/s with as many decimals as a small figure needs (CPU references run at a few GB/s, GPUs at thousands).
QString gbText(double gb) { return number(gb, gb >= 100 ? 0 : gb >= 10 ? 1 : 2); }

}  // namespace

BenchmarkStrip::BenchmarkStrip(QWidget* parent) : QWidget(parent) {
  run_ = new QPushButton(tr("Benchmark"));
  run_->setObjectName("benchmarkRun");
  cancel_ = new QPushButton(tr("Cancel"));
  cancel_->setObjectName("benchmarkCancel");
  cancel_->setToolTip(tr("Stop the benchmark after the layer being built, the format being timed or the decode run "
                         "in progress; nothing of it is recorded."));
  progress_ = new QProgressBar;
  progress_->setObjectName("benchmarkProgress");
  progress_->setRange(0, 1000);
  progress_->setTextVisible(false);
  progress_->setMaximumWidth(200);
  progress_->setToolTip(tr("How far the benchmark is: kernel formats and decode formats done, and the layer being "
                           "built."));
  status_ = new QLabel;
  status_->setObjectName("benchmarkStatus");
  status_->setWordWrap(true);
  status_->setToolTip(
      tr("The device and the model shape being measured. On a GPU each kernel format runs one decode step of the "
         "model's linear layers (every weight distinct, captured in a CUDA graph, median of 50 replays); then the "
         "decode loop of the whole model runs in each weight format (one step captured in a CUDA graph and replayed "
         "per token, median of 5 runs of 256 tokens after 512 tokens of context). Without CUDA the kernels' float64 "
         "CPU references are timed instead, over one layer, and the decode loop runs eagerly through them with tiny "
         "settings (context 8, 4 new tokens, 1 run; synthetic models cut to 1 layer): they show the code works, not "
         "how fast a GPU is, and are not used to predict tokens/s."));
  summary_ = new QLabel;
  summary_->setObjectName("benchmarkSummary");
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_->setToolTip(
      tr("Per kernel format: GB/s = bytes one step reads (weights as the kernel stores them, activations, outputs) "
         "over its median time; % of copy = that over the device's measured copy bandwidth (read + written bytes "
         "of a large copy over its time); ms/step = median time of the step; tok/s = 1000 / (ms per step scaled "
         "to all of the model's layers): the decode speed of the linear layers alone (attention, norms and the "
         "output head not included); × dense = dense time over this time.\n"
         "Per decode format (\"decode …\" lines): tok/s = tokens generated per second by the real decode loop, "
         "measured (generated tokens over the median time of a run); ms/token = median run time over its tokens; "
         "GB/s = bytes one step reads (weights as laid out for their kernels, output head included, plus the KV "
         "cache) over ms/token; % of copy as above; × dense = this tok/s over the dense model's."));
  connect(run_, &QPushButton::clicked, this, &BenchmarkStrip::runRequested);
  connect(cancel_, &QPushButton::clicked, this, [this] {
    cancel_->setEnabled(false);
    status_->setText(tr("%1\ncancelling after the current step…").arg(sessionText_));
    emit cancelRequested();
  });

  plot_ = new QCustomPlot;
  plot_->setObjectName("benchmarkPlot");
  plot_->setToolTip(tr("Blue bars: achieved GB/s of each kernel format, green bars: of the whole decode loop in each "
                       "weight format (left axis); dashed line: the measured copy bandwidth, the ceiling of anything "
                       "that streams its weights once; diamonds: tokens/s of the model's linear layers at that "
                       "kernel speed, circles: measured tokens/s of the decode loop (right axis)."));
  addPlotTitle(plot_, tr("Kernel benchmark: no session yet"));
  plot_->yAxis->setLabel(tr("GB/s achieved"));
  plot_->yAxis2->setVisible(true);
  plot_->yAxis2->setLabel(tr("tokens/s (◆ linears · ● decode loop)"));
  plot_->xAxis->setLabel(tr("kernel format · decode loop format"));

  auto* top = new QHBoxLayout;
  top->addWidget(run_);
  top->addWidget(cancel_);
  top->addWidget(progress_);
  top->addWidget(status_, 1);
  top->addWidget(makeExportButton(this, {{tr("Benchmark"), plot_}},
                                  [this](const QString& path, QString* error) { return writeCsv(path, error); }));
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(plot_, 1);
  layout->addWidget(summary_);
  status_->setText(tr("Measures the kernels of the current recipe and dense at the loaded model's shapes, then the "
                      "model's decode loop."));
  updateButtons();
  rebuild();
}

void BenchmarkStrip::start(const BenchmarkSession& session) {
  session_ = session;
  points_.clear();
  running_ = true;
  progress_->setValue(0);
  sessionText_ = tr("%1 · %2").arg(session.device, session.shape);
  if (session.cpuReference) sessionText_ += QStringLiteral(" · ") + kCpuReferenceLabel;
  if (!session.decodeShape.isEmpty()) sessionText_ += QStringLiteral("\n") + tr("Decode loop: %1").arg(session.decodeShape);
  if (!session.note.isEmpty()) sessionText_ += QStringLiteral("\n") + session.note;
  status_->setText(sessionText_);
  updateButtons();
  rebuild();
}

void BenchmarkStrip::addPoint(const BenchmarkPoint& point) {
  points_ << point;
  if (session_.formats > 0) progress_->setValue(int(1000.0 * double(points_.size()) / session_.formats));
  rebuild();
}

void BenchmarkStrip::setProgress(double fraction, const QString& message) {
  progress_->setValue(int(std::clamp(fraction, 0.0, 1.0) * 1000));
  progress_->setToolTip(message);
}

void BenchmarkStrip::finish(const QString& message) {
  running_ = false;
  progress_->setValue(progress_->maximum());
  status_->setText(sessionText_.isEmpty() ? message : sessionText_ + QStringLiteral("\n") + message);
  updateButtons();
  rebuild();
}

void BenchmarkStrip::setRunnable(bool runnable, const QString& why) {
  runnable_ = runnable;
  why_ = why;
  updateButtons();
}

QString BenchmarkStrip::status() const { return status_->text(); }

void BenchmarkStrip::updateButtons() {
  run_->setEnabled(runnable_ && !running_);
  run_->setToolTip(running_ ? tr("A benchmark is running.")
                   : runnable_
                       ? tr("Time the kernel formats of the current recipe and dense at the loaded model's linear "
                            "shapes on the current device, then the model's decode loop, and record them in the run "
                            "store (predicted tokens/s use the kernel rows from then on).")
                       : why_);
  cancel_->setEnabled(running_);
  cancel_->setVisible(running_);
  progress_->setVisible(running_);
}

void BenchmarkStrip::rebuild() {
  plot_->clearPlottables();
  plot_->clearItems();
  const QString what = session_.decodeShape.isEmpty() ? tr("Kernel benchmark") : tr("Kernel and decode benchmark");
  QString title = session_.device.isEmpty() ? tr("Benchmark: no session yet")
                                            : tr("%1 on %2 — %3").arg(what, session_.device, session_.shape);
  if (session_.cpuReference) title += QStringLiteral("\n") + kCpuReferenceLabel;
  if (QCPTextElement* t = plotTitle(plot_)) t->setText(title);

  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  auto makeBars = [this](const QString& name, QColor color) {
    auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
    bars->setName(name);
    bars->setWidth(0.6);
    if (session_.cpuReference) color = QColor(0x95, 0xa5, 0xa6);
    bars->setBrush(color);
    bars->setPen(QPen(color.darker(130)));
    return bars;
  };
  QCPBars* bars = makeBars(tr("kernel GB/s"), QColor(0x29, 0x80, 0xb9));
  QCPBars* decodeBars = makeBars(tr("decode GB/s"), QColor(0x27, 0xae, 0x60));
  if (session_.cpuReference) decodeBars->setBrush(QBrush(QColor(0x95, 0xa5, 0xa6), Qt::Dense4Pattern));
  QCPGraph* tokens = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
  tokens->setName(tr("tokens/s (linears)"));
  tokens->setLineStyle(QCPGraph::lsNone);
  tokens->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDiamond, QColor(0xd3, 0x54, 0x00), 10));
  QCPGraph* decodeTokens = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
  decodeTokens->setName(tr("tokens/s (decode loop, measured)"));
  decodeTokens->setLineStyle(QCPGraph::lsNone);
  decodeTokens->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(QColor(0x8e, 0x44, 0xad), 2), QColor(0x8e, 0x44, 0xad), 9));
  double maxGb = session_.copyGbPerSecond, maxTokens = 0;
  QStringList lines;
  const QColor text = palette().color(QPalette::WindowText);
  for (int i = 0; i < points_.size(); ++i) {
    const BenchmarkPoint& p = points_[i];
    const bool decode = p.kind == BenchmarkPoint::Kind::Decode;
    const QString name = decode ? tr("decode %1").arg(p.name) : p.name;
    const double x = i + 1;
    ticker->addTick(x, p.available ? (decode ? tr("decode\n%1").arg(p.name) : p.name)
                                   : tr("%1\n(unavailable)").arg(name));
    if (!p.available) {
      lines << tr("%1: unavailable (%2)").arg(name, p.note);
      continue;
    }
    if (std::isfinite(p.gbPerSecond)) {
      (decode ? decodeBars : bars)->addData(x, p.gbPerSecond);
      maxGb = std::max(maxGb, p.gbPerSecond);
      auto* label = new QCPItemText(plot_);
      label->position->setCoords(x, p.gbPerSecond);
      label->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
      label->setPadding(QMargins(0, 0, 0, 3));
      label->setText(gbText(p.gbPerSecond));
      label->setColor(text);
    }
    if (std::isfinite(p.tokensPerSecond) && p.tokensPerSecond > 0) {
      (decode ? decodeTokens : tokens)->addData(x, p.tokensPerSecond);
      maxTokens = std::max(maxTokens, p.tokensPerSecond);
    }
    QString line;
    if (decode) {
      line = tr("%1: %2 tok/s measured · %3 ms/token (context %4, %5 new tokens) · %6 GB/s")
                 .arg(name, number(p.tokensPerSecond, p.tokensPerSecond >= 100 ? 0 : 1), number(p.msPerStep, 3))
                 .arg(p.context)
                 .arg(p.newTokens)
                 .arg(gbText(p.gbPerSecond));
      if (std::isfinite(p.fractionOfCopy) && p.fractionOfCopy > 0)
        line += tr(" (%1% of copy)").arg(number(100.0 * p.fractionOfCopy, 0));
    } else {
      line = tr("%1: %2 GB/s").arg(name, gbText(p.gbPerSecond));
      if (std::isfinite(p.fractionOfCopy) && p.fractionOfCopy > 0)
        line += tr(" (%1% of copy)").arg(number(100.0 * p.fractionOfCopy, 0));
      line += tr(" · %1 ms/step · %2 tok/s").arg(number(p.msPerStep, 3), number(p.tokensPerSecond, 0));
    }
    if (std::isfinite(p.speedupOverDense) && p.name != "dense")
      line += tr(" · ×%1 dense").arg(number(p.speedupOverDense, 2));
    if (decode && !p.note.isEmpty()) line += tr(" · %1").arg(p.note);
    lines << line;
  }
  if (session_.copyGbPerSecond > 0) {
    auto* copy = new QCPItemStraightLine(plot_);
    copy->setPen(QPen(QColor(0xc0, 0x39, 0x2b), 1.5, Qt::DashLine));
    copy->point1->setCoords(0, session_.copyGbPerSecond);
    copy->point2->setCoords(1, session_.copyGbPerSecond);
    auto* label = new QCPItemText(plot_);
    label->position->setType(QCPItemPosition::ptAxisRectRatio);
    label->position->setAxisRect(plot_->axisRect());
    label->position->setAxes(plot_->xAxis, plot_->yAxis);
    label->position->setTypeY(QCPItemPosition::ptPlotCoords);
    label->position->setCoords(0.01, session_.copyGbPerSecond);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    label->setText(tr("copy bandwidth %1 GB/s").arg(gbText(session_.copyGbPerSecond)));
    label->setColor(QColor(0xc0, 0x39, 0x2b));
  }
  plot_->xAxis->setTicker(ticker);
  plot_->xAxis->setRange(0.4, std::max<double>(1.0, points_.size()) + 0.6);
  plot_->yAxis->setRange(0, maxGb > 0 ? maxGb * 1.15 : 1.0);
  plot_->yAxis2->setRange(0, maxTokens > 0 ? maxTokens * 1.2 : 1.0);
  summary_->setText(lines.isEmpty() ? (running_ ? tr("Waiting for the first result…") : tr("No results yet."))
                                    : lines.join('\n'));
  applyPalette(plot_);
  plot_->replot();
}

bool BenchmarkStrip::writeCsv(const QString& path, QString* error) const {
  QVector<QStringList> rows;
  auto value = [](double v) { return std::isfinite(v) ? QString::number(v, 'g', 9) : QString(); };
  for (const BenchmarkPoint& p : points_)
    rows << QStringList{p.kind == BenchmarkPoint::Kind::Decode ? "decode" : "kernel",
                        p.name,
                        p.available ? "yes" : "no",
                        p.note,
                        value(p.msPerStep),
                        value(p.gbPerSecond),
                        value(p.fractionOfCopy),
                        value(p.speedupOverDense),
                        value(p.bitsPerWeight),
                        p.kind == BenchmarkPoint::Kind::Kernel ? value(p.tokensPerSecond) : QString(),
                        p.kind == BenchmarkPoint::Kind::Decode ? value(p.tokensPerSecond) : QString(),
                        p.context > 0 ? QString::number(p.context) : QString(),
                        p.newTokens > 0 ? QString::number(p.newTokens) : QString(),
                        session_.device,
                        session_.cpuReference ? kCpuReferenceLabel : QString()};
  return pareto::writeCsv(path,
                          {"kind", "format", "available", "note", "ms_per_step", "gb_per_s", "fraction_of_copy",
                           "speedup_over_dense", "bits_per_weight", "linear_tokens_per_s", "decode_tokens_per_s",
                           "context", "new_tokens", "device", "timing"},
                          rows, error);
}

void BenchmarkStrip::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange) rebuild();
  QWidget::changeEvent(event);
}

}  // namespace pareto
