// The Pareto tab: the finished compress runs of one source model (its content hash; a model combo picks which,
// the window sets it to the model it opens) as points, quality (perplexity or decode NLL, lower is better)
// against cost (predicted tokens/s, higher is better, or bits per weight, lower is better), that model's dense
// point as the reference, and the non-dominated front drawn through the runs on it. Runs of other models are
// never on the plot: their points and baselines do not compare. Clicking a run's point opens it.
#pragma once

#include <QWidget>
#include <vector>

class QComboBox;
class QCustomPlot;
class QCPAbstractPlottable;
class QMouseEvent;

namespace pareto {

class RunHistory;

class ParetoView : public QWidget {
  Q_OBJECT

 public:
  explicit ParetoView(RunHistory* history, QWidget* parent = nullptr);

  QCustomPlot* plot() const { return plot_; }
  // The ids of the runs on the front, by ascending cost, as last drawn.
  const std::vector<int>& frontRunIds() const { return frontIds_; }
  // The pixel position of a run's point in the plot widget (for tests; (-1, -1) when it is not drawn).
  QPointF pointOf(int runId) const;
  // Whether a run's point is drawn as a prediction (hollow) rather than a measurement.
  bool isPredicted(int runId) const;
  // The dense point's (cost, quality) as drawn; NaN when none is.
  QPointF denseValue() const;
  // Axis choices, also the combo boxes' data: "ppl" | "decode_nll", "decode_tok_s" (measured, else predicted) |
  // "predicted_tok_s" | "linear_bits_per_weight"
  // (metric names, store/MetricNames.h; a name from before they were one set means today's).
  void setAxes(const QString& quality, const QString& cost);
  // Shows the runs of the model with this key (RunRecord::modelKey()); kept while it has no runs yet, listed
  // under `label` until a run names it.
  void setModel(const QString& modelKey, const QString& label = QString());
  QString model() const { return modelKey_; }
  QComboBox* modelCombo() const { return model_; }
  bool writeCsv(const QString& path, QString* error) const;

 signals:
  void runActivated(int runId);

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void rebuild();
  void rebuildModels();
  void pointClicked(QObject* pointOrLabel);   // a run's point or its label

  RunHistory* history_;
  QComboBox* model_ = nullptr;
  QString modelKey_;
  QString modelLabel_;
  bool modelChosen_ = false;   // by setModel, the combo, or the first run's model
  QComboBox* quality_ = nullptr;
  QComboBox* cost_ = nullptr;
  QCustomPlot* plot_ = nullptr;
  std::vector<int> frontIds_;
};

}  // namespace pareto
