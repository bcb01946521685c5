// The Runs dock: the run history as a sortable table. Double-click (or Open) makes a run the current one (its
// views and its compressed model for the Generation dock); Compare shows the selected runs side by side; Use
// Recipe puts a run's recipe back into the Recipe dock; Delete (or the Delete key) asks for confirmation and
// then asks the window to delete the selected runs from the history and the run store; Export writes the table
// as CSV.
#pragma once

#include <QList>
#include <QWidget>
#include <functional>

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

  // Asks the user a yes/no question (a message box unless replaced: tests answer without blocking).
  using Confirmer = std::function<bool(const QString& title, const QString& question)>;
  void setConfirmer(Confirmer confirmer);
  // Confirms, then emits deleteRequested for the selected runs; false when nothing was selected or the user said no.
  bool deleteSelected();

 signals:
  void runActivated(int runId);
  void compareRequested(const QList<int>& runIds);
  void recipeRequested(int runId);
  void deleteRequested(const QList<int>& runIds);

 private:
  void updateButtons();

  RunHistory* history_;
  QSortFilterProxyModel* sorted_ = nullptr;
  QTableView* table_ = nullptr;
  QPushButton* open_ = nullptr;
  QPushButton* compare_ = nullptr;
  QPushButton* recipe_ = nullptr;
  QPushButton* delete_ = nullptr;
  QPushButton* export_ = nullptr;
  Confirmer confirm_;
};

}  // namespace pareto
