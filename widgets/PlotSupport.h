// What every plot tab shares: colours that follow the window palette (light or dark), exporting a plot to an
// image (PNG), PDF or SVG, writing a table as CSV, and the "Export" button that offers both.
//
// QCustomPlot writes PNG and PDF itself; SVG is the plot painted onto Qt SVG's QSvgGenerator (Qt6::Svg).
#pragma once

#include <QColor>
#include <QString>
#include <QStringList>
#include <QVector>
#include <functional>

class QCustomPlot;
class QCPTextElement;
class QToolButton;
class QWidget;

namespace pareto {

// A bold title row above the plot (one point larger than the plot's font), and that title afterwards.
QCPTextElement* addPlotTitle(QCustomPlot* plot, const QString& text = QString(), const QString& objectName = QString());
QCPTextElement* plotTitle(QCustomPlot* plot);

// Background, axes, grid and text of the plot from its palette; call again when the palette changes.
void applyPalette(QCustomPlot* plot);
// The colour of the i-th run of an overlay: the same run has the same colour in every plot that overlays runs.
QColor runColor(int index);

// The file types plots export to, as a QFileDialog filter.
QString plotExportFilter();
// Writes the plot as the file's suffix says (.png, .pdf or .svg). On failure returns false with *error naming
// the file.
bool exportPlot(QCustomPlot* plot, const QString& path, QString* error);

// RFC 4180 CSV: fields with a comma, quote or line break are quoted, quotes doubled. Written whole or not at all.
bool writeCsv(const QString& path, const QStringList& header, const QVector<QStringList>& rows, QString* error);

// An "Export" tool button with "Plot…" (one action per plot, named) and "Table as CSV…". Errors go to the
// message box of `parent`'s window.
struct ExportTarget {
  QString name;          // "Heatmap"
  QCustomPlot* plot;
};
QToolButton* makeExportButton(QWidget* parent, const QVector<ExportTarget>& plots,
                              std::function<bool(const QString& path, QString* error)> writeTable);
// The file name an export offers: "<stem>-<what><suffix>", the stem being what the view shows (setExportStem:
// the run, "run-12"; the model), so that plots of different runs do not overwrite each other by default.
QString defaultExportName(const QWidget* view, const QString& what, const QString& suffix);
// The stem of a run's exports from its name: "#12 magnitude 2:4" → "run-12"; an unrecorded run by its name.
void setExportStem(QWidget* view, const QString& runName);

}  // namespace pareto
