#include "widgets/RunsPanel.h"

#include <QAction>
#include <QComboBox>
#include <QDesktopServices>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QSaveFile>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QToolButton>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "widgets/PlotSupport.h"
#include "widgets/RunHistory.h"

namespace pareto {

// Sorts by SortRole and lets through the rows whose model key, kind and status match the filters ("" : any;
// kNoModelKey: the runs without a model, whose key is "" too).
class RunsPanel::RunFilterModel : public QSortFilterProxyModel {
 public:
  using QSortFilterProxyModel::QSortFilterProxyModel;
  void setFilters(const QString& modelKey, const QString& kind, const QString& status) {
    modelKey_ = modelKey;
    kind_ = kind;
    status_ = status;
    invalidateFilter();
  }

 protected:
  bool filterAcceptsRow(int row, const QModelIndex& parent) const override {
    const QModelIndex i = sourceModel()->index(row, 0, parent);
    const QString model = i.data(RunHistory::ModelKeyRole).toString();
    return (modelKey_.isEmpty() || (modelKey_ == kNoModelKey ? model.isEmpty() : model == modelKey_)) &&
           (kind_.isEmpty() || i.data(RunHistory::KindRole).toString() == kind_) &&
           (status_.isEmpty() || i.data(RunHistory::StatusRole).toString() == status_);
  }

