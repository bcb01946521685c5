#include "widgets/ParetoView.h"

#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

#include "widgets/ParetoFront.h"
#include "widgets/PlotSupport.h"
#include "widgets/RunHistory.h"

namespace pareto {

namespace {

const char* kRunIdProperty = "runId";

std::string denseKeyOf(const std::string& key) {
  if (key == metric::kPerplexity) return metric::kDensePerplexity;
  if (key == metric::kDecodeNll) return metric::kDenseDecodeNll;
  if (key == metric::kLinearBitsPerWeight) return metric::kDenseLinearBitsPerWeight;
  if (key == metric::kPredictedTokensPerSecond) return metric::kDensePredictedTokensPerSecond;
  return {};
}

}  // namespace

ParetoView::ParetoView(RunHistory* history, QWidget* parent) : QWidget(parent), history_(history) {
  quality_ = new QComboBox;
  quality_->setObjectName("paretoQuality");
  for (const char* key : {metric::kPerplexity, metric::kDecodeNll}) {
    const MetricInfo* info = findMetric(key);
    quality_->addItem(info->caption, QString(key));
    quality_->setItemData(quality_->count() - 1, info->meaning, Qt::ToolTipRole);
  }
  quality_->setToolTip(tr("The quality axis (lower is better): perplexity on held-out text, or the decode NLL of "
                          "the dense model's greedy continuations."));
  cost_ = new QComboBox;
  cost_->setObjectName("paretoCost");
  for (const char* key : {metric::kPredictedTokensPerSecond, metric::kLinearBitsPerWeight}) {
    const MetricInfo* info = findMetric(key);
    cost_->addItem(info->caption, QString(key));
    cost_->setItemData(cost_->count() - 1, info->meaning, Qt::ToolTipRole);
  }
  cost_->setToolTip(tr("The cost axis: predicted batch-1 decode tokens/s (higher is better) or bits per weight "
                       "of the block linears (lower is better)."));
  connect(quality_, qOverload<int>(&QComboBox::currentIndexChanged), this, &ParetoView::rebuild);
  connect(cost_, qOverload<int>(&QComboBox::currentIndexChanged), this, &ParetoView::rebuild);

  plot_ = new QCustomPlot;
  plot_->setObjectName("paretoPlot");
  plot_->setToolTip(tr("Every run of this session as a point; the dashed line joins the runs no other run beats "
                       "on both axes (the Pareto front). Click a point to open its run."));
  plot_->setInteractions(QCP::iSelectPlottables);
  addPlotTitle(plot_, tr("Quality against cost"));
  connect(plot_, &QCustomPlot::plottableClick, this,
          [this](QCPAbstractPlottable* p, int, QMouseEvent*) { pointClicked(p); });
  connect(plot_, &QCustomPlot::itemClick, this, [this](QCPAbstractItem* item, QMouseEvent*) { pointClicked(item); });

  auto* top = new QHBoxLayout;
  auto* qualityCaption = new QLabel(tr("Quality:"));
  qualityCaption->setToolTip(quality_->toolTip());
  auto* costCaption = new QLabel(tr("against:"));
  costCaption->setToolTip(cost_->toolTip());
  top->addWidget(qualityCaption);
  top->addWidget(quality_);
  top->addWidget(costCaption);
  top->addWidget(cost_);
  top->addStretch(1);
  top->addWidget(makeExportButton(this, {{tr("Pareto"), plot_}},
                                  [this](const QString& path, QString* error) { return writeCsv(path, error); }));
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(plot_, 1);

  connect(history_, &RunHistory::runAdded, this, &ParetoView::rebuild);
  connect(history_, &RunHistory::runsRemoved, this, &ParetoView::rebuild);
  connect(history_, &RunHistory::runChanged, this, &ParetoView::rebuild);
  rebuild();
}

void ParetoView::setAxes(const QString& quality, const QString& cost) {
  // Names from before the metric names were one set (a saved choice) mean today's.
  auto today = [](const QString& key) {
    return QString::fromStdString(metric::canonicalMetricName("compress", key.toStdString()));
  };
  const int q = quality_->findData(today(quality)), c = cost_->findData(today(cost));
  if (q >= 0) quality_->setCurrentIndex(q);
  if (c >= 0) cost_->setCurrentIndex(c);
}

void ParetoView::rebuild() {
  plot_->clearPlottables();
  plot_->clearItems();
  frontIds_.clear();
  const std::string qualityKey = quality_->currentData().toString().toStdString();
  const std::string costKey = cost_->currentData().toString().toStdString();
  const bool higherCostBetter = costKey == metric::kPredictedTokensPerSecond;
  plot_->xAxis->setLabel(findMetric(costKey)->caption + (higherCostBetter ? tr(" (higher is better)") : tr(" (lower is better)")));
  plot_->yAxis->setLabel(findMetric(qualityKey)->caption + tr(" (lower is better)"));

  const auto& runs = history_->runs();
  std::vector<TradeoffPoint> points;
  const QColor pointColor(0x29, 0x80, 0xb9);
  for (const RunRecord& run : runs) {
    const TradeoffPoint p{run.metric(costKey), run.metric(qualityKey)};
    points.push_back(p);
    if (std::isnan(p.cost) || std::isnan(p.quality)) continue;
    // One graph per run, so that a click names its run directly (graphs sort their points by key).
    QCPGraph* g = plot_->addGraph();
    g->setProperty(kRunIdProperty, run.id);
    g->setName(run.name);
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, pointColor, 9));
    g->setSelectable(QCP::stWhole);
    g->addData(p.cost, p.quality);
    auto* label = new QCPItemText(plot_);
    label->position->setCoords(p.cost, p.quality);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    label->setPadding(QMargins(6, 0, 0, 4));
    label->setText(QStringLiteral("#%1").arg(run.id));
    label->setProperty(kRunIdProperty, run.id);   // the label touches the point: a click on it opens the run too
    label->setColor(palette().color(QPalette::WindowText));
  }
  // The dense model, from the most recent run that measured it: where every curve starts.
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    const double x = it->metric(denseKeyOf(costKey)), y = it->metric(denseKeyOf(qualityKey));
    if (std::isnan(x) || std::isnan(y)) continue;
    QCPGraph* dense = plot_->addGraph();
    dense->setName(tr("dense"));
    dense->setLineStyle(QCPGraph::lsNone);
    dense->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssStar, QColor(0x7f, 0x8c, 0x8d), 12));
    dense->setSelectable(QCP::stNone);
    dense->addData(x, y);
    auto* label = new QCPItemText(plot_);
    label->position->setCoords(x, y);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    label->setPadding(QMargins(6, 0, 0, 4));
    label->setText(tr("dense"));
    label->setColor(palette().color(QPalette::WindowText));
    break;
  }
  if (auto* title = plotTitle(plot_))
    title->setText(plot_->graphCount() == 0 ? tr("Quality against cost: no runs with both values yet")
                                            : tr("Quality against cost"));
  const std::vector<size_t> front = paretoFront(points, higherCostBetter);
  QVector<double> fx, fy;
  for (size_t i : front) {
    frontIds_.push_back(runs[i].id);
    fx << points[i].cost;
    fy << points[i].quality;
  }
  if (fx.size() > 1) {
    QCPGraph* line = plot_->addGraph();
    line->setName(tr("Pareto front"));
    line->setPen(QPen(QColor(0xc0, 0x39, 0x2b), 1.5, Qt::DashLine));
    line->setSelectable(QCP::stNone);
    line->setData(fx, fy, true);
  }
  plot_->rescaleAxes();
  for (QCPAxis* axis : {plot_->xAxis, plot_->yAxis}) {
    const QCPRange r = axis->range();
    const double pad = r.size() > 0 ? r.size() * 0.08 : std::max(1e-3, std::abs(r.center()) * 0.1);
    axis->setRange(r.lower - pad, r.upper + pad);
  }
  applyPalette(plot_);
  plot_->replot();
}

