#include "widgets/RunHistory.h"

#include <QFileInfo>
#include <QLocale>
#include <limits>

namespace pareto {

RunHistory::RunHistory(QObject* parent) : QAbstractTableModel(parent) {}

namespace {

QString defaultName(const RunRecord& run) {
  const QString number = run.id > 0 ? QStringLiteral("#%1").arg(run.id)
                                     : RunHistory::tr("unrecorded %1").arg(-run.id);
  if (run.kind == QLatin1String("compress")) return QStringLiteral("%1 %2").arg(number, describeRecipe(run.recipeJson));
  const QString about = !run.modelDir.isEmpty() ? QFileInfo(run.modelDir).fileName() : run.device;
  return about.isEmpty() ? QStringLiteral("%1 %2").arg(number, run.kind)
                         : QStringLiteral("%1 %2 · %3").arg(number, run.kind, about);
}

}  // namespace

int RunHistory::add(RunRecord run) {
  if (run.id <= 0) run.id = nextUnrecordedId_--;
  if (run.name.isEmpty()) run.name = defaultName(run);
  for (size_t row = 0; row < runs_.size(); ++row) {
    RunRecord& known = runs_[row];
    if (known.id != run.id) continue;
    if (!run.drift) run.drift = known.drift;
    if (!run.discrepancy) run.discrepancy = known.discrepancy;
    if (run.driftAbsent.isEmpty()) run.driftAbsent = known.driftAbsent;
    known = std::move(run);
    emit dataChanged(index(int(row), 0), index(int(row), ColumnCount - 1));
    emit runChanged(known.id);
    return known.id;
  }
  const int row = int(runs_.size());
  beginInsertRows({}, row, row);
  runs_.push_back(std::move(run));
  endInsertRows();
  emit runAdded(runs_.back().id);
  return runs_.back().id;
}

QString RunHistory::modelLabel(const QString& modelKey) const {
  for (auto it = runs_.rbegin(); it != runs_.rend(); ++it)
    if (it->modelKey() == modelKey && !it->modelDir.isEmpty()) return QFileInfo(it->modelDir).fileName();
  return modelKey.isEmpty() ? tr("(no model)") : modelKey;
}

QStringList RunHistory::modelKeys() const {
  QStringList keys;
  for (auto it = runs_.rbegin(); it != runs_.rend(); ++it)
    if (!keys.contains(it->modelKey())) keys << it->modelKey();
  return keys;
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

void RunHistory::setMeasured(const QMap<QString, double>& byFolder) {
  for (size_t row = 0; row < runs_.size(); ++row) {
    RunRecord& r = runs_[row];
    const auto it = byFolder.find(r.outDir);
    if (!r.isFinishedCompress() || it == byFolder.end() || r.metric(kMeasuredTokensPerSecond) == *it) continue;
    r.metrics[kMeasuredTokensPerSecond] = *it;
    emit dataChanged(index(int(row), 0), index(int(row), ColumnCount - 1));
    emit runChanged(r.id);
  }
}

bool RunHistory::isDeltaColumn(int column) {
  return column == DeltaBitsColumn || column == DeltaPerplexityColumn || column == DeltaDecodeNllColumn ||
         column == DeltaTokensPerSecondColumn;
}

void RunHistory::setLabel(int id, const QString& tag, const QString& note) {
  for (size_t row = 0; row < runs_.size(); ++row) {
    RunRecord& r = runs_[row];
    if (r.id != id) continue;
    if (r.tag == tag && r.note == note) return;
    r.tag = tag;
    r.note = note;
    emit dataChanged(index(int(row), 0), index(int(row), ColumnCount - 1));
    emit runChanged(id);
    emit labelEdited(id, tag, note);
    return;
  }
}

Qt::ItemFlags RunHistory::flags(const QModelIndex& index) const {
  Qt::ItemFlags f = QAbstractTableModel::flags(index);
  // Only a stored run's label can be kept (an unrecorded run has no row to hold it).
  if (index.isValid() && (index.column() == TagColumn || index.column() == NoteColumn) &&
      index.row() < int(runs_.size()) && runs_[size_t(index.row())].id > 0)
    f |= Qt::ItemIsEditable;
  return f;
}

bool RunHistory::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (role != Qt::EditRole || !(flags(index) & Qt::ItemIsEditable)) return false;
  const RunRecord& r = runs_[size_t(index.row())];
  QString text = value.toString();
  if (index.column() == TagColumn) text = text.simplified();   // a tag is one line
  setLabel(r.id, index.column() == TagColumn ? text : r.tag, index.column() == NoteColumn ? text : r.note);
  return true;
}

std::string RunHistory::columnMetric(int column) {
  switch (column) {
    case BitsColumn:
    case DeltaBitsColumn: return metric::kLinearBitsPerWeight;
    case SizeColumn: return metric::kBytes;
    case PerplexityColumn:
    case DeltaPerplexityColumn: return metric::kPerplexity;
    case DecodeNllColumn:
    case DeltaDecodeNllColumn: return metric::kDecodeNll;
    case Top1Column: return metric::kTop1Agreement;
    case KlColumn: return metric::kKlMean;
    case KlP99Column: return metric::kKlP99;
    case DecodeKlColumn: return metric::kDecodeKlMean;
    case DecodeKlP99Column: return metric::kDecodeKlP99;
    case TokensPerSecondColumn:
    case DeltaTokensPerSecondColumn: return metric::kPredictedTokensPerSecond;
    case MeasuredTokensPerSecondColumn: return kMeasuredTokensPerSecond;
    default: return {};
  }
}

int RunHistory::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(runs_.size()); }

