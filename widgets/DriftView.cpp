#include "widgets/DriftView.h"

#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "analysis/ActivationDrift.h"
#include "widgets/PlotSupport.h"

namespace pareto {

namespace {

// Distinct, evenly spaced hues; lightness kept mid so that lines read on light and dark backgrounds.
QColor layerColor(int layer, int layers) {
  return QColor::fromHsl(int(300.0 * layer / std::max(1, layers - 1)), 180, 120);
}

}  // namespace

DriftView::DriftView(QWidget* parent) : QWidget(parent) {
  variant_ = new QComboBox;
  variant_->setObjectName("driftVariant");
  variant_->addItem(tr("Free decoding (each model on its own tokens)"), "free");
  variant_->addItem(tr("Teacher-forced (both on the dense tokens)"), "forced");
  variant_->setToolTip(tr("Free: each model consumes its own greedy tokens, so errors compound through the "
                          "context. Teacher-forced: both consume the dense model's tokens, isolating the "
                          "per-step error."));
  connect(variant_, qOverload<int>(&QComboBox::currentIndexChanged), this, &DriftView::rebuild);
  variant_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  variant_->setMinimumContentsLength(16);
  summary_ = new QLabel;
  summary_->setObjectName("driftSummary");
  summary_->setWordWrap(true);   // the tab's minimum width stays that of the plots, whatever the run's name
  summary_->setToolTip(tr("Per layer: the plateau is the mean drift over the last quarter of the decode steps; "
                          "the settling step is the first step whose drift reaches 90% of that plateau."));

  heatmap_ = new QCustomPlot;
  heatmap_->setObjectName("driftHeatmap");
  heatmap_->setToolTip(tr("D(l, t) = ‖h_c − h_d‖ / ‖h_d‖ of the input hidden state of layer l at decode step t, "
                          "averaged over the prompts that reach step t. The top row is the final norm's input."));
  heatmap_->xAxis->setLabel(tr("decode step t"));
  heatmap_->yAxis->setLabel(tr("layer input l"));
  colorMap_ = new QCPColorMap(heatmap_->xAxis, heatmap_->yAxis);
  colorScale_ = new QCPColorScale(heatmap_);
  colorScale_->setType(QCPAxis::atRight);
  colorScale_->axis()->setLabel(tr("drift D"));
  heatmap_->plotLayout()->addElement(0, 1, colorScale_);
  colorMap_->setColorScale(colorScale_);
  QCPColorGradient gradient(QCPColorGradient::gpThermal);
  gradient.setNanHandling(QCPColorGradient::nhTransparent);   // steps no prompt reached
  colorMap_->setGradient(gradient);
  colorMap_->setInterpolate(false);
  auto* margins = new QCPMarginGroup(heatmap_);
  heatmap_->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  colorScale_->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  addPlotTitle(heatmap_, QString(), "driftHeatmapTitle");

  curves_ = new QCustomPlot;
  curves_->setObjectName("driftCurves");
  curves_->setToolTip(tr("One curve per layer: D(l, t) over the decode steps; the dots mark the first step at "
                         "which each layer reaches 90% of its plateau. Colours run from red (layer 0) through the "
                         "spectrum to magenta (the final norm's input)."));
  curves_->xAxis->setLabel(tr("decode step t"));
  curves_->yAxis->setLabel(tr("drift D"));
  addPlotTitle(curves_, QString(), "driftCurvesTitle");

  auto* top = new QHBoxLayout;
  top->addWidget(variant_);
  top->addWidget(summary_, 1);
  top->addWidget(makeExportButton(this, {{tr("Heatmap"), heatmap_}, {tr("Curves"), curves_}},
                                  [this](const QString& path, QString* error) { return writeCsv(path, error); }));
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(heatmap_);
  split->addWidget(curves_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(split, 1);
  rebuild();
}

void DriftView::setOverlay(const QVector<OverlayRun>& runs) {
  overlay_.clear();
  for (const OverlayRun& r : runs)
    if (r.drift && r.drift->steps > 0) overlay_ << r;
  if (overlay_.size() < 2) overlay_.clear();
  rebuild();
}

const DriftCurves& DriftView::variantOf(const ActivationDriftResult& drift) const {
  return variant_->currentData().toString() == "forced" ? drift.forced : drift.free;
}

void DriftView::rebuildOverlay() {
  // One colour scale over every run's cells, so that the first run's heatmap reads on the others' scale.
  double lowest = 0, highest = 0;
  QStringList names;
  for (int i = 0; i < overlay_.size(); ++i) {
    const OverlayRun& run = overlay_[i];
    const DriftCurves& c = variantOf(*run.drift);
    QVector<double> x, y;
    for (size_t t = 0; t < size_t(run.drift->steps); ++t) {
      double worst = std::nan("");
      for (const auto& layer : c.drift) {
        if (t >= layer.size() || std::isnan(layer[t])) continue;
        worst = std::isnan(worst) ? layer[t] : std::max(worst, layer[t]);
        highest = std::max(highest, layer[t]);
      }
      if (std::isnan(worst)) continue;
      x << double(t);
      y << worst;
    }
    QCPGraph* g = curves_->addGraph();
    g->setName(run.name);
    g->setPen(QPen(runColor(i), 2));
    g->setData(x, y, true);
    names << run.name;
  }
  const ActivationDriftResult& first = *overlay_.front().drift;
  const DriftCurves& c = variantOf(first);
  const int layers = int(c.drift.size()), steps = int(first.steps);
  colorMap_->data()->setSize(steps, layers);
  colorMap_->data()->setRange(QCPRange(0, std::max(1, steps - 1)), QCPRange(0, std::max(1, layers - 1)));
  for (int l = 0; l < layers; ++l)
    for (int t = 0; t < steps && t < int(c.drift[size_t(l)].size()); ++t) colorMap_->data()->setCell(t, l, c.drift[size_t(l)][size_t(t)]);
  colorMap_->setDataRange(QCPRange(lowest, std::max(highest, 1e-12)));
  heatmap_->rescaleAxes();
  heatmap_->xAxis->setRange(-0.5, steps - 0.5);
  heatmap_->yAxis->setRange(-0.5, layers - 0.5);
  const QString variant = variant_->currentData().toString() == "forced" ? tr("teacher-forced") : tr("free decoding");
  plotTitle(heatmap_)->setText(tr("Activation drift, %1: %2, on the colour scale of all %3 runs")
                                   .arg(variant, overlay_.front().name)
                                   .arg(overlay_.size()));
  curves_->rescaleAxes();
  curves_->yAxis->setRangeLower(0);
  curves_->legend->setVisible(true);
  plotTitle(curves_)->setText(tr("Largest drift over layers at each step, %1 runs").arg(overlay_.size()));
  summary_->setText(tr("Overlay: %1").arg(names.join(" · ")));
}

void DriftView::setDrift(const QString& runName, std::shared_ptr<const ActivationDriftResult> drift,
                         const QString& absent) {
  overlay_.clear();
  runName_ = runName;
  drift_ = std::move(drift);
  absent_ = absent;
  setExportStem(this, runName);
  rebuild();
}

const DriftCurves* DriftView::shownCurves() const {
  if (!drift_) return nullptr;
  return variant_->currentData().toString() == "forced" ? &drift_->forced : &drift_->free;
}

void DriftView::rebuild() {
  curves_->clearGraphs();
  const DriftCurves* c = shownCurves();
  if (overlaid()) {
    rebuildOverlay();
  } else if (c == nullptr || c->drift.empty()) {
    colorMap_->data()->clear();
    plotTitle(heatmap_)->setText(
        !drift_ && !absent_.isEmpty() ? absent_
        : drift_                      ? tr("Activation drift: this run measured no decode steps")
                                      : tr("Activation drift: open a run that measured it (Runs dock) to see it here"));
    plotTitle(curves_)->setText(QString());
    summary_->clear();
  } else {
    const int layers = int(c->drift.size());
    const int steps = int(c->drift.front().size());
    colorMap_->data()->setSize(steps, layers);
    colorMap_->data()->setRange(QCPRange(0, std::max(1, steps - 1)), QCPRange(0, std::max(1, layers - 1)));
    for (int l = 0; l < layers; ++l)
      for (int t = 0; t < steps; ++t) colorMap_->data()->setCell(t, l, c->drift[size_t(l)][size_t(t)]);
    colorMap_->rescaleDataRange(true);
    heatmap_->rescaleAxes();
    heatmap_->xAxis->setRange(-0.5, steps - 0.5);
    heatmap_->yAxis->setRange(-0.5, layers - 0.5);
    const QString variant = variant_->currentData().toString() == "forced" ? tr("teacher-forced") : tr("free decoding");
    plotTitle(heatmap_)->setText(tr("Activation drift, %1 (%2 prompts × %3 steps)").arg(variant).arg(drift_->prompts).arg(steps));

    QVector<double> markerSteps, markerDrift;
    int worstLayer = -1;
    int64_t worstSteps = -1;
    // A layer whose input is the same in both models (layer 0 when both read the same tokens) has no drift and
    // so no step at which it settles: it is named as such, not counted as settling at step 0.
    QStringList undrifted;
    auto layerName = [layers](int l) { return l == layers - 1 ? tr("final norm input") : tr("layer %1").arg(l); };
    for (int l = 0; l < layers; ++l) {
      QVector<double> x, y;
      for (int t = 0; t < steps; ++t) {
        const double d = c->drift[size_t(l)][size_t(t)];
        if (std::isnan(d)) continue;
        x << t;
        y << d;
      }
      QCPGraph* g = curves_->addGraph();
      g->setName(layerName(l));
      g->setPen(QPen(layerColor(l, layers), 1.5));
      g->setData(x, y, true);
      const DriftCurveSummary& s = c->summary[size_t(l)];
      if (!(s.plateau > 0)) {
        undrifted << layerName(l);
        continue;
      }
      if (s.stepsTo90 >= 0 && s.stepsTo90 < steps) {
        markerSteps << double(s.stepsTo90);
        markerDrift << c->drift[size_t(l)][size_t(s.stepsTo90)];
        if (s.stepsTo90 > worstSteps) {
          worstSteps = s.stepsTo90;
          worstLayer = l;
        }
      }
    }
    // Added last so that the markers sit on top of the curves.
    QCPGraph* markers = curves_->addGraph();
    markers->setObjectName("plateauMarkers");
    markers->setName(tr("90% of plateau"));
    markers->setLineStyle(QCPGraph::lsNone);
    markers->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(Qt::black), QBrush(Qt::white), 7));
    markers->setData(markerSteps, markerDrift);
    curves_->rescaleAxes();
    curves_->yAxis->setRangeLower(0);
    curves_->legend->setVisible(layers <= 6);   // a longer legend hides the curves; the tooltip gives the colour order
    QString title;
    if (undrifted.size() == layers)
      title = tr("No drift: every layer's input is the same in both models");
    else if (worstLayer < 0)
      title = tr("No layer reached 90% of its plateau");
    else if (worstSteps == 0)
      title = tr("Every drifting layer is at 90% of its plateau from step 0");
    else
      title = tr("Steps to 90% of plateau: at most %1 (%2)").arg(worstSteps).arg(layerName(worstLayer));
    if (!undrifted.isEmpty() && undrifted.size() < layers)
      title += tr(" · no drift at %1 (same input in both models)").arg(undrifted.join(", "));
    plotTitle(curves_)->setText(title);
    double maxPlateau = 0;
    for (const auto& s : c->summary)
      if (!std::isnan(s.plateau)) maxPlateau = std::max(maxPlateau, s.plateau);
    summary_->setText(tr("%1 · largest plateau %2 · latest settling step %3")
                          .arg(runName_, QLocale().toString(maxPlateau, 'f', 4))
                          .arg(worstSteps >= 0 ? QString::number(worstSteps) : QStringLiteral("—")));
  }
  applyPalette(heatmap_);
  applyPalette(curves_);
  heatmap_->replot();
  curves_->replot();
}

