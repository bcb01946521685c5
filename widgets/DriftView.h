// The activation-drift tab: D(l, t) of a run (analysis/ActivationDrift.h) as a heatmap over layer × decode step
// with a colour scale, and as one curve per layer with a marker at the first step that reaches 90% of the
// layer's plateau. A selector switches between the free variant (each model on its own greedy tokens) and the
// teacher-forced one (both on the dense tokens).
#pragma once

#include <QVector>
#include <QWidget>
#include <memory>

class QComboBox;
class QCustomPlot;
class QCPColorMap;
class QCPColorScale;
class QLabel;

namespace pareto {

struct ActivationDriftResult;
struct DriftCurves;

class DriftView : public QWidget {
  Q_OBJECT

 public:
  explicit DriftView(QWidget* parent = nullptr);

  // Shows a run's drift; null shows an empty view that says why: `absent` (the run's own reason), else that no
  // run is open.
  void setDrift(const QString& runName, std::shared_ptr<const ActivationDriftResult> drift,
                const QString& absent = QString());

  // Several runs' drift at once (Runs dock ▸ Compare with two or more runs that measured it): the curves plot
  // holds one curve per run, the largest drift over layers at each step, in the run's colour (PlotSupport.h
  // runColor); the heatmap shows the first run on a colour scale that spans every run. Fewer than two runs
  // leave the single-run view as it was.
  struct OverlayRun {
    QString name;
    std::shared_ptr<const ActivationDriftResult> drift;
  };
  void setOverlay(const QVector<OverlayRun>& runs);
  bool overlaid() const { return overlay_.size() >= 2; }

  QCustomPlot* heatmap() const { return heatmap_; }
  QCustomPlot* curves() const { return curves_; }
  QCPColorMap* colorMap() const { return colorMap_; }
  bool hasData() const { return drift_ != nullptr; }
  // The heatmap's and the curves' titles as shown (the empty view's reason, or what the curves say).
  QString heatmapTitle() const;
  QString curvesTitle() const;
  // One row per (layer, step): variant, layer, step, drift, prompts; plus per-layer plateau and step to 90%.
  bool writeCsv(const QString& path, QString* error) const;

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void rebuild();
  void rebuildOverlay();
  const DriftCurves* shownCurves() const;
  const DriftCurves& variantOf(const ActivationDriftResult& drift) const;
  QVector<OverlayRun> overlay_;

  QString runName_;
  QString absent_;
  std::shared_ptr<const ActivationDriftResult> drift_;
  QComboBox* variant_ = nullptr;
  QLabel* summary_ = nullptr;
  QCustomPlot* heatmap_ = nullptr;
  QCustomPlot* curves_ = nullptr;
  QCPColorMap* colorMap_ = nullptr;
  QCPColorScale* colorScale_ = nullptr;
};

}  // namespace pareto
