// The Hessian-discrepancy tab (analysis/HessianStudy.h): per module, δ of the text-calibration and of the
// decode-calibration Hessian against the decode-time Hessian of held-out prompts, modules sorted by the ratio
// δ(text)/δ(decode); the title carries the fraction of modules where decode calibration is closer and the
// median ratio. A table below lists the same numbers (and exports them as CSV).
#pragma once

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

  QCustomPlot* plot() const { return plot_; }
  QString title() const;
  QTreeWidget* table() const { return table_; }
  bool hasData() const { return study_ != nullptr; }
  bool writeCsv(const QString& path, QString* error) const;

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void rebuild();

  QString runName_;
  std::shared_ptr<const HessianStudyResult> study_;
  QCustomPlot* plot_ = nullptr;
  QTreeWidget* table_ = nullptr;
  QLabel* runLabel_ = nullptr;
};

}  // namespace pareto
