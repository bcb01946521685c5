#include "widgets/DiscrepancyView.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QSplitter>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <qcustomplot.h>

#include "analysis/HessianStudy.h"
#include "widgets/DisplayFormat.h"
#include "widgets/PlotSupport.h"

namespace pareto {

namespace {

enum Column { RankColumn, ModuleColumn, TextColumn, DecodeColumn, RatioColumn, ColumnCount };

// Sorts numeric columns by value (stored in UserRole) and names naturally.
class NumericItem : public QTreeWidgetItem {
 public:
  using QTreeWidgetItem::QTreeWidgetItem;
  bool operator<(const QTreeWidgetItem& other) const override {
    const int c = treeWidget() ? treeWidget()->sortColumn() : 0;
    return data(c, Qt::UserRole).toDouble() < other.data(c, Qt::UserRole).toDouble() ||
           (c == ModuleColumn && data(c, Qt::UserRole + 1).toString() < other.data(c, Qt::UserRole + 1).toString());
  }
};

}  // namespace

DiscrepancyView::DiscrepancyView(QWidget* parent) : QWidget(parent) {
  plot_ = new QCustomPlot;
  plot_->setObjectName("discrepancyPlot");
  plot_->setToolTip(tr("δ = ‖H_t^{-1/2}(H_c − H_t)H_t^{-1/2}‖₂ per module: how far each calibration Hessian H_c is "
                       "from the decode-time Hessian H_t of held-out prompts, i.e. the worst-case relative error of "
                       "the calibration objective. Lower is closer. Modules sorted by δ(text)/δ(decode)."));
  plot_->xAxis->setLabel(tr("module (sorted by δ text / δ decode, largest first)"));
  plot_->yAxis->setLabel(tr("discrepancy δ"));
  plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  addPlotTitle(plot_, QString(), "discrepancyTitle");
  plot_->legend->setVisible(true);

  table_ = new QTreeWidget;
  table_->setObjectName("discrepancyTable");
  table_->setRootIsDecorated(false);
  table_->setUniformRowHeights(true);
  table_->setAlternatingRowColors(true);
  table_->setColumnCount(ColumnCount);
  table_->setHeaderLabels({tr("Rank"), tr("Module"), tr("δ text"), tr("δ decode"), tr("Ratio")});
  const QString tips[ColumnCount] = {
      tr("Position in the plot: modules sorted by the ratio, largest first."),
      tr("The linear whose input Hessian is compared."),
      tr("δ of the text-calibration Hessian (teacher-forced windows of the text file) against the held-out "
         "decode-time Hessian."),
      tr("δ of the decode-calibration Hessian (the dense model's own continuations of calibration prompts) "
         "against the held-out decode-time Hessian."),
      tr("δ(text) / δ(decode): above 1, decode calibration is closer.")};
  for (int c = 0; c < ColumnCount; ++c) table_->headerItem()->setToolTip(c, tips[c]);
  table_->header()->setSectionResizeMode(ModuleColumn, QHeaderView::Stretch);
  table_->setSortingEnabled(true);

  runLabel_ = new QLabel;
  runLabel_->setObjectName("discrepancyRun");
  runLabel_->setToolTip(tr("The run whose model the study was made on (the study depends on the model and the data, "
                           "not on the recipe)."));
  auto* top = new QHBoxLayout;
  top->addWidget(runLabel_, 1);
  top->addWidget(makeExportButton(this, {{tr("Discrepancy"), plot_}},
                                  [this](const QString& path, QString* error) { return writeCsv(path, error); }));
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(plot_);
  split->addWidget(table_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(split, 1);
  rebuild();
}

void DiscrepancyView::setOverlay(const QVector<OverlayRun>& runs) {
  overlay_.clear();
  for (const OverlayRun& r : runs)
    if (r.study && !r.study->modules.empty()) overlay_ << r;
  if (overlay_.size() < 2) {
    overlay_.clear();
  } else {
    runName_ = overlay_.front().name;
    study_ = overlay_.front().study;
  }
  rebuild();
}

void DiscrepancyView::plotOverlay() {
  plot_->clearGraphs();
  QStringList parts;
  const QLocale locale;
  for (int i = 0; i < overlay_.size(); ++i) {
    const HessianStudyResult& s = *overlay_[i].study;
    std::vector<double> ratios;
    for (const ModuleDiscrepancy& m : s.modules) ratios.push_back(m.ratio());
    std::sort(ratios.begin(), ratios.end(), std::greater<double>());
    QVector<double> rank, ratio;
    for (size_t k = 0; k < ratios.size(); ++k) {
      rank << double(k);
      ratio << ratios[k];
    }
    QCPGraph* g = plot_->addGraph();
    g->setName(overlay_[i].name);
    g->setPen(QPen(runColor(i), 1));
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, runColor(i), 6));
    g->setData(rank, ratio, true);
    parts << tr("%1: %2%").arg(overlay_[i].name, locale.toString(100.0 * s.summary.fractionDecodeSmaller, 'f', 1));
  }
  plot_->yAxis->setLabel(tr("δ(text) / δ(decode)"));
  plot_->rescaleAxes();
  plot_->legend->setVisible(true);
  plotTitle(plot_)->setText(tr("δ(text)/δ(decode) by rank, %1 runs (above 1: decode calibration closer)\ndecode "
                               "closer in %2")
                                .arg(overlay_.size())
                                .arg(parts.join(", ")));
  runLabel_->setText(tr("overlay of %1 runs; the table lists %2").arg(overlay_.size()).arg(runName_));
}

