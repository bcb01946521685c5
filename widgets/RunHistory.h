// The runs the workbench knows, as a table model for the Runs dock and the source of the Pareto view: the
// finished compress runs of the experiment store (core/store; read by the window's EngineWorker at startup, off
// the GUI thread, and added here) followed by this session's runs. The interface is only: add a run, find one,
// list them, remove some, replace a run's predicted tokens/s (when new kernel benchmarks of its device arrive),
// and hear when any of that happens.
#pragma once

#include <QAbstractTableModel>
#include <QList>
#include <vector>

#include "widgets/RunRecord.h"

namespace pareto {

class RunHistory : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    NameColumn,
    RecipeColumn,
    BitsColumn,
    SizeColumn,
    PerplexityColumn,
    DecodeNllColumn,
    Top1Column,
    KlColumn,
    KlP99Column,
    DecodeKlColumn,
    DecodeKlP99Column,
    TokensPerSecondColumn,
    FinishedColumn,
    ColumnCount
  };
  static constexpr int RunIdRole = Qt::UserRole + 1;   // the run's id, on every cell
  static constexpr int SortRole = Qt::UserRole + 2;    // numbers as numbers (missing values sort last)

  explicit RunHistory(QObject* parent = nullptr);

  // Takes the run, gives it the next id (returned) and a name if it has none.
  int add(RunRecord run);
  const RunRecord* find(int id) const;
  const std::vector<RunRecord>& runs() const { return runs_; }
  // Removes the runs with these ids (unknown ids are ignored); returns how many went.
  int remove(const QList<int>& ids);
  // Replaces a run's predicted tokens/s (and the dense model's) and where they came from.
  void setPrediction(int id, double tokensPerSecond, double denseTokensPerSecond, const QString& source);
  // The metric key a column shows ("" for text columns).
  static std::string columnMetric(int column);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 signals:
  void runAdded(int id);
  void runsRemoved(const QList<int>& ids);
  void runChanged(int id);

 private:
  std::vector<RunRecord> runs_;
  int nextId_ = 1;
};

}  // namespace pareto
