// The Hessian-discrepancy tab (analysis/HessianStudy.h): per module, δ of the text-calibration and of the
// decode-calibration Hessian against the decode-time Hessian of held-out prompts, modules sorted by the ratio
// δ(text)/δ(decode); the title carries the fraction of modules where decode calibration is closer and the
// median ratio. A table below lists the same numbers (and exports them as CSV).
#pragma once

#include <QVector>
#include <QWidget>
#include <memory>

class QCustomPlot;
class QLabel;
class QTreeWidget;

namespace pareto {

struct HessianStudyResult;

class DiscrepancyView : public QWidget {
  Q_OBJECT

 public:
  explicit DiscrepancyView(QWidget* parent = nullptr);

  void setStudy(const QString& runName, std::shared_ptr<const HessianStudyResult> study);
  // Several runs' studies at once (Runs dock ▸ Compare): each run's modules as points of δ(text)/δ(decode) by
  // rank, in the run's colour (PlotSupport.h runColor, as in the Drift view); the table keeps the first run.
  // Fewer than two leave the single-run view.
  struct OverlayRun {
    QString name;
    std::shared_ptr<const HessianStudyResult> study;
  };
  void setOverlay(const QVector<OverlayRun>& runs);
  bool overlaid() const { return overlay_.size() >= 2; }

  QCustomPlot* plot() const { return plot_; }
  QString title() const;
  QTreeWidget* table() const { return table_; }
  bool hasData() const { return study_ != nullptr; }
  bool writeCsv(const QString& path, QString* error) const;

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void rebuild();
  void plotOverlay();
  QVector<OverlayRun> overlay_;

  QString runName_;
  std::shared_ptr<const HessianStudyResult> study_;
  QCustomPlot* plot_ = nullptr;
  QTreeWidget* table_ = nullptr;
  QLabel* runLabel_ = nullptr;
};

}  // namespace pareto
