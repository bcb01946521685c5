// The Runs dock: the run history as a sortable table, every run under its store id, filtered by model, kind and
// status (by default: every run, as `pareto-cli runs` lists them). Double-click (or Open) makes a run the current one (its
// views and its compressed model for the Generation dock); Compare shows the selected runs side by side; Use
// Recipe puts a run's recipe back into the Recipe dock; Delete (or the Delete key) asks for confirmation and
// then asks the window to delete the selected runs from the history and the run store; Export writes the table
// as CSV; Open Folder shows a run's compressed folder in the file manager; Save Recipe writes a run's recipe.
#pragma once

#include <QList>
#include <QWidget>
#include <functional>

class QComboBox;
class QHBoxLayout;
class QMenu;
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
  // The filters: "" lets everything through; else a model key (RunRecord::modelKey(), or kNoModelKey for the runs
  // of no model, such as a synthetic model's benchmark), a kind, a status.
  void setFilters(const QString& modelKey, const QString& kind, const QString& status);
  static inline const QString kNoModelKey = QStringLiteral("(no model)");
  QComboBox* modelFilter() const { return modelFilter_; }
  QComboBox* kindFilter() const { return kindFilter_; }
  QComboBox* statusFilter() const { return statusFilter_; }
  // Ids of the selected runs in the order shown.
  QList<int> selectedRunIds() const;
  void selectRun(int runId);
  bool writeCsv(const QString& path, QString* error) const;

  // Asks the user a yes/no question (a message box unless replaced: tests answer without blocking).
  using Confirmer = std::function<bool(const QString& title, const QString& question)>;
  void setConfirmer(Confirmer confirmer);
  // Adds an Export button whose menu is `menu` (the window's Export menu: GGUF, compressed-tensors, dense Hugging
  // Face, Open Output Folder), acting on the selected run, beside Save Recipe….
  void addExportMenu(QMenu* menu);
  // Confirms, then emits deleteRequested for the selected runs; false when nothing was selected or the user said no.
  bool deleteSelected();
  // Writes a run's recipe (or a benchmark's settings) as the JSON it ran with; false (error set) when it cannot.
  bool saveRecipe(int runId, const QString& path, QString* error) const;
  // Opens a folder in the desktop's file manager (replaced by tests; returns whether it could).
  using FolderOpener = std::function<bool(const QString& folder)>;
  void setFolderOpener(FolderOpener opener);

 signals:
  void runActivated(int runId);
  void compareRequested(const QList<int>& runIds);
  void recipeRequested(int runId);
  void deleteRequested(const QList<int>& runIds);
  // Measure the decode speed of the run's compressed folder (its measured tok/s then replaces the prediction).
  void benchmarkRequested(int runId);

 private:
  void updateButtons();
  void rebuildFilters();
  void applyFilters();

  RunHistory* history_;
  class RunFilterModel;
  RunFilterModel* sorted_ = nullptr;
  QComboBox* modelFilter_ = nullptr;
  QComboBox* kindFilter_ = nullptr;
  QComboBox* statusFilter_ = nullptr;
  QTableView* table_ = nullptr;
  QPushButton* open_ = nullptr;
  QPushButton* compare_ = nullptr;
  QPushButton* recipe_ = nullptr;
  QPushButton* delete_ = nullptr;
  QPushButton* benchmark_ = nullptr;
  QPushButton* folder_ = nullptr;
  QPushButton* saveRecipe_ = nullptr;
  FolderOpener openFolder_;
  QPushButton* export_ = nullptr;
  QHBoxLayout* buttons_ = nullptr;
  Confirmer confirm_;
};

}  // namespace pareto
