// Runs side by side: one column per run, one row per metric (captions and tooltips from runMetricInfo()), the
// best value of each row in bold, and the recipes at the bottom.
#pragma once

#include <QWidget>
#include <vector>

class QTableWidget;

namespace pareto {

struct RunRecord;

class RunCompareView : public QWidget {
  Q_OBJECT

 public:
  explicit RunCompareView(QWidget* parent = nullptr);

  void setRuns(const std::vector<const RunRecord*>& runs);
  QTableWidget* table() const { return table_; }
  bool writeCsv(const QString& path, QString* error) const;

 private:
  QTableWidget* table_ = nullptr;
};

}  // namespace pareto
