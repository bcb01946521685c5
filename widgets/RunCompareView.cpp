#include "widgets/RunCompareView.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>
#include <cmath>

#include "widgets/PlotSupport.h"
#include "widgets/RunRecord.h"

namespace pareto {

RunCompareView::RunCompareView(QWidget* parent) : QWidget(parent) {
  table_ = new QTableWidget;
  table_->setObjectName("compareTable");
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setToolTip(tr("The selected runs side by side; the best value of each metric is in bold."));
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  auto* top = new QHBoxLayout;
  top->addStretch(1);
  top->addWidget(makeExportButton(this, {}, [this](const QString& path, QString* error) { return writeCsv(path, error); }));
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(table_, 1);
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
    for (size_t c = 0; c < runs.size(); ++c) {
      const double v = runs[c]->metric(m.key);
      auto* item = new QTableWidgetItem(formatMetric(m.key, v));
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      item->setToolTip(m.meaning);
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
    auto* item = new QTableWidgetItem(QString::fromStdString(runs[c]->recipeJson));
    item->setToolTip(item->text());
    table_->setItem(recipeRow, int(c), item);
  }
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
