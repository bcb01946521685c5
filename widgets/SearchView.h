// The Search tab (issue 24, point 4): a base recipe and a budget in, core's search (jobs/SearchJob.h, run by the
// window's worker with progress and cancel) out, shown as
//   - the predicted front: Σ estimated loss (log scale) against bits per weight over the block linears or
//     predicted tokens/s, the point chosen for the budget marked, and the measured runs of the same model drawn
//     on it (their KL to dense on the right axis, at their bits or predicted tokens/s);
//   - a module × candidate heatmap of each candidate's estimated loss (log10; blank: the candidate cannot apply to
//     the module), the chosen allocation marked in it.
// The estimate is the KL-refined one (predicted KL, search/SensitivityRefinement.h) when the "refine by KL" box is
// checked, else each module's output error tr(ΔW H̄ ΔWᵀ); the axis and the heatmap's title say which.
// Clicking a point of the front asks for its recipe (core's searchRecipe) to be loaded into the Recipe dock.
// The view only collects the request and shows the report; the window runs the job.
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>
#include <memory>
#include <nlohmann/json.hpp>

class QCheckBox;
class QComboBox;
class QCustomPlot;
class QCPColorMap;
class QCPGraph;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;

namespace pareto {

class RunHistory;
struct SearchReport;

class SearchView : public QWidget {
  Q_OBJECT

 public:
  // `history`: the runs drawn on the front (those of the model set with setModelDir).
  explicit SearchView(RunHistory* history, QWidget* parent = nullptr);

  void setModelDir(const QString& dir);
  void setSearch(std::shared_ptr<const SearchReport> report);
  void setRunning(bool running);
  void setProgress(double fraction, const QString& message);
  void setMessage(const QString& text);

  // The recipe of front point `index` (the front's order, cheapest first), as `pareto-cli search` writes it.
  nlohmann::json pointRecipe(size_t index) const;
  // What a click on the front does: recipeChosen with the point's recipe.
  void choosePoint(size_t index);

  bool hasData() const { return report_ != nullptr; }
  QString title() const;
  QCustomPlot* frontPlot() const { return front_; }
  QCustomPlot* heatmap() const { return heatmap_; }
  QLineEdit* baseRecipeEdit() const { return base_; }
  QComboBox* budgetKind() const { return kind_; }
  QDoubleSpinBox* budgetValue() const { return value_; }
  QPushButton* searchButton() const { return search_; }
  QCheckBox* refineBox() const { return refine_; }
  // Whether the next search refines the estimate by measured KL (the request's SearchOptions::refine).
  bool refineRequested() const;
  bool writeCsv(const QString& path, QString* error) const;

 signals:
  // kind: 0 bits per weight, 1 bytes, 2 tokens/s (BudgetKind's order).
  void searchRequested(const QString& baseRecipe, int kind, double value);
  void cancelRequested();
  void recipeChosen(const nlohmann::json& recipe, const QString& source);

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void rebuild();

  RunHistory* history_;
  QString modelDir_;
  std::shared_ptr<const SearchReport> report_;
  QVector<size_t> plotted_;   // front point index of each data point of the front graph
  QLineEdit* base_ = nullptr;
  QComboBox* kind_ = nullptr;
  QDoubleSpinBox* value_ = nullptr;
  QComboBox* axis_ = nullptr;
  QCheckBox* refine_ = nullptr;
  QPushButton* search_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QCustomPlot* front_ = nullptr;
  QCPGraph* frontGraph_ = nullptr;
  QCPGraph* chosenGraph_ = nullptr;
  QCPGraph* runsGraph_ = nullptr;
  QCustomPlot* heatmap_ = nullptr;
  QCPColorMap* colorMap_ = nullptr;
  QCPGraph* allocationGraph_ = nullptr;
};

}  // namespace pareto