int RunHistory::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RunHistory::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= int(runs_.size())) return {};
  const RunRecord& run = runs_[size_t(index.row())];
  if (role == RunIdRole) return run.id;
  if (role == ModelKeyRole) return run.modelKey();
  if (role == KindRole) return run.kind;
  if (role == StatusRole) return run.status;
  const std::string key = columnMetric(index.column());
  if (!key.empty() && isDeltaColumn(index.column())) {
    const double dense = run.metric(denseMetricOf(key)), delta = run.metric(key) - dense;
    if (role == Qt::DisplayRole) return formatDelta(key, delta);
    if (role == SortRole) return std::isnan(delta) ? std::numeric_limits<double>::infinity() : delta;
    if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole && !std::isnan(delta))
      return tr("%1 − dense %2 = %3").arg(formatMetric(key, run.metric(key)), formatMetric(key, dense),
                                           formatDelta(key, delta));
    return {};
  }
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
      // Store ids grow with time; unrecorded runs are this session's, so newer than any stored one.
      if (role == SortRole) return run.id > 0 ? double(run.id) : 1e12 - double(run.id);
      if (role == Qt::ToolTipRole)
        return run.id > 0 ? tr("%1\nrun %2 of the run store (`pareto-cli runs show %2`)\nmodel: %3\noutput: %4")
                                .arg(run.name).arg(run.id).arg(run.modelDir, run.outDir)
                          : tr("%1\nnot recorded in the run store\nmodel: %2\noutput: %3").arg(run.name, run.modelDir, run.outDir);
      break;
    case TagColumn:
      if (role == Qt::DisplayRole || role == Qt::EditRole || role == SortRole) return run.tag;
      if (role == Qt::ToolTipRole && run.id > 0) return tr("Double-click to set this run's tag.");
      break;
    case NoteColumn:
      if (role == Qt::DisplayRole) return run.note.section('\n', 0, 0);
      if (role == Qt::EditRole || role == SortRole) return run.note;
      if (role == Qt::ToolTipRole) return run.note.isEmpty() && run.id > 0 ? tr("Double-click to write a note.") : run.note;
      break;
    case ModelColumn:
      if (role == Qt::DisplayRole || role == SortRole)
        return run.modelDir.isEmpty() ? QStringLiteral("—") : QFileInfo(run.modelDir).fileName();
      if (role == Qt::ToolTipRole)
        return run.modelHash.isEmpty() ? run.modelDir : tr("%1\ncontent hash %2").arg(run.modelDir, run.modelHash);
      break;
    case KindColumn:
      if (role == Qt::DisplayRole || role == SortRole) return run.kind;
      break;
    case StatusColumn:
      if (role == Qt::DisplayRole || role == SortRole) return run.status;
      if (role == Qt::ToolTipRole && !run.error.isEmpty()) return run.error;
      break;
    case RecipeColumn:
      if (role == Qt::DisplayRole || role == SortRole) return describeRecipe(run.recipeJson);
      if (role == Qt::ToolTipRole) return QString::fromStdString(run.recipeJson);
      break;
    case FinishedColumn:
      if (role == Qt::DisplayRole)
        return run.finishedAt.isValid() ? run.finishedAt.toString(QStringLiteral("yyyy-MM-dd HH:mm")) : QStringLiteral("—");
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
  if (!key.empty() && isDeltaColumn(section)) {
    const MetricInfo* info = findMetric(key);
    if (role == Qt::DisplayRole) return tr("Δ %1").arg(info->caption);
    if (role == Qt::ToolTipRole)
      return tr("%1 minus the dense model's, both measured in the same run (%2 is better).")
          .arg(info->caption, info->lowerIsBetter ? tr("negative") : tr("positive"));
    return {};
  }
  if (!key.empty()) {
    const MetricInfo* info = findMetric(key);
    if (role == Qt::DisplayRole) return info->caption;
    if (role == Qt::ToolTipRole) return info->meaning;
    return {};
  }
  switch (section) {
    case NameColumn:
      if (role == Qt::DisplayRole) return tr("Run");
      if (role == Qt::ToolTipRole)
        return tr("The run's id in the run store (what `pareto-cli runs show` takes) and a short description of its "
                  "recipe.");
      break;
    case TagColumn:
      if (role == Qt::DisplayRole) return tr("Tag");
      if (role == Qt::ToolTipRole)
        return tr("Your tag for the run (double-click to edit); kept in the run store, listed by `pareto-cli runs`.");
      break;
    case NoteColumn:
      if (role == Qt::DisplayRole) return tr("Note");
      if (role == Qt::ToolTipRole)
        return tr("Your note on the run (double-click to edit); kept in the run store, shown by `pareto-cli runs "
                  "show`.");
      break;
    case ModelColumn:
      if (role == Qt::DisplayRole) return tr("Model");
      if (role == Qt::ToolTipRole)
        return tr("The source model the run is about; runs of one model (one content hash) share a Pareto front.");
      break;
    case KindColumn:
      if (role == Qt::DisplayRole) return tr("Kind");
      if (role == Qt::ToolTipRole) return tr("What the run did, as the run store names it: compress, bench, perplexity …");
      break;
    case StatusColumn:
      if (role == Qt::DisplayRole) return tr("Status");
      if (role == Qt::ToolTipRole)
        return tr("finished, failed, cancelled, running, or interrupted (its process is gone); a failed run's "
                  "tooltip says why.");
      break;
    case RecipeColumn:
      if (role == Qt::DisplayRole) return tr("Recipe");
      if (role == Qt::ToolTipRole)
        return tr("Pruning and quantization of the recipe; the tooltip of a cell shows the recipe's JSON.");
      break;
    case FinishedColumn:
      if (role == Qt::DisplayRole) return tr("Finished");
      if (role == Qt::ToolTipRole) return tr("When the run ended (local time).");
      break;
    default:
      break;
  }
  return {};
}

}  // namespace pareto
