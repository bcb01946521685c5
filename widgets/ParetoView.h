// The Pareto tab: every run of the history as a point, quality (perplexity or decode NLL, lower is better)
// against cost (predicted tokens/s, higher is better, or bits per weight, lower is better), the dense model as a
// reference point, and the non-dominated front drawn through the runs on it. Clicking a run's point opens it.
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
  // Axis choices, also the combo boxes' data: "ppl" | "decode_nll", "predicted_tok_s" | "linear_bits_per_weight"
  // (metric names, store/MetricNames.h; a name from before they were one set means today's).
  void setAxes(const QString& quality, const QString& cost);
  bool writeCsv(const QString& path, QString* error) const;

 signals:
  void runActivated(int runId);

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void rebuild();
  void pointClicked(QObject* pointOrLabel);   // a run's point or its label

  RunHistory* history_;
  QComboBox* quality_ = nullptr;
  QComboBox* cost_ = nullptr;
  QCustomPlot* plot_ = nullptr;
  std::vector<int> frontIds_;
};

}  // namespace pareto
