#include "widgets/RunsPanel.h"

#include <QAction>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QMessageBox>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

#include "widgets/PlotSupport.h"
#include "widgets/RunHistory.h"

namespace pareto {

RunsPanel::RunsPanel(RunHistory* history, QWidget* parent) : QWidget(parent), history_(history) {
  sorted_ = new QSortFilterProxyModel(this);
  sorted_->setSourceModel(history_);
  sorted_->setSortRole(RunHistory::SortRole);
  table_ = new QTableView;
  table_->setObjectName("runsTable");
  table_->setModel(sorted_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(RunHistory::NameColumn, Qt::DescendingOrder);   // newest first
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(RunHistory::RecipeColumn, QHeaderView::Stretch);
  table_->setToolTip(tr("Runs of this session and the run store. Double-click a run to open it; select several to "
                        "compare them; Delete removes the selected ones (after asking)."));
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    emit runActivated(index.data(RunHistory::RunIdRole).toInt());
  });

  open_ = new QPushButton(tr("Open"));
  open_->setObjectName("openRun");
  open_->setToolTip(tr("Show the selected run in the plot tabs and use its compressed model for generation."));
  compare_ = new QPushButton(tr("Compare"));
  compare_->setObjectName("compareRuns");
  compare_->setToolTip(tr("Show the selected runs' metrics and recipes side by side."));
  recipe_ = new QPushButton(tr("Use Recipe"));
  recipe_->setObjectName("useRunRecipe");
  recipe_->setToolTip(tr("Put the selected run's recipe into the Recipe dock (undoable)."));
  delete_ = new QPushButton(tr("Delete…"));
  delete_->setObjectName("deleteRuns");
  delete_->setToolTip(tr("Delete the selected runs from this list and from the run store, with their metrics, "
                         "curves and benchmark rows (after asking). Compressed folders stay on disk."));
  export_ = new QPushButton(tr("Export CSV…"));
  export_->setObjectName("exportRuns");
  export_->setToolTip(tr("Save every run's metrics as CSV."));
  connect(open_, &QPushButton::clicked, this, [this] {
    const QList<int> ids = selectedRunIds();
    if (!ids.isEmpty()) emit runActivated(ids.first());
  });
  connect(compare_, &QPushButton::clicked, this, [this] { emit compareRequested(selectedRunIds()); });
  connect(delete_, &QPushButton::clicked, this, &RunsPanel::deleteSelected);
  auto* deleteKey = new QAction(tr("Delete Runs"), table_);
  deleteKey->setShortcut(QKeySequence::Delete);
  deleteKey->setShortcutContext(Qt::WidgetShortcut);
  connect(deleteKey, &QAction::triggered, this, &RunsPanel::deleteSelected);
  table_->addAction(deleteKey);
  confirm_ = [this](const QString& title, const QString& question) {
    return QMessageBox::question(window(), title, question, QMessageBox::Yes | QMessageBox::No, QMessageBox::No) ==
           QMessageBox::Yes;
  };
  connect(recipe_, &QPushButton::clicked, this, [this] {
    const QList<int> ids = selectedRunIds();
    if (!ids.isEmpty()) emit recipeRequested(ids.first());
  });
  connect(export_, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export Runs"), "runs.csv", tr("CSV (*.csv)"));
    QString error;
    if (!path.isEmpty() && !writeCsv(path, &error)) QMessageBox::warning(window(), tr("Export failed"), error);
  });
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &RunsPanel::updateButtons);
  connect(history_, &RunHistory::runAdded, this, &RunsPanel::updateButtons);
  connect(history_, &RunHistory::runsRemoved, this, &RunsPanel::updateButtons);

  auto* buttons = new QHBoxLayout;
  for (QPushButton* b : {open_, compare_, recipe_, delete_}) buttons->addWidget(b);
  buttons->addStretch(1);
  buttons->addWidget(export_);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(table_, 1);
  layout->addLayout(buttons);
  updateButtons();
}

QList<int> RunsPanel::selectedRunIds() const {
  QList<int> ids;
  QModelIndexList rows = table_->selectionModel()->selectedRows();
  std::sort(rows.begin(), rows.end(), [](const QModelIndex& a, const QModelIndex& b) { return a.row() < b.row(); });
  for (const QModelIndex& index : rows) ids << index.data(RunHistory::RunIdRole).toInt();
  return ids;
}

void RunsPanel::selectRun(int runId) {
  for (int r = 0; r < sorted_->rowCount(); ++r) {
    const QModelIndex index = sorted_->index(r, 0);
    if (index.data(RunHistory::RunIdRole).toInt() != runId) continue;
    table_->selectionModel()->select(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    table_->scrollTo(index);
    return;
  }
}

void RunsPanel::setConfirmer(Confirmer confirmer) { confirm_ = std::move(confirmer); }

bool RunsPanel::deleteSelected() {
  const QList<int> ids = selectedRunIds();
  if (ids.isEmpty()) return false;
  QStringList names;
  for (int id : ids)
    if (const RunRecord* run = history_->find(id)) names << run->name;
  constexpr int kNamed = 8;
  QString list = QStringList(names.mid(0, kNamed)).join('\n');
  if (names.size() > kNamed) list += tr("\n… and %1 more").arg(names.size() - kNamed);
  const QString question =
      tr("Delete %n run(s)?\n\n%1\n\nTheir metrics, curves and benchmark rows are removed from the run store; "
         "compressed folders stay on disk. This cannot be undone.", nullptr, int(ids.size()))
          .arg(list);
  if (confirm_ && !confirm_(tr("Delete Runs"), question)) return false;
  emit deleteRequested(ids);
  return true;
}

void RunsPanel::updateButtons() {
  const int selected = int(table_->selectionModel()->selectedRows().size());
  open_->setEnabled(selected >= 1);
  delete_->setEnabled(selected >= 1);
  recipe_->setEnabled(selected == 1);
  compare_->setEnabled(selected >= 2);
  export_->setEnabled(history_->rowCount() > 0);
}

bool RunsPanel::writeCsv(const QString& path, QString* error) const {
  QStringList header{"run", "name", "model", "output", "recipe"};
  for (const MetricInfo& m : runMetricInfo()) header << QString::fromStdString(m.key);
  QVector<QStringList> rows;
  for (const RunRecord& run : history_->runs()) {
    QStringList row{QString::number(run.id), run.name, run.modelDir, run.outDir, QString::fromStdString(run.recipeJson)};
    for (const MetricInfo& m : runMetricInfo()) {
      const double v = run.metric(m.key);
      row << (std::isnan(v) ? QString() : QString::number(v, 'g', 9));
    }
    rows << row;
  }
  return pareto::writeCsv(path, header, rows, error);
}

}  // namespace pareto
