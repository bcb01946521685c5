#include "widgets/RunCompareView.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QHeaderView>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>
#include <cmath>

#include "widgets/PlotSupport.h"
#include "widgets/RunRecord.h"

#include <nlohmann/json.hpp>

namespace pareto {

RunCompareView::RunCompareView(QWidget* parent) : QWidget(parent) {
  table_ = new QTableWidget;
  table_->setObjectName("compareTable");
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setToolTip(tr("The selected runs side by side; the best value of each metric is in bold."));
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  hint_ = new QLabel(tr("Select two or more runs in the Runs dock (Ctrl- or Shift-click) and press Compare to see "
                        "them side by side here."));
  hint_->setObjectName("compareHint");
  hint_->setToolTip(tr("The Compare tab shows the runs chosen in the Runs dock."));
  hint_->setWordWrap(true);
  auto* top = new QHBoxLayout;
  top->addWidget(hint_, 1);
  top->addStretch(1);
  top->addWidget(makeExportButton(this, {}, [this](const QString& path, QString* error) { return writeCsv(path, error); }));
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(table_, 1);
  setRuns({});
}

QStringList RunCompareView::differingRows() const {
  QStringList rows;
  for (int r = 0; r < table_->rowCount(); ++r) {
    bool differs = false;
    for (int c = 1; c < table_->columnCount(); ++c)
      differs = differs || table_->item(r, c)->text() != table_->item(r, 0)->text();
    if (differs) rows << table_->verticalHeaderItem(r)->text();
  }
  return rows;
}

void RunCompareView::setRuns(const std::vector<const RunRecord*>& runs) {
  const auto& metrics = runMetricInfo();
  table_->clear();
  table_->setColumnCount(int(runs.size()));
  table_->setRowCount(int(metrics.size()) + 1);
  for (size_t c = 0; c < runs.size(); ++c) {
    auto* header = new QTableWidgetItem(runs[c]->name);
    header->setToolTip(tr("model: %1\noutput: %2").arg(runs[c]->modelDir, runs[c]->outDir));
    table_->setHorizontalHeaderItem(int(c), header);
  }
  for (size_t r = 0; r < metrics.size(); ++r) {
    const MetricInfo& m = metrics[r];
    auto* rowHeader = new QTableWidgetItem(m.caption);
    rowHeader->setToolTip(m.meaning);
    table_->setVerticalHeaderItem(int(r), rowHeader);
    double best = NAN;
    for (const RunRecord* run : runs) {
      const double v = run->metric(m.key);
      if (std::isnan(v)) continue;
      if (std::isnan(best) || (m.lowerIsBetter ? v < best : v > best)) best = v;
    }
    const std::string denseKey = denseMetricOf(m.key);
    for (size_t c = 0; c < runs.size(); ++c) {
      const double v = runs[c]->metric(m.key);
      QString text = formatMetric(m.key, v);
      const double dense = denseKey.empty() ? NAN : runs[c]->metric(denseKey);
      if (!std::isnan(v) && !std::isnan(dense)) {
        const double delta = v - dense;
        text += tr(" (%1%2 vs dense)").arg(delta >= 0 ? "+" : "−", formatMetric(m.key, std::abs(delta)));
      }
      auto* item = new QTableWidgetItem(text);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      item->setToolTip(denseKey.empty() ? m.meaning
                                        : m.meaning + tr("\nIn brackets: the difference to the dense model's value "
                                                         "in the same run."));
      if (!std::isnan(v) && v == best && runs.size() > 1) {
        QFont bold = item->font();
        bold.setBold(true);
        item->setFont(bold);
      }
      table_->setItem(int(r), int(c), item);
    }
  }
  const int recipeRow = int(metrics.size());
  auto* recipeHeader = new QTableWidgetItem(tr("Recipe"));
  recipeHeader->setToolTip(tr("The recipe each run compressed with, as JSON."));
  table_->setVerticalHeaderItem(recipeRow, recipeHeader);
  for (size_t c = 0; c < runs.size(); ++c) {
    const auto recipe = nlohmann::json::parse(runs[c]->recipeJson, nullptr, false);
    auto* item = new QTableWidgetItem(recipe.is_discarded() ? QString::fromStdString(runs[c]->recipeJson)
                                                            : QString::fromStdString(recipe.dump(2)));
    item->setToolTip(item->text());
    item->setTextAlignment(Qt::AlignLeft | Qt::AlignTop);
    table_->setItem(recipeRow, int(c), item);
  }
  // What differs is what a comparison is for: those rows are shaded, rows the same in every run are not.
  const QStringList differing = differingRows();
  const QColor shade = palette().color(QPalette::Highlight).lighter(170);
  for (int r = 0; r < table_->rowCount() && runs.size() > 1; ++r) {
    if (!differing.contains(table_->verticalHeaderItem(r)->text())) continue;
    for (int c = 0; c < table_->columnCount(); ++c) table_->item(r, c)->setBackground(shade);
  }
  table_->resizeRowsToContents();   // the recipes whole
  hint_->setVisible(runs.size() < 2);
  table_->setVisible(!runs.empty());
}

bool RunCompareView::writeCsv(const QString& path, QString* error) const {
  QStringList header{tr("metric")};
  for (int c = 0; c < table_->columnCount(); ++c) header << table_->horizontalHeaderItem(c)->text();
  QVector<QStringList> rows;
  for (int r = 0; r < table_->rowCount(); ++r) {
    QStringList row{table_->verticalHeaderItem(r)->text()};
    for (int c = 0; c < table_->columnCount(); ++c) row << table_->item(r, c)->text();
    rows << row;
  }
  return pareto::writeCsv(path, header, rows, error);
}

}  // namespace pareto
