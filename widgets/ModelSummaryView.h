// The Model dock's content: what `pareto-cli inspect` shows about a model folder (architecture, size, shape
// of the network, files) and a sortable, filterable table of its tensors. A synthetic model (a published
// configuration with random weights, for benchmarks) is shown the same way, with captions and tooltips that say
// its numbers come from the configuration and no file was read.
#pragma once

#include <QHash>
#include <QWidget>

#include "model/ModelSummary.h"

class QAbstractItemModel;
class QFormLayout;
class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTreeView;

namespace pareto {

class ModelSummaryView : public QWidget {
  Q_OBJECT

 public:
  explicit ModelSummaryView(QWidget* parent = nullptr);

  void setSummary(const ModelSummary& summary);
  // A synthetic model: `summary` made from the published configuration `preset` (its tensors as a checkpoint of
  // it would hold them, 2 bytes per weight).
  void setSyntheticSummary(const ModelSummary& summary, const QString& preset);
  bool isSynthetic() const { return synthetic_; }
  void clear();
  // The device models run on ("CPU", "NVIDIA H200 (cuda:0)"); independent of the model, so clear() keeps it.
  void setDevice(const QString& device);

  // The tensor table as shown (sorted and filtered); columns are TensorColumn.
  QAbstractItemModel* tensorTable() const;
  enum TensorColumn { NameColumn, DtypeColumn, ShapeColumn, ParametersColumn, BytesColumn, ColumnCount };

 private:
  // A value field of the form; `key` is its object name, so tests and later code can find it.
  QLabel* addMetric(const QString& key, const QString& caption, const QString& meaning);
  // Sets the tooltip of a form field and of its caption.
  void setMeaning(QWidget* field, const QString& meaning);
  void restoreFolderCaptions();
  void updateTensorCount();

  QFormLayout* form_ = nullptr;
  QLineEdit* path_ = nullptr;
  QLabel* architecture_ = nullptr;
  QLabel* parameters_ = nullptr;
  QLabel* size_ = nullptr;
  QLabel* dtype_ = nullptr;
  QLabel* device_ = nullptr;
  QLabel* layers_ = nullptr;
  QLabel* hidden_ = nullptr;
  QLabel* ffn_ = nullptr;
  QLabel* heads_ = nullptr;
  QLabel* kvHeads_ = nullptr;
  QLabel* headDim_ = nullptr;
  QLabel* vocab_ = nullptr;
  QLabel* tied_ = nullptr;
  QLabel* compression_ = nullptr;   // compressed folders: bits per weight and formats (with act-order)
  QLabel* files_ = nullptr;
  QLabel* tensorCount_ = nullptr;
  QLineEdit* filter_ = nullptr;
  QStandardItemModel* tensors_ = nullptr;
  QSortFilterProxyModel* sortedTensors_ = nullptr;
  QTreeView* tensorView_ = nullptr;
  bool synthetic_ = false;
  QHash<QWidget*, QString> folderMeanings_;   // the tooltips of a folder's fields, restored after a synthetic model
};

}  // namespace pareto