QPointF ParetoView::pointOf(int runId) const {
  for (int i = 0; i < plot_->graphCount(); ++i) {
    QCPGraph* g = plot_->graph(i);
    if (g->property(kRunIdProperty).toInt() != runId || g->data()->isEmpty()) continue;
    const auto point = g->data()->constBegin();
    return {plot_->xAxis->coordToPixel(point->key), plot_->yAxis->coordToPixel(point->value)};
  }
  return {-1, -1};
}

void ParetoView::pointClicked(QObject* pointOrLabel) {
  const QVariant id = pointOrLabel ? pointOrLabel->property(kRunIdProperty) : QVariant();
  if (id.isValid()) emit runActivated(id.toInt());
}

bool ParetoView::writeCsv(const QString& path, QString* error) const {
  QVector<QStringList> rows;
  const std::string q = quality_->currentData().toString().toStdString();
  const std::string c = cost_->currentData().toString().toStdString();
  for (const RunRecord& run : history_->runs()) {
    const bool onFront = std::find(frontIds_.begin(), frontIds_.end(), run.id) != frontIds_.end();
    rows << QStringList{QString::number(run.id), run.name, QString::number(run.metric(c), 'g', 9),
                        QString::number(run.metric(q), 'g', 9), onFront ? "yes" : "no"};
  }
  return pareto::writeCsv(path, {"run", "name", QString::fromStdString(c), QString::fromStdString(q), "on_front"},
                          rows, error);
}

void ParetoView::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange) rebuild();
  QWidget::changeEvent(event);
}

}  // namespace pareto