 private:
  QString modelKey_, kind_, status_;
};

RunsPanel::RunsPanel(RunHistory* history, QWidget* parent) : QWidget(parent), history_(history) {
  sorted_ = new RunFilterModel(this);
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
  table_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
  table_->setToolTip(tr("Runs of this session and the run store. Double-click a run to open it (its tag or note to "
                        "edit them); select several to compare them; Delete removes the selected ones (after "
                        "asking)."));
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    // A double-click on the tag or the note edits it instead.
    if (index.column() == RunHistory::TagColumn || index.column() == RunHistory::NoteColumn) return;
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
  benchmark_ = new QPushButton(tr("Benchmark"));
  benchmark_->setObjectName("benchmarkRun");
  benchmark_->setToolTip(tr("Measure the batch-1 decode speed of the selected run's compressed folder on the current "
                            "device (Benchmark tab); the measured tok/s then replaces the prediction in the Runs "
                            "dock and the Pareto view."));
  connect(benchmark_, &QPushButton::clicked, this, [this] {
    const QList<int> ids = selectedRunIds();
    if (ids.size() == 1) emit benchmarkRequested(ids.first());
  });
  folder_ = new QPushButton(tr("Open Folder"));
  folder_->setObjectName("openRunFolder");
  folder_->setToolTip(tr("Show the selected run's compressed folder in the file manager."));
  openFolder_ = [](const QString& folder) { return QDesktopServices::openUrl(QUrl::fromLocalFile(folder)); };
  connect(folder_, &QPushButton::clicked, this, [this] {
    const QList<int> ids = selectedRunIds();
    const RunRecord* run = ids.size() == 1 ? history_->find(ids.first()) : nullptr;
    if (run != nullptr && openFolder_ && !openFolder_(run->outDir))
      QMessageBox::warning(window(), tr("Cannot open folder"), tr("%1: could not be opened").arg(run->outDir));
  });
  saveRecipe_ = new QPushButton(tr("Save Recipe…"));
  saveRecipe_->setObjectName("saveRunRecipe");
  saveRecipe_->setToolTip(tr("Save the selected run's recipe as the JSON it ran with (pareto-cli compress --recipe "
                             "takes it)."));
  connect(saveRecipe_, &QPushButton::clicked, this, [this] {
    const QList<int> ids = selectedRunIds();
    if (ids.size() != 1) return;
    const QString path = QFileDialog::getSaveFileName(this, tr("Save Recipe"), QStringLiteral("run-%1-recipe.json").arg(ids.first()),
                                                      tr("Recipes (*.json)"));
    QString error;
    if (!path.isEmpty() && !saveRecipe(ids.first(), path, &error)) QMessageBox::warning(window(), tr("Save failed"), error);
  });
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

  modelFilter_ = new QComboBox;
  modelFilter_->setObjectName("runsModelFilter");
  modelFilter_->setToolTip(tr("Show the runs of one source model (by content hash), or of every model."));
  kindFilter_ = new QComboBox;
  kindFilter_->setObjectName("runsKindFilter");
  kindFilter_->setToolTip(tr("Show one kind of run (compress, bench …), or every kind."));
  statusFilter_ = new QComboBox;
  statusFilter_->setObjectName("runsStatusFilter");
  statusFilter_->setToolTip(tr("Show the runs of one status (finished, failed, cancelled …), or every run."));
  for (QComboBox* c : {modelFilter_, kindFilter_, statusFilter_}) {
    c->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    connect(c, qOverload<int>(&QComboBox::currentIndexChanged), this, &RunsPanel::applyFilters);
  }
  for (auto signal : {&RunHistory::runAdded, &RunHistory::runChanged})
    connect(history_, signal, this, &RunsPanel::rebuildFilters);
  connect(history_, &RunHistory::runsRemoved, this, &RunsPanel::rebuildFilters);
  auto* filters = new QHBoxLayout;
  auto* filterCaption = new QLabel(tr("Show:"));
  filterCaption->setToolTip(tr("Filter the runs by model, kind and status."));
  filters->addWidget(filterCaption);
  filters->addWidget(modelFilter_);
  filters->addWidget(kindFilter_);
  filters->addWidget(statusFilter_);
  filters->addStretch(1);

  buttons_ = new QHBoxLayout;
  auto* buttons = buttons_;
  for (QPushButton* b : {open_, compare_, recipe_, benchmark_, folder_, saveRecipe_, delete_}) buttons->addWidget(b);
  buttons->addStretch(1);
  buttons->addWidget(export_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(filters);
  layout->addWidget(table_, 1);
  layout->addLayout(buttons);
  rebuildFilters();
  updateButtons();
}

void RunsPanel::addExportMenu(QMenu* menu) {
  auto* button = new QToolButton;
  button->setObjectName("exportRun");
  button->setText(tr("Export"));
  button->setToolTip(tr("Write the selected run where it deploys: GGUF, compressed-tensors or a dense Hugging Face "
                        "checkpoint, as `pareto-cli export` does; Open Output Folder shows the last export."));
  button->setMenu(menu);
  button->setPopupMode(QToolButton::InstantPopup);
  // After Save Recipe…, before Delete.
  buttons_->insertWidget(buttons_->indexOf(delete_), button);
}

void RunsPanel::rebuildFilters() {
  // Each combo keeps its choice while the runs come and go.
  auto refill = [](QComboBox* combo, const QString& any, const QList<QPair<QString, QString>>& items) {
    const QString chosen = combo->currentData().toString();
    const QSignalBlocker block(combo);
    combo->clear();
    combo->addItem(any, QString());
    for (const auto& [label, key] : items) combo->addItem(label, key);
    const int index = combo->findData(chosen);
    combo->setCurrentIndex(index >= 0 ? index : 0);
  };
  QList<QPair<QString, QString>> models, kinds, statuses;
  for (const QString& key : history_->modelKeys())
    models << qMakePair(history_->modelLabel(key), key.isEmpty() ? kNoModelKey : key);
  QStringList seenKinds, seenStatuses;
  for (const RunRecord& run : history_->runs()) {
    if (!seenKinds.contains(run.kind)) seenKinds << run.kind;
    if (!seenStatuses.contains(run.status)) seenStatuses << run.status;
  }
  seenKinds.sort();
  seenStatuses.sort();
  for (const QString& k : seenKinds) kinds << qMakePair(k, k);
  for (const QString& s : seenStatuses) statuses << qMakePair(s, s);
  refill(modelFilter_, tr("All models"), models);
  for (int i = 1; i < modelFilter_->count(); ++i)
    modelFilter_->setItemData(i, modelFilter_->itemData(i).toString(), Qt::ToolTipRole);
  refill(kindFilter_, tr("All kinds"), kinds);
  refill(statusFilter_, tr("Any status"), statuses);
  applyFilters();
}

void RunsPanel::applyFilters() {
  sorted_->setFilters(modelFilter_->currentData().toString(), kindFilter_->currentData().toString(),
                      statusFilter_->currentData().toString());
  updateButtons();
}

void RunsPanel::setFilters(const QString& modelKey, const QString& kind, const QString& status) {
  const QSignalBlocker a(modelFilter_), b(kindFilter_), c(statusFilter_);
  auto choose = [](QComboBox* combo, const QString& key) {
    const int index = combo->findData(key);
    combo->setCurrentIndex(index >= 0 ? index : 0);
  };
  choose(modelFilter_, modelKey);
  choose(kindFilter_, kind);
  choose(statusFilter_, status);
  applyFilters();
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
  const QList<int> ids = selectedRunIds();
  const RunRecord* one = ids.size() == 1 ? history_->find(ids.first()) : nullptr;
  recipe_->setEnabled(one != nullptr && one->kind == QLatin1String("compress"));
  benchmark_->setEnabled(one != nullptr && one->isFinishedCompress());
  folder_->setEnabled(one != nullptr && !one->outDir.isEmpty() && QFileInfo(one->outDir).isDir());
  saveRecipe_->setEnabled(one != nullptr);
  compare_->setEnabled(selected >= 2);
  export_->setEnabled(history_->rowCount() > 0);
}

void RunsPanel::setFolderOpener(FolderOpener opener) { openFolder_ = std::move(opener); }

bool RunsPanel::saveRecipe(int runId, const QString& path, QString* error) const {
  const RunRecord* run = history_->find(runId);
  const auto doc = run ? nlohmann::json::parse(run->recipeJson, nullptr, false) : nlohmann::json();
  if (run == nullptr || !doc.is_object()) {
    if (error) *error = tr("%1: run %2 has no recipe to save").arg(path).arg(runId);
    return false;
  }
  QSaveFile file(path);   // written whole or not at all
  const QByteArray text = QByteArray::fromStdString(doc.dump(2) + "\n");
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text) || file.write(text) != text.size() || !file.commit()) {
    if (error) *error = tr("%1: cannot write: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

bool RunsPanel::writeCsv(const QString& path, QString* error) const {
  QStringList header{"run", "name", "kind", "status", "model", "model_hash", "output", "recipe"};
  for (const MetricInfo& m : runMetricInfo()) header << QString::fromStdString(m.key);
  QVector<QStringList> rows;
  for (const RunRecord& run : history_->runs()) {
    // The store's id, as `pareto-cli runs` prints it; empty for a run the store could not record.
    QStringList row{run.id > 0 ? QString::number(run.id) : QString(), run.name, run.kind, run.status, run.modelDir,
                    run.modelHash, run.outDir, QString::fromStdString(run.recipeJson)};
    for (const MetricInfo& m : runMetricInfo()) {
      const double v = run.metric(m.key);
      row << (std::isnan(v) ? QString() : QString::number(v, 'g', 9));
    }
    rows << row;
  }
  return pareto::writeCsv(path, header, rows, error);
}

}  // namespace pareto