void DiscrepancyView::setStudy(const QString& runName, std::shared_ptr<const HessianStudyResult> study) {
  overlay_.clear();
  runName_ = runName;
  study_ = std::move(study);
  setExportStem(this, runName);
  rebuild();
}

QString DiscrepancyView::title() const { return plotTitle(plot_)->text(); }

void DiscrepancyView::rebuild() {
  plot_->clearGraphs();
  plot_->yAxis->setLabel(tr("discrepancy δ"));
  runLabel_->setText(study_ ? runName_ : QString());
  table_->setSortingEnabled(false);
  table_->clear();
  if (!study_ || study_->modules.empty()) {
    plotTitle(plot_)->setText(tr("Hessian discrepancy: run an evaluation with the Hessian study to see it"));
  } else {
    const auto& modules = study_->modules;
    std::vector<size_t> order(modules.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return modules[a].ratio() > modules[b].ratio(); });
    QVector<double> rank, text, decode;
    const QLocale locale;
    for (size_t i = 0; i < order.size(); ++i) {
      const ModuleDiscrepancy& m = modules[order[i]];
      rank << double(i);
      text << m.text.delta;
      decode << m.decode.delta;
      auto* item = new NumericItem;
      const QString name = QString::fromStdString(m.name);
      item->setText(RankColumn, QString::number(i + 1));
      item->setData(RankColumn, Qt::UserRole, double(i));
      item->setText(ModuleColumn, name);
      item->setData(ModuleColumn, Qt::UserRole + 1, display::naturalSortKey(name));
      item->setText(TextColumn, locale.toString(m.text.delta, 'g', 4));
      item->setData(TextColumn, Qt::UserRole, m.text.delta);
      item->setText(DecodeColumn, locale.toString(m.decode.delta, 'g', 4));
      item->setData(DecodeColumn, Qt::UserRole, m.decode.delta);
      item->setText(RatioColumn, locale.toString(m.ratio(), 'f', 2));
      item->setData(RatioColumn, Qt::UserRole, m.ratio());
      for (int c : {RankColumn, TextColumn, DecodeColumn, RatioColumn}) item->setTextAlignment(c, Qt::AlignRight);
      table_->addTopLevelItem(item);
    }
    QCPGraph* t = plot_->addGraph();
    t->setName(tr("text calibration"));
    t->setPen(QPen(QColor(0xd3, 0x54, 0x00), 1.5));
    t->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
    t->setData(rank, text, true);
    QCPGraph* d = plot_->addGraph();
    d->setName(tr("decode calibration"));
    d->setPen(QPen(QColor(0x29, 0x80, 0xb9), 1.5));
    d->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
    d->setData(rank, decode, true);
    plot_->rescaleAxes();
    plot_->xAxis->setRange(-0.5, double(order.size()) - 0.5);
    const DiscrepancySummary& s = study_->summary;
    plotTitle(plot_)->setText(tr("Decode calibration closer in %1% of %2 modules\nmedian δ(text)/δ(decode) = %3")
                                .arg(locale.toString(100.0 * s.fractionDecodeSmaller, 'f', 1))
                                .arg(s.modules)
                                .arg(locale.toString(s.medianRatio, 'f', 2)));
  }
  table_->setSortingEnabled(true);
  table_->sortByColumn(RankColumn, Qt::AscendingOrder);
  if (overlaid()) plotOverlay();
  applyPalette(plot_);
  plot_->replot();
}

bool DiscrepancyView::writeCsv(const QString& path, QString* error) const {
  if (!study_) {
    if (error) *error = tr("%1: there is no Hessian study to export yet").arg(path);
    return false;
  }
  QVector<QStringList> rows;
  for (const ModuleDiscrepancy& m : study_->modules)
    rows << QStringList{QString::fromStdString(m.name), QString::number(m.columns), QString::number(m.text.delta, 'g', 9),
                        QString::number(m.decode.delta, 'g', 9), QString::number(m.ratio(), 'g', 9)};
  return pareto::writeCsv(path, {"module", "columns", "delta_text", "delta_decode", "ratio"}, rows, error);
}

void DiscrepancyView::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange) applyPalette(plot_);
  QWidget::changeEvent(event);
}

}  // namespace pareto