QString DriftView::heatmapTitle() const { return plotTitle(heatmap_)->text(); }

QString DriftView::curvesTitle() const { return plotTitle(curves_)->text(); }

bool DriftView::writeCsv(const QString& path, QString* error) const {
  if (!drift_) {
    if (error) *error = tr("%1: there is no drift to export yet").arg(path);
    return false;
  }
  QVector<QStringList> rows;
  for (const auto& [name, curves] : {std::pair<QString, const DriftCurves*>{"free", &drift_->free},
                                     std::pair<QString, const DriftCurves*>{"forced", &drift_->forced}}) {
    for (size_t l = 0; l < curves->drift.size(); ++l) {
      const DriftCurveSummary& s = curves->summary[l];
      for (size_t t = 0; t < curves->drift[l].size(); ++t)
        rows << QStringList{name,
                            QString::number(l),
                            QString::number(t),
                            QString::number(curves->drift[l][t], 'g', 9),
                            QString::number(t < curves->counts.size() ? curves->counts[t] : 0),
                            QString::number(s.plateau, 'g', 9),
                            QString::number(s.stepsTo90)};
    }
  }
  return pareto::writeCsv(path, {"variant", "layer", "step", "drift", "prompts", "plateau", "steps_to_90"}, rows,
                          error);
}

void DriftView::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange) {
    applyPalette(heatmap_);
    applyPalette(curves_);
  }
  QWidget::changeEvent(event);
}

}  // namespace pareto
