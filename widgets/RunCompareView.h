// Runs side by side: one column per run, one row per metric (captions and tooltips from runMetricInfo()), each
// value with its difference to that run's dense model where there is one, the best value of each row in bold,
// the rows whose values differ between the runs shaded, and each recipe whole at the bottom. Empty, it says how
// to fill it.
#pragma once

#include <QWidget>
#include <vector>

class QLabel;
class QTableWidget;

namespace pareto {

struct RunRecord;

class RunCompareView : public QWidget {
  Q_OBJECT

 public:
  explicit RunCompareView(QWidget* parent = nullptr);

  void setRuns(const std::vector<const RunRecord*>& runs);
  QTableWidget* table() const { return table_; }
  // Rows whose values are not the same in every run (by metric caption, and "Recipe").
  QStringList differingRows() const;
  bool writeCsv(const QString& path, QString* error) const;

 private:
  QTableWidget* table_ = nullptr;
  QLabel* hint_ = nullptr;
};

}  // namespace pareto
