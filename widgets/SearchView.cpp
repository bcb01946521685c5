#include "widgets/SearchView.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QVBoxLayout>
#include <cmath>
#include <limits>
#include <qcustomplot.h>

#include "search/Search.h"
#include "store/MetricNames.h"
#include "widgets/PlotSupport.h"
#include "widgets/RunHistory.h"

namespace pareto {
namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

SearchView::SearchView(RunHistory* history, QWidget* parent) : QWidget(parent), history_(history) {
  base_ = new QLineEdit;
  base_->setObjectName("searchBase");
  base_->setPlaceholderText(tr("base recipe: calibration block and optional \"candidates\""));
  base_->setToolTip(tr("A recipe whose \"calibration\" block gives the Hessians every estimated loss is measured "
                       "against, and under \"candidates\" the prune/quantize choices each module may take "
                       "(without it: dense, int8, int4 g64/g128, int3 g128, SpQR 3-bit, 2:4, 2:4 + int4 and the "
                       "GGUF grids). See docs/search.md."));
  auto* browse = new QPushButton(tr("Browse…"));
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Search base recipe"), base_->text(), tr("Recipes (*.json)"));
    if (!f.isEmpty()) base_->setText(f);
  });
  kind_ = new QComboBox;
  kind_->setObjectName("searchBudgetKind");
  kind_->addItem(tr("bits per weight"));
  kind_->addItem(tr("bytes"));
  kind_->addItem(tr("tokens/s (at least)"));
  kind_->setToolTip(tr("Bits per weight and bytes over the block linears, as compress stores them; tokens/s "
                       "predicted for batch-1 decode from this device's stored kernel benchmarks, else from its "
                       "copy bandwidth."));
  value_ = new QDoubleSpinBox;
  value_->setObjectName("searchBudgetValue");
  value_->setDecimals(3);
  value_->setRange(0.001, 1e15);
  value_->setValue(4.125);
  refine_ = new QCheckBox(tr("refine by KL"));
  refine_->setObjectName("searchRefine");
  refine_->setChecked(true);
  refine_->setToolTip(tr("Scale each module's output error tr(ΔW H̄ ΔWᵀ) by the KL to dense of replacing that module "
                         "alone by a reference candidate, so that modules compare in one unit (predicted KL, nats). "
                         "Unchecked: the output error alone, which overrates q/k/gate/up and underrates o/down. "
                         "Costs one partial forward per module and calibration window (docs/search.md)."));
  search_ = new QPushButton(tr("Search"));
  search_->setObjectName("searchRun");
  connect(search_, &QPushButton::clicked, this,
          [this] { emit searchRequested(base_->text(), kind_->currentIndex(), value_->value()); });
  cancel_ = new QPushButton(tr("Cancel"));
  cancel_->setEnabled(false);
  connect(cancel_, &QPushButton::clicked, this, &SearchView::cancelRequested);
  progress_ = new QProgressBar;
  progress_->setRange(0, 1000);
  progress_->setVisible(false);
  axis_ = new QComboBox;
  axis_->setObjectName("searchAxis");
  axis_->addItem(tr("x: bits per weight"));
  axis_->addItem(tr("x: predicted tokens/s"));
  connect(axis_, qOverload<int>(&QComboBox::currentIndexChanged), this, &SearchView::rebuild);
  status_ = new QLabel;
  status_->setObjectName("searchStatus");
  status_->setWordWrap(true);
  status_->setToolTip(tr("What the search is doing, or how the last one ended."));

  front_ = new QCustomPlot;
  front_->setObjectName("searchFront");
  front_->setToolTip(tr("Each point: one candidate per module, the least summed estimated loss for its cost "
                        "(an exact multiple-choice knapsack). Click a point to load its recipe into the Recipe "
                        "dock. Squares: measured runs of this model, their KL to dense on the right axis."));
  front_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  front_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  front_->yAxis2->setVisible(true);
  front_->yAxis2->setLabel(tr("measured KL to dense (nats)"));
  front_->yAxis2->setScaleType(QCPAxis::stLogarithmic);
  front_->yAxis2->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  frontGraph_ = front_->addGraph();
  frontGraph_->setName(tr("predicted front"));
  frontGraph_->setLineStyle(QCPGraph::lsStepRight);
  frontGraph_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 4));
  frontGraph_->setSelectable(QCP::stSingleData);
  chosenGraph_ = front_->addGraph();
  chosenGraph_->setName(tr("chosen for the budget"));
  chosenGraph_->setLineStyle(QCPGraph::lsNone);
  chosenGraph_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssStar, QPen(Qt::red, 2), Qt::NoBrush, 12));
  runsGraph_ = front_->addGraph(front_->xAxis, front_->yAxis2);
  runsGraph_->setName(tr("measured runs (KL)"));
  runsGraph_->setLineStyle(QCPGraph::lsNone);
  runsGraph_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssSquare, QPen(QColor(0, 130, 200), 1.5), Qt::NoBrush, 8));
  front_->legend->setVisible(true);
  front_->setInteractions(QCP::iSelectPlottables);
  connect(front_, &QCustomPlot::plottableClick, this, [this](QCPAbstractPlottable* p, int dataIndex, QMouseEvent*) {
    if (p == frontGraph_ && dataIndex >= 0 && dataIndex < plotted_.size()) choosePoint(plotted_[dataIndex]);
    if (p == chosenGraph_ && report_) choosePoint(report_->chosen);   // the star sits on top of its front point
  });
  addPlotTitle(front_, QString(), "searchFrontTitle");

  heatmap_ = new QCustomPlot;
  heatmap_->setObjectName("searchHeatmap");
  heatmap_->setToolTip(tr("log10 of each candidate's estimated loss on each module (the mean over calibration "
                          "tokens of ‖ΔW x‖², times the module's KL scale when refined); blank: the candidate cannot "
                          "apply there; circles: the allocation chosen for the budget."));
  colorMap_ = new QCPColorMap(heatmap_->xAxis, heatmap_->yAxis);
  auto* scale = new QCPColorScale(heatmap_);
  scale->setType(QCPAxis::atRight);
  scale->axis()->setLabel(tr("log10 estimated loss"));
  heatmap_->plotLayout()->addElement(0, 1, scale);
  colorMap_->setColorScale(scale);
  QCPColorGradient gradient(QCPColorGradient::gpThermal);
  gradient.setNanHandling(QCPColorGradient::nhTransparent);
  colorMap_->setGradient(gradient);
  colorMap_->setInterpolate(false);
  allocationGraph_ = heatmap_->addGraph();
  allocationGraph_->setLineStyle(QCPGraph::lsNone);
  allocationGraph_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(Qt::white, 2), Qt::NoBrush, 7));
  addPlotTitle(heatmap_, QString(), "searchHeatmapTitle");

  auto* controls = new QHBoxLayout;
  controls->addWidget(base_, 1);
  controls->addWidget(browse);
  auto* budgetCaption = new QLabel(tr("budget"));
  budgetCaption->setToolTip(kind_->toolTip());
  controls->addWidget(budgetCaption);
  controls->addWidget(value_);
  controls->addWidget(kind_);
  controls->addWidget(refine_);
  controls->addWidget(search_);
  controls->addWidget(cancel_);
  auto* second = new QHBoxLayout;
  second->addWidget(progress_, 1);
  second->addWidget(status_, 2);
  second->addWidget(axis_);
  second->addWidget(makeExportButton(this, {{tr("Front"), front_}, {tr("Heatmap"), heatmap_}},
                                     [this](const QString& path, QString* error) { return writeCsv(path, error); }));
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(front_);
  split->addWidget(heatmap_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(controls);
  layout->addLayout(second);
  layout->addWidget(split, 1);
  if (history_ != nullptr) {
    connect(history_, &RunHistory::runAdded, this, &SearchView::rebuild);
    connect(history_, &RunHistory::runsRemoved, this, &SearchView::rebuild);
    connect(history_, &RunHistory::runChanged, this, &SearchView::rebuild);
  }
  rebuild();
}

