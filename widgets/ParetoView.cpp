#include "widgets/ParetoView.h"

#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "widgets/ParetoFront.h"
#include "widgets/PlotSupport.h"
#include "widgets/RunHistory.h"

namespace pareto {

namespace {

const char* kRunIdProperty = "runId";
const char* kPredictedProperty = "predicted";

std::string denseKeyOf(const std::string& key) {
  if (key == metric::kPerplexity) return metric::kDensePerplexity;
  if (key == metric::kDecodeNll) return metric::kDenseDecodeNll;
  if (key == metric::kLinearBitsPerWeight) return metric::kDenseLinearBitsPerWeight;
  if (key == metric::kPredictedTokensPerSecond || key == kDecodeTokensPerSecond)
    return metric::kDensePredictedTokensPerSecond;
  return {};
}

}  // namespace

ParetoView::ParetoView(RunHistory* history, QWidget* parent) : QWidget(parent), history_(history) {
  model_ = new QComboBox;
  model_->setObjectName("paretoModel");
  model_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  model_->setToolTip(tr("The source model whose runs are shown: a front and its dense baseline are of one model "
                        "(its content hash). Opening a model shows its runs."));
  connect(model_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] {
    modelKey_ = model_->currentData().toString();
    modelChosen_ = true;
    rebuild();
  });
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
  for (const char* key : {kDecodeTokensPerSecond, metric::kPredictedTokensPerSecond, metric::kLinearBitsPerWeight}) {
    const MetricInfo* info = findMetric(key);
    cost_->addItem(info->caption, QString(key));
    cost_->setItemData(cost_->count() - 1, info->meaning, Qt::ToolTipRole);
  }
  cost_->setToolTip(tr("The cost axis: batch-1 decode tokens/s, measured where a run's folder was benchmarked "
                       "(filled points) else predicted (hollow points); predicted tokens/s alone; or bits per "
                       "weight of the block linears (lower is better)."));
  connect(quality_, qOverload<int>(&QComboBox::currentIndexChanged), this, &ParetoView::rebuild);
  connect(cost_, qOverload<int>(&QComboBox::currentIndexChanged), this, &ParetoView::rebuild);

  plot_ = new QCustomPlot;
  plot_->setObjectName("paretoPlot");
  plot_->setToolTip(tr("Every finished compress run of the chosen model as a point, its dense model as a star; "
                       "the dashed line joins the runs no other run beats "
                       "on both axes (the Pareto front). Click a point to open its run."));
  plot_->setInteractions(QCP::iSelectPlottables);
  addPlotTitle(plot_, tr("Quality against cost"));
  connect(plot_, &QCustomPlot::plottableClick, this,
          [this](QCPAbstractPlottable* p, int, QMouseEvent*) { pointClicked(p); });
  connect(plot_, &QCustomPlot::itemClick, this, [this](QCPAbstractItem* item, QMouseEvent*) { pointClicked(item); });

  auto* top = new QHBoxLayout;
  auto* modelCaption = new QLabel(tr("Model:"));
  modelCaption->setToolTip(model_->toolTip());
  top->addWidget(modelCaption);
  top->addWidget(model_);
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

  connect(history_, &RunHistory::runAdded, this, &ParetoView::rebuildModels);
  connect(history_, &RunHistory::runsRemoved, this, &ParetoView::rebuildModels);
  connect(history_, &RunHistory::runChanged, this, &ParetoView::rebuildModels);
  rebuildModels();
}

void ParetoView::setModel(const QString& modelKey, const QString& label) {
  modelKey_ = modelKey;
  modelLabel_ = label;
  modelChosen_ = true;
  rebuildModels();
}

