// The runs the workbench knows, as a table model for the Runs dock and the source of the Pareto view: every run
// of the experiment store as `pareto-cli runs` lists them (any kind and status; core/store, read by the window's
// EngineWorker off the GUI thread and added here) and this session's runs, each under the store's id. The
// interface is only: add (or update) a run, find one, list them, remove some, replace a run's predicted tokens/s
// (when new kernel benchmarks of its device arrive), and hear when any of that happens.
#pragma once

#include <QAbstractTableModel>
#include <QList>
#include <QMap>
#include <vector>

#include "widgets/RunRecord.h"

namespace pareto {

class RunHistory : public QAbstractTableModel {
  Q_OBJECT

 public:
  // A Δ column is its metric minus the dense model's value measured in the same run (RunRecord.h denseMetricOf);
  // KL and top-1 agreement need none: they are measured against the dense model.
  enum Column {
    NameColumn,
    TagColumn,
    ModelColumn,
    KindColumn,
    StatusColumn,
    RecipeColumn,
    BitsColumn,
    DeltaBitsColumn,
    SizeColumn,
    PerplexityColumn,
    DeltaPerplexityColumn,
    DecodeNllColumn,
    DeltaDecodeNllColumn,
    Top1Column,
    KlColumn,
    KlP99Column,
    DecodeKlColumn,
    DecodeKlP99Column,
    TokensPerSecondColumn,
    DeltaTokensPerSecondColumn,
    MeasuredTokensPerSecondColumn,
    FinishedColumn,
    NoteColumn,
    ColumnCount
  };
  static constexpr int RunIdRole = Qt::UserRole + 1;   // the run's id, on every cell
  static constexpr int SortRole = Qt::UserRole + 2;    // numbers as numbers (missing values sort last)
  static constexpr int ModelKeyRole = Qt::UserRole + 3;   // RunRecord::modelKey(), on every cell
  static constexpr int KindRole = Qt::UserRole + 4;       // the run's kind, on every cell
  static constexpr int StatusRole = Qt::UserRole + 5;     // the run's status, on every cell

  explicit RunHistory(QObject* parent = nullptr);

  // Takes the run and a name if it has none; returns its id. A run with the id of one already here replaces it
  // (a stored run read again: its status moved on), keeping the curves only the session has. A run without a
  // store id (id <= 0) gets the next negative id.
  int add(RunRecord run);
  const RunRecord* find(int id) const;
  const std::vector<RunRecord>& runs() const { return runs_; }
  // Removes the runs with these ids (unknown ids are ignored); returns how many went.
  int remove(const QList<int>& ids);
  // Replaces a run's predicted tokens/s (and the dense model's) and where they came from.
  void setPrediction(int id, double tokensPerSecond, double denseTokensPerSecond, const QString& source);
  // Sets the measured tokens/s of the runs whose compressed folder is a key of `byFolder` (absolute paths).
  void setMeasured(const QMap<QString, double>& byFolder);
  // The metric key a column shows ("" for text columns); for a Δ column, the metric it is the difference of.
  static std::string columnMetric(int column);
  static bool isDeltaColumn(int column);
  // Sets a run's tag and note as the user typed them (the Tag and Note cells are editable for stored runs) and
  // emits labelEdited, for the window to store them.
  void setLabel(int id, const QString& tag, const QString& note);
  // "ref-tiny": the folder name of the newest run of a model key (RunRecord::modelKey()), for lists and legends.
  QString modelLabel(const QString& modelKey) const;
  // The model keys of the runs, newest run's model first.
  QStringList modelKeys() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role) override;

 signals:
  void runAdded(int id);
  void runsRemoved(const QList<int>& ids);
  void runChanged(int id);
  void labelEdited(int id, const QString& tag, const QString& note);

 private:
  std::vector<RunRecord> runs_;
  int nextUnrecordedId_ = -1;
};

}  // namespace pareto
