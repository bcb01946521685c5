#include "widgets/RunHistory.h"

#include <QLocale>
#include <limits>

namespace pareto {

RunHistory::RunHistory(QObject* parent) : QAbstractTableModel(parent) {}

int RunHistory::add(RunRecord run) {
  run.id = nextId_++;
  if (run.name.isEmpty()) run.name = QStringLiteral("#%1 %2").arg(run.id).arg(describeRecipe(run.recipeJson));
  const int row = int(runs_.size());
  beginInsertRows({}, row, row);
  runs_.push_back(std::move(run));
  endInsertRows();
  emit runAdded(runs_.back().id);
  return runs_.back().id;
}

const RunRecord* RunHistory::find(int id) const {
  for (const RunRecord& r : runs_)
    if (r.id == id) return &r;
  return nullptr;
}

int RunHistory::remove(const QList<int>& ids) {
  QList<int> removed;
  for (int row = int(runs_.size()) - 1; row >= 0; --row) {
    if (!ids.contains(runs_[size_t(row)].id)) continue;
    beginRemoveRows({}, row, row);
    removed.prepend(runs_[size_t(row)].id);
    runs_.erase(runs_.begin() + row);
    endRemoveRows();
  }
  if (!removed.isEmpty()) emit runsRemoved(removed);
  return int(removed.size());
}

void RunHistory::setPrediction(int id, double tokensPerSecond, double denseTokensPerSecond, const QString& source) {
  for (size_t row = 0; row < runs_.size(); ++row) {
    RunRecord& r = runs_[row];
    if (r.id != id) continue;
    r.metrics[metric::kPredictedTokensPerSecond] = tokensPerSecond;
    r.metrics[metric::kDensePredictedTokensPerSecond] = denseTokensPerSecond;
    r.bandwidthSource = source;
    emit dataChanged(index(int(row), 0), index(int(row), ColumnCount - 1));
    emit runChanged(id);
    return;
  }
}

std::string RunHistory::columnMetric(int column) {
  switch (column) {
    case BitsColumn: return metric::kLinearBitsPerWeight;
    case SizeColumn: return metric::kBytes;
    case PerplexityColumn: return metric::kPerplexity;
    case DecodeNllColumn: return metric::kDecodeNll;
    case Top1Column: return metric::kTop1Agreement;
    case KlColumn: return metric::kKlMean;
    case KlP99Column: return metric::kKlP99;
    case DecodeKlColumn: return metric::kDecodeKlMean;
    case DecodeKlP99Column: return metric::kDecodeKlP99;
    case TokensPerSecondColumn: return metric::kPredictedTokensPerSecond;
    default: return {};
  }
}

int RunHistory::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(runs_.size()); }

int RunHistory::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RunHistory::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= int(runs_.size())) return {};
  const RunRecord& run = runs_[size_t(index.row())];
  if (role == RunIdRole) return run.id;
  const std::string key = columnMetric(index.column());
  if (!key.empty()) {
    const double value = run.metric(key);
    if (role == Qt::DisplayRole) return formatMetric(key, value);
    if (role == SortRole) return std::isnan(value) ? std::numeric_limits<double>::infinity() : value;
    if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole && key == metric::kPredictedTokensPerSecond && !run.bandwidthSource.isEmpty())
      return tr("Predicted from %1").arg(run.bandwidthSource);
    return {};
  }
  switch (index.column()) {
    case NameColumn:
      if (role == Qt::DisplayRole) return run.name;
      if (role == SortRole) return run.id;
      if (role == Qt::ToolTipRole) return tr("%1\nmodel: %2\noutput: %3").arg(run.name, run.modelDir, run.outDir);
      break;
    case RecipeColumn:
      if (role == Qt::DisplayRole || role == SortRole) return describeRecipe(run.recipeJson);
      if (role == Qt::ToolTipRole) return QString::fromStdString(run.recipeJson);
      break;
    case FinishedColumn:
      if (role == Qt::DisplayRole) return QLocale().toString(run.finishedAt.time(), QLocale::ShortFormat);
      if (role == SortRole) return run.finishedAt;
      break;
    default:
      break;
  }
  return {};
}

QVariant RunHistory::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  const std::string key = columnMetric(section);
  if (!key.empty()) {
    const MetricInfo* info = findMetric(key);
    if (role == Qt::DisplayRole) return info->caption;
    if (role == Qt::ToolTipRole) return info->meaning;
    return {};
  }
  switch (section) {
    case NameColumn:
      if (role == Qt::DisplayRole) return tr("Run");
      if (role == Qt::ToolTipRole) return tr("The run's number in this session and a short description of its recipe.");
      break;
    case RecipeColumn:
      if (role == Qt::DisplayRole) return tr("Recipe");
      if (role == Qt::ToolTipRole)
        return tr("Pruning and quantization of the recipe; the tooltip of a cell shows the recipe's JSON.");
      break;
    case FinishedColumn:
      if (role == Qt::DisplayRole) return tr("Finished");
      if (role == Qt::ToolTipRole) return tr("When the run finished.");
      break;
    default:
      break;
  }
  return {};
}

}  // namespace pareto