void ParetoView::rebuildModels() {
  QStringList keys;
  for (const QString& key : history_->modelKeys()) {
    bool compressed = false;
    for (const RunRecord& run : history_->runs()) compressed = compressed || (run.modelKey() == key && run.isFinishedCompress());
    if (compressed) keys << key;
  }
  // Nothing chosen yet: the model of the newest compress run.
  if (!modelChosen_ && !keys.isEmpty()) {
    modelKey_ = keys.first();
    modelChosen_ = true;
  }
  if (modelChosen_ && !keys.contains(modelKey_)) keys.prepend(modelKey_);
  {
    const QSignalBlocker block(model_);
    model_->clear();
    for (const QString& key : keys) {
      const bool runless = key == modelKey_ && !modelLabel_.isEmpty() && history_->modelLabel(key) == key;
      model_->addItem(runless ? modelLabel_ : history_->modelLabel(key), key);
      model_->setItemData(model_->count() - 1, key, Qt::ToolTipRole);
    }
    model_->setCurrentIndex(std::max(0, model_->findData(modelKey_)));
  }
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
  const bool higherCostBetter = costKey == metric::kPredictedTokensPerSecond || costKey == kDecodeTokensPerSecond;
  plot_->xAxis->setLabel(findMetric(costKey)->caption + (higherCostBetter ? tr(" (higher is better)") : tr(" (lower is better)")));
  plot_->yAxis->setLabel(findMetric(qualityKey)->caption + tr(" (lower is better)"));

  // The finished compress runs of the chosen model, in history order.
  std::vector<const RunRecord*> runs;
  for (const RunRecord& run : history_->runs())
    if (run.isFinishedCompress() && modelChosen_ && run.modelKey() == modelKey_) runs.push_back(&run);
  std::vector<TradeoffPoint> points;
  const QColor pointColor(0x29, 0x80, 0xb9);
  for (const RunRecord* r : runs) {
    const RunRecord& run = *r;
    const TradeoffPoint p{run.metric(costKey), run.metric(qualityKey)};
    points.push_back(p);
    if (std::isnan(p.cost) || std::isnan(p.quality)) continue;
    // One graph per run, so that a click names its run directly (graphs sort their points by key).
    QCPGraph* g = plot_->addGraph();
    g->setProperty(kRunIdProperty, run.id);
    g->setName(run.name);
    g->setLineStyle(QCPGraph::lsNone);
    // A prediction is not a measurement: on a speed axis, predicted points are hollow.
    const bool predicted = (costKey == metric::kPredictedTokensPerSecond) ||
                           (costKey == kDecodeTokensPerSecond && std::isnan(run.metric(kMeasuredTokensPerSecond)));
    g->setProperty(kPredictedProperty, predicted);
    g->setScatterStyle(predicted ? QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(pointColor, 2), Qt::NoBrush, 9)
                                 : QCPScatterStyle(QCPScatterStyle::ssDisc, pointColor, 9));
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
  // This model's dense point, from its most recent run that measured it: where every curve starts.
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    const double x = (*it)->metric(denseKeyOf(costKey)), y = (*it)->metric(denseKeyOf(qualityKey));
    if (std::isnan(x) || std::isnan(y)) continue;
    QCPGraph* dense = plot_->addGraph();
    dense->setName(tr("dense"));
    dense->setObjectName("paretoDense");
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
  setExportStem(this, modelChosen_ ? model_->currentText() : QString());
  if (auto* title = plotTitle(plot_))
    title->setText(!modelChosen_             ? tr("Quality against cost: no runs with both values yet")
                   : plot_->graphCount() == 0 ? tr("%1: no runs with both values yet").arg(model_->currentText())
                                              : tr("%1: quality against cost").arg(model_->currentText()));
  const std::vector<size_t> front = paretoFront(points, higherCostBetter);
  QVector<double> fx, fy;
  for (size_t i : front) {
    frontIds_.push_back(runs[i]->id);
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

bool ParetoView::isPredicted(int runId) const {
  for (int i = 0; i < plot_->graphCount(); ++i)
    if (plot_->graph(i)->property(kRunIdProperty).toInt() == runId) return plot_->graph(i)->property(kPredictedProperty).toBool();
  return false;
}

QPointF ParetoView::denseValue() const {
  for (int i = 0; i < plot_->graphCount(); ++i) {
    QCPGraph* g = plot_->graph(i);
    if (g->objectName() != QLatin1String("paretoDense") || g->data()->isEmpty()) continue;
    return {g->data()->constBegin()->key, g->data()->constBegin()->value};
  }
  return {std::nan(""), std::nan("")};
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
    if (!run.isFinishedCompress() || run.modelKey() != modelKey_) continue;
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