void SearchView::setModelDir(const QString& dir) {
  modelDir_ = dir.isEmpty() ? QString() : QFileInfo(dir).absoluteFilePath();
  rebuild();
}

void SearchView::setSearch(std::shared_ptr<const SearchReport> report) {
  report_ = std::move(report);
  rebuild();
}

void SearchView::setRunning(bool running) {
  search_->setEnabled(!running);
  cancel_->setEnabled(running);
  progress_->setVisible(running);
  if (running) progress_->setValue(0);
}

void SearchView::setProgress(double fraction, const QString& message) {
  progress_->setValue(int(std::lround(1000 * std::clamp(fraction, 0.0, 1.0))));
  status_->setText(message);
}

void SearchView::setMessage(const QString& text) { status_->setText(text); }

bool SearchView::refineRequested() const { return refine_->isChecked(); }

QString SearchView::title() const { return plotTitle(front_)->text(); }

nlohmann::json SearchView::pointRecipe(size_t index) const {
  if (!report_ || index >= report_->front.points.size()) return nlohmann::json();
  const SearchPoint& p = report_->front.points[index];
  char text[200];
  std::snprintf(text, sizeof text, "workbench search front point: estimated loss %.6g, %.4f bits per weight over "
                "the block linears, predicted %.1f tokens/s", p.loss, p.bitsPerWeight, p.tokensPerSecond);
  return searchRecipe(report_->base, report_->table, p, std::string(text) + " (" + report_->table.estimate() + ")");
}

