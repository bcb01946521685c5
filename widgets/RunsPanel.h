// The Runs dock: the run history as a sortable table. Double-click (or Open) makes a run the current one (its
// views and its compressed model for the Generation dock); Compare shows the selected runs side by side; Use
// Recipe puts a run's recipe back into the Recipe dock; Export writes the table as CSV.
#pragma once

#include <QList>
#include <QWidget>

class QPushButton;
class QSortFilterProxyModel;
class QTableView;

namespace pareto {

class RunHistory;

class RunsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit RunsPanel(RunHistory* history, QWidget* parent = nullptr);

  QTableView* table() const { return table_; }
  // Ids of the selected runs in the order shown.
  QList<int> selectedRunIds() const;
  void selectRun(int runId);
  bool writeCsv(const QString& path, QString* error) const;

 signals:
  void runActivated(int runId);
  void compareRequested(const QList<int>& runIds);
  void recipeRequested(int runId);

 private:
  void updateButtons();

  RunHistory* history_;
  QSortFilterProxyModel* sorted_ = nullptr;
  QTableView* table_ = nullptr;
  QPushButton* open_ = nullptr;
  QPushButton* compare_ = nullptr;
  QPushButton* recipe_ = nullptr;
  QPushButton* export_ = nullptr;
};

}  // namespace pareto
