// The Model dock's content: what `pareto-cli inspect` shows about a model folder (architecture, size, shape
// of the network, files) and a sortable, filterable table of its tensors.
#pragma once

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
  void clear();
  // The device models run on ("CPU", "NVIDIA H200 (cuda:0)"); independent of the model, so clear() keeps it.
  void setDevice(const QString& device);

  // The tensor table as shown (sorted and filtered); columns are TensorColumn.
  QAbstractItemModel* tensorTable() const;
  enum TensorColumn { NameColumn, DtypeColumn, ShapeColumn, ParametersColumn, BytesColumn, ColumnCount };

 private:
  // A value field of the form; `key` is its object name, so tests and later code can find it.
  QLabel* addMetric(const QString& key, const QString& caption, const QString& meaning);
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
};

}  // namespace pareto
