#include "widgets/PlotSupport.h"

#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QMessageBox>
#include <QRegularExpression>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QTextStream>
#include <QToolButton>
#include <qcustomplot.h>

namespace pareto {

QCPTextElement* addPlotTitle(QCustomPlot* plot, const QString& text, const QString& objectName) {
  plot->plotLayout()->insertRow(0);
  auto* title = new QCPTextElement(plot, text, QFont(plot->font().family(), plot->font().pointSize() + 1, QFont::Bold));
  if (!objectName.isEmpty()) title->setObjectName(objectName);
  plot->plotLayout()->addElement(0, 0, title);
  return title;
}

QCPTextElement* plotTitle(QCustomPlot* plot) {
  return qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0));
}

QColor runColor(int index) {
  // A qualitative palette that stays apart in the light and the dark theme (Tableau 10).
  static const QColor colors[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b), QColor(0xe1, 0x57, 0x59),
                                  QColor(0x76, 0xb7, 0xb2), QColor(0x59, 0xa1, 0x4f), QColor(0xed, 0xc9, 0x48),
                                  QColor(0xb0, 0x7a, 0xa1), QColor(0xff, 0x9d, 0xa7), QColor(0x9c, 0x75, 0x5f),
                                  QColor(0xba, 0xb0, 0xac)};
  return colors[size_t(index) % (sizeof colors / sizeof colors[0])];
}

void applyPalette(QCustomPlot* plot) {
  const QPalette pal = plot->palette();
  const QColor text = pal.color(QPalette::WindowText);
  const QColor base = pal.color(QPalette::Base);
  QColor grid = text;
  grid.setAlpha(40);
  plot->setBackground(base);
  for (QCPAxisRect* rect : plot->axisRects()) {
    for (QCPAxis* axis : rect->axes()) {
      axis->setBasePen(QPen(text));
      axis->setTickPen(QPen(text));
      axis->setSubTickPen(QPen(text));
      axis->setTickLabelColor(text);
      axis->setLabelColor(text);
      axis->grid()->setPen(QPen(grid, 0, Qt::DotLine));
    }
  }
  for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
    if (auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i))) title->setTextColor(text);
  if (plot->legend) {
    plot->legend->setBrush(base);
    plot->legend->setTextColor(text);
    plot->legend->setBorderPen(QPen(grid));
  }
}

QString plotExportFilter() {
  return QObject::tr("PNG image (*.png);;PDF document (*.pdf);;SVG image (*.svg)");
}

namespace {

// The plot painted onto an SVG generator at its on-screen size (a plot never shown gets 800 × 600), vectors
// and text kept as such.
bool saveSvg(QCustomPlot* plot, const QString& path) {
  int width = plot->width(), height = plot->height();
  if (width < 50 || height < 50) {
    width = 800;
    height = 600;
  }
  QSvgGenerator svg;
  svg.setFileName(path);
  svg.setSize(QSize(width, height));
  svg.setViewBox(QRect(0, 0, width, height));
  svg.setTitle(QObject::tr("Pareto plot"));
  svg.setDescription(QObject::tr("Exported by Pareto"));
  QCPPainter painter;
  if (!painter.begin(&svg)) return false;
  plot->toPainter(&painter, width, height);
  return painter.end() && QFileInfo(path).size() > 0;
}

}  // namespace

bool exportPlot(QCustomPlot* plot, const QString& path, QString* error) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  bool ok = false;
  if (suffix == "png") {
    ok = plot->savePng(path, 0, 0, 2.0);   // twice the screen size: crisp in documents
  } else if (suffix == "pdf") {
    ok = plot->savePdf(path);
  } else if (suffix == "svg") {
    ok = saveSvg(plot, path);
  } else {
    if (error) *error = QObject::tr("%1: plots export to .png, .pdf or .svg").arg(path);
    return false;
  }
  if (!ok && error) *error = QObject::tr("%1: could not be written").arg(path);
  return ok;
}

namespace {
QString csvField(const QString& field) {
  if (!field.contains(QLatin1Char(',')) && !field.contains(QLatin1Char('"')) && !field.contains(QLatin1Char('\n')) &&
      !field.contains(QLatin1Char('\r')))
    return field;
  QString quoted = field;
  quoted.replace(QLatin1String("\""), QLatin1String("\"\""));
  return QLatin1Char('"') + quoted + QLatin1Char('"');
}
}  // namespace

bool writeCsv(const QString& path, const QStringList& header, const QVector<QStringList>& rows, QString* error) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) {
    if (error) *error = QObject::tr("%1: cannot write: %2").arg(path, file.errorString());
    return false;
  }
  QTextStream out(&file);
  auto line = [&out](const QStringList& fields) {
    QStringList escaped;
    for (const QString& f : fields) escaped << csvField(f);
    out << escaped.join(QLatin1Char(',')) << "\r\n";
  };
  line(header);
  for (const QStringList& row : rows) line(row);
  out.flush();
  if (!file.commit()) {
    if (error) *error = QObject::tr("%1: cannot write: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

QString defaultExportName(const QWidget* view, const QString& what, const QString& suffix) {
  const QString stem = view ? view->property("exportStem").toString() : QString();
  QString name = what.toLower();
  name.replace(QRegularExpression("[^a-z0-9]+"), "-");
  return (stem.isEmpty() ? QString() : stem + "-") + name + suffix;
}

void setExportStem(QWidget* view, const QString& runName) {
  const QRegularExpressionMatch id = QRegularExpression("^#(\\d+)").match(runName);
  QString stem = id.hasMatch() ? QStringLiteral("run-%1").arg(id.captured(1)) : runName.toLower();
  stem.replace(QRegularExpression("[^a-z0-9]+"), "-");
  view->setProperty("exportStem", stem);
}

QToolButton* makeExportButton(QWidget* parent, const QVector<ExportTarget>& plots,
                              std::function<bool(const QString& path, QString* error)> writeTable) {
  auto* button = new QToolButton(parent);
  button->setObjectName("exportButton");
  button->setText(QObject::tr("Export"));
  button->setToolTip(QObject::tr("Save the plots as PNG, PDF or SVG, or the numbers behind them as CSV."));
  button->setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(button);
  auto report = [parent](const QString& message) {
    QMessageBox::warning(parent->window(), QObject::tr("Export failed"), message);
  };
  for (const ExportTarget& target : plots) {
    QCustomPlot* plot = target.plot;
    menu->addAction(QObject::tr("%1 plot…").arg(target.name), parent, [parent, plot, report, name = target.name] {
      const QString path = QFileDialog::getSaveFileName(parent, QObject::tr("Export %1 Plot").arg(name),
                                                        defaultExportName(parent, name, ".png"), plotExportFilter());
      QString error;
      if (!path.isEmpty() && !exportPlot(plot, path, &error)) report(error);
    });
  }
  if (writeTable) {
    menu->addAction(QObject::tr("Table as CSV…"), parent, [parent, writeTable, report] {
      const QString path = QFileDialog::getSaveFileName(parent, QObject::tr("Export Table"),
                                                        defaultExportName(parent, "table", ".csv"),
                                                        QObject::tr("CSV (*.csv)"));
      QString error;
      if (!path.isEmpty() && !writeTable(path, &error)) report(error);
    });
  }
  button->setMenu(menu);
  return button;
}

}  // namespace pareto