void SearchView::choosePoint(size_t index) {
  const nlohmann::json recipe = pointRecipe(index);
  if (recipe.is_null()) return;
  const SearchPoint& p = report_->front.points[index];
  emit recipeChosen(recipe, tr("search front point at %1 bits per weight").arg(QLocale().toString(p.bitsPerWeight, 'f', 3)));
}

void SearchView::rebuild() {
  const bool bySpeed = axis_->currentIndex() == 1;
  front_->xAxis->setLabel(bySpeed ? tr("predicted tokens/s") : tr("bits per weight (block linears)"));
  const bool refined = report_ && report_->table.refinement.done;
  front_->yAxis->setLabel(refined ? tr("Σ estimated loss: predicted KL (nats)") : tr("Σ estimated loss tr(ΔW H̄ ΔWᵀ)"));
  frontGraph_->data()->clear();
  chosenGraph_->data()->clear();
  runsGraph_->data()->clear();
  colorMap_->data()->clear();
  allocationGraph_->data()->clear();
  plotted_.clear();
  if (!report_ || report_->front.points.empty()) {
    plotTitle(front_)->setText(tr("Search: choose a base recipe and a budget, then Search"));
    plotTitle(heatmap_)->setText(QString());
  } else {
    const SearchReport& r = *report_;
    auto xOf = [&](const SearchPoint& p) { return bySpeed ? p.tokensPerSecond : p.bitsPerWeight; };
    QVector<double> x, y;
    for (size_t i = 0; i < r.front.points.size(); ++i) {
      const SearchPoint& p = r.front.points[i];
      if (!(p.loss > 0)) continue;   // dense everywhere: no place on a log axis
      x << xOf(p);
      y << p.loss;
      plotted_ << i;
    }
    frontGraph_->setData(x, y, /*alreadySorted=*/!bySpeed);
    const SearchPoint& chosen = r.chosenPoint();
    if (chosen.loss > 0) chosenGraph_->addData(xOf(chosen), chosen.loss);
    if (history_ != nullptr)
      for (const RunRecord& run : history_->runs()) {
        if (!run.isFinishedCompress() || QFileInfo(run.modelDir).absoluteFilePath() != modelDir_) continue;
        const double rx = run.metric(bySpeed ? metric::kPredictedTokensPerSecond : metric::kLinearBitsPerWeight);
        const double kl = run.metric(metric::kKlMean);
        if (std::isfinite(rx) && std::isfinite(kl) && kl > 0) runsGraph_->addData(rx, kl);
      }
    front_->rescaleAxes();
    runsGraph_->rescaleValueAxis();
    // Room around the extreme points, so that they are not drawn (and clicked) on the frame.
    const QCPRange xr = front_->xAxis->range();
    const double pad = std::max(0.05 * xr.size(), 1e-3 * std::max(1.0, std::abs(xr.upper)));
    front_->xAxis->setRange(xr.lower - pad, xr.upper + pad);
    for (QCPAxis* axis : {front_->yAxis, front_->yAxis2})
      if (axis->range().lower > 0) axis->setRange(axis->range().lower / 2, axis->range().upper * 2);
    plotTitle(front_)->setText(tr("%1 front points · chosen: %2 bits/w, Σ loss %3, %4 tok/s (%5)")
                                 .arg(r.front.points.size())
                                 .arg(QLocale().toString(chosen.bitsPerWeight, 'f', 3))
                                 .arg(QLocale().toString(chosen.loss, 'g', 4))
                                 .arg(QLocale().toString(chosen.tokensPerSecond, 'f', 1))
                                 .arg(qs(r.front.speedSource)));

    const int candidates = int(r.table.candidates.size()), modules = int(r.table.modules.size());
    double smallest = std::numeric_limits<double>::infinity();
    for (const SensitivityModule& m : r.table.modules)
      for (const SensitivityCell& c : m.cells)
        if (c.applies && c.loss > 0) smallest = std::min(smallest, c.loss);
    const double floorLoss = std::isfinite(smallest) ? smallest / 10 : 1e-12;   // dense (0) below every other
    colorMap_->data()->setSize(candidates, modules);
    colorMap_->data()->setRange(QCPRange(0, std::max(1, candidates - 1)), QCPRange(0, std::max(1, modules - 1)));
    for (int m = 0; m < modules; ++m)
      for (int c = 0; c < candidates; ++c) {
        const SensitivityCell& cell = r.table.modules[size_t(m)].cells[size_t(c)];
        colorMap_->data()->setCell(c, m, cell.applies ? std::log10(std::max(cell.loss, floorLoss))
                                                      : std::numeric_limits<double>::quiet_NaN());
      }
    colorMap_->rescaleDataRange(true);
    for (int m = 0; m < modules; ++m) allocationGraph_->addData(chosen.choice[size_t(m)], m);
    QSharedPointer<QCPAxisTickerText> xt(new QCPAxisTickerText), yt(new QCPAxisTickerText);
    for (int c = 0; c < candidates; ++c) xt->addTick(c, qs(r.table.candidates[size_t(c)]));
    const int every = std::max(1, modules / 28);
    for (int m = 0; m < modules; m += every) yt->addTick(m, qs(r.table.modules[size_t(m)].name));
    heatmap_->xAxis->setTicker(xt);
    heatmap_->xAxis->setTickLabelRotation(60);
    heatmap_->yAxis->setTicker(yt);
    heatmap_->xAxis->setRange(-0.5, candidates - 0.5);
    heatmap_->yAxis->setRange(-0.5, modules - 0.5);
    plotTitle(heatmap_)->setText(tr("Estimated loss per module × candidate (%1 calibration tokens); %2")
                                   .arg(r.table.calibrationTokens)
                                   .arg(qs(r.table.estimate())));
  }
  applyPalette(front_);
  applyPalette(heatmap_);
  front_->replot();
  heatmap_->replot();
}

bool SearchView::writeCsv(const QString& path, QString* error) const {
  QStringList header{tr("module")};
  QVector<QStringList> rows;
  if (report_) {
    for (const std::string& c : report_->table.candidates) header << qs(c);
    header << tr("chosen");
    const SearchPoint& chosen = report_->chosenPoint();
    for (size_t m = 0; m < report_->table.modules.size(); ++m) {
      const SensitivityModule& mod = report_->table.modules[m];
      QStringList row{qs(mod.name)};
      for (const SensitivityCell& c : mod.cells) row << (c.applies ? QString::number(c.loss, 'g', 9) : QString());
      row << qs(report_->table.candidates[size_t(chosen.choice[m])]);
      rows << row;
    }
  }
  return pareto::writeCsv(path, header, rows, error);
}

void SearchView::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange) rebuild();
}

}  // namespace pareto
