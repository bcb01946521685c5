#include "widgets/ModelSummaryView.h"

#include <QFormLayout>
#include <QGroupBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTreeView>
#include <QVBoxLayout>
#include <algorithm>
#include <vector>

#include "widgets/DisplayFormat.h"

namespace pareto {

namespace {

const QString kNoValue = QStringLiteral("—");

QString qs(const std::string& s) { return QString::fromStdString(s); }

QString dtypeDescription(const std::string& dtype) {
  if (dtype == "BF16") return "BF16 (bfloat16, 2 bytes per weight)";
  if (dtype == "F16") return "F16 (IEEE half, 2 bytes per weight)";
  if (dtype == "F32") return "F32 (float32, 4 bytes per weight)";
  return qs(dtype);
}

QString kvHeadsDescription(int64_t heads, int64_t kvHeads) {
  QString text = QString::number(kvHeads);
  if (kvHeads <= 0 || heads <= 0) return text;
  if (kvHeads == heads) return text + " (multi-head attention: one per query head)";
  if (kvHeads == 1) return text + " (multi-query attention: shared by all query heads)";
  if (heads % kvHeads == 0)
    return text + QString(" (grouped-query attention: %1 query heads share each)").arg(heads / kvHeads);
  return text;
}

// "4.188 bits per weight over the block linears" and a line per format in first-seen order, e.g.
// "int4-g128: 28 modules (act-order)" or "… (act-order in 7)" when only some are.
QString compressionDescription(const ModelSummary& s) {
  if (!s.compressed) return "none (dense checkpoint)";
  struct Count {
    QString format;
    int modules = 0, actOrder = 0;
  };
  std::vector<Count> counts;
  for (const auto& m : s.modules) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const Count& c) { return c.format == qs(m.format); });
    if (it == counts.end()) it = counts.insert(counts.end(), Count{qs(m.format)});
    ++it->modules;
    if (m.actOrder) ++it->actOrder;
  }
  QStringList lines{QString("%1 bits per weight over the block linears").arg(s.linearBitsPerWeight, 0, 'f', 3)};
  for (const Count& c : counts) {
    QString line = QString("%1: %2 module%3").arg(c.format).arg(c.modules).arg(c.modules == 1 ? "" : "s");
    if (c.actOrder == c.modules) line += " (act-order)";
    else if (c.actOrder > 0) line += QString(" (act-order in %1)").arg(c.actOrder);
    lines << line;
  }
  return lines.join("\n");
}

int64_t elementCount(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

QStandardItem* cell(const QString& text, const QVariant& sortKey, Qt::Alignment alignment = Qt::AlignLeft) {
  auto* item = new QStandardItem(text);
  item->setData(sortKey, Qt::UserRole);
  item->setTextAlignment(alignment | Qt::AlignVCenter);
  item->setEditable(false);
  return item;
}

}  // namespace

ModelSummaryView::ModelSummaryView(QWidget* parent) : QWidget(parent) {
  auto* modelBox = new QGroupBox(tr("Summary"));
  form_ = new QFormLayout(modelBox);
  form_->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);

  path_ = new QLineEdit;
  path_->setObjectName("path");
  path_->setReadOnly(true);
  path_->setFrame(false);
  path_->setPlaceholderText(tr("No model loaded"));
  const QString pathMeaning = tr("The model folder that was read (config.json and its safetensors files).");
  path_->setToolTip(pathMeaning);
  auto* pathCaption = new QLabel(tr("Folder:"));
  pathCaption->setToolTip(pathMeaning);
  form_->addRow(pathCaption, path_);

  architecture_ =
      addMetric("architecture", tr("Architecture:"),
                tr("The model class named in config.json (architectures) and its model_type. It decides "
                   "how the weights are wired together."));
  parameters_ =
      addMetric("parameters", tr("Parameters:"),
                tr("Number of weights stored in the checkpoint, summed over every tensor. An output head "
                   "tied to the embedding shares its weights and is counted once."));
  size_ =
      addMetric("size", tr("Size:"),
                tr("Bytes of weight data on disk: the tensors themselves, without file headers or config."));
  dtype_ = addMetric("dtype", tr("Storage type:"),
                     tr("The number format holding most of the weight bytes: BF16 (bfloat16), F16 (IEEE half "
                        "precision) or F32 (single precision)."));
  device_ = addMetric("device", tr("Device:"),
                      tr("Where the workbench runs models for compression, evaluation and generation: the CPU or "
                         "a CUDA GPU (by name). Choose it above."));
  device_->setText(tr("CPU"));
  layers_ =
      addMetric("layers", tr("Layers:"),
                tr("Number of transformer decoder blocks (num_hidden_layers), each an attention and an MLP."));
  hidden_ =
      addMetric("hidden", tr("Hidden size:"),
                tr("Width of the residual stream (hidden_size): the length of the vector each token carries "
                   "from block to block."));
  ffn_ =
      addMetric("ffn", tr("FFN size:"),
                tr("Inner width of each block's MLP (intermediate_size): gate and up project the hidden vector "
                   "to this width, down projects it back."));
  heads_ =
      addMetric("heads", tr("Attention heads:"), tr("Query heads per attention layer (num_attention_heads)."));
  kvHeads_ =
      addMetric("kvHeads", tr("KV heads:"),
                tr("Key/value heads per attention layer (num_key_value_heads). Fewer than the query heads "
                   "means grouped-query attention: several query heads share one key/value head, which "
                   "shrinks the KV cache by that factor."));
  headDim_ =
      addMetric("headDim", tr("Head dimension:"),
                tr("Width of each attention head (head_dim): hidden size / heads unless config.json says "
                   "otherwise."));
  vocab_ = addMetric("vocab", tr("Vocabulary:"),
                     tr("Number of token ids the embedding and the output head cover (vocab_size)."));
  tied_ =
      addMetric("tiedEmbeddings", tr("Tied embeddings:"),
                tr("Whether the output head reuses the input embedding matrix (tie_word_embeddings). When it "
                   "does, the checkpoint has no separate lm_head.weight."));
  compression_ = addMetric(
      "compression", tr("Compression:"),
      tr("For a compressed folder (pareto.json): the bits per weight over the block linears, and each storage "
         "format with its number of modules. \"act-order\" marks GPTQ modules quantized in order of decreasing "
         "Hessian diagonal; that order is stored beside the codes (<module>.weight.qperm, for information: the "
         "codes stay in the original column order)."));
  compression_->setWordWrap(true);
  files_ = addMetric("files", tr("Files:"), tr("The safetensors files the weights were read from."));
  files_->setWordWrap(true);

  auto* tensorBox = new QGroupBox(tr("Tensors"));
  auto* tensorLayout = new QVBoxLayout(tensorBox);
  auto* filterRow = new QHBoxLayout;
  filter_ = new QLineEdit;
  filter_->setObjectName("tensorFilter");
  filter_->setPlaceholderText(tr("Filter by name, e.g. layers.0. or mlp"));
  filter_->setClearButtonEnabled(true);
  filter_->setToolTip(tr("Show only the tensors whose name contains this text (case-insensitive)."));
  tensorCount_ = new QLabel;
  tensorCount_->setObjectName("tensorCount");
  tensorCount_->setToolTip(tr("Number of tensors in the checkpoint (and how many the filter shows)."));
  filterRow->addWidget(filter_, 1);
  filterRow->addWidget(tensorCount_);
  tensorLayout->addLayout(filterRow);

  tensors_ = new QStandardItemModel(0, ColumnCount, this);
  const struct {
    QString title, meaning;
  } columns[ColumnCount] = {
      {tr("Name"), tr("The tensor's name in the checkpoint.")},
      {tr("Dtype"), tr("How the tensor's numbers are stored: BF16, F16 or F32.")},
      {tr("Shape"), tr("The tensor's dimensions, outermost first. Sorting uses the element count.")},
      {tr("Parameters"), tr("Number of elements (weights) in the tensor.")},
      {tr("Bytes"), tr("Bytes the tensor's data takes on disk.")},
  };
  for (int c = 0; c < ColumnCount; ++c) {
    tensors_->setHeaderData(c, Qt::Horizontal, columns[c].title, Qt::DisplayRole);
    tensors_->setHeaderData(c, Qt::Horizontal, columns[c].meaning, Qt::ToolTipRole);
  }
  sortedTensors_ = new QSortFilterProxyModel(this);
  sortedTensors_->setSourceModel(tensors_);
  sortedTensors_->setSortRole(Qt::UserRole);  // numbers sort as numbers, names naturally
  sortedTensors_->setFilterKeyColumn(NameColumn);
  sortedTensors_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
    sortedTensors_->setFilterFixedString(text);
    updateTensorCount();
  });

  tensorView_ = new QTreeView;
  tensorView_->setObjectName("tensorView");
  tensorView_->setModel(sortedTensors_);
  tensorView_->setRootIsDecorated(false);
  tensorView_->setUniformRowHeights(true);  // thousands of rows for large models
  tensorView_->setAlternatingRowColors(true);
  tensorView_->setTextElideMode(Qt::ElideMiddle);  // the layer number and the module both matter
  tensorView_->setSortingEnabled(true);
  tensorView_->sortByColumn(NameColumn, Qt::AscendingOrder);
  tensorView_->setSelectionBehavior(QAbstractItemView::SelectRows);
  tensorView_->header()->setStretchLastSection(false);
  tensorView_->header()->setSectionResizeMode(NameColumn, QHeaderView::Stretch);
  for (int c = DtypeColumn; c < ColumnCount; ++c)
    tensorView_->header()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
  tensorLayout->addWidget(tensorView_);

  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(modelBox);
  splitter->addWidget(tensorBox);
  splitter->setStretchFactor(0, 0);
  splitter->setStretchFactor(1, 1);
  splitter->setChildrenCollapsible(false);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(splitter);

  clear();
}

QLabel* ModelSummaryView::addMetric(const QString& key, const QString& caption, const QString& meaning) {
  auto* captionLabel = new QLabel(caption);
  captionLabel->setToolTip(meaning);
  auto* value = new QLabel;
  value->setObjectName(key);
  value->setToolTip(meaning);
  value->setTextInteractionFlags(Qt::TextSelectableByMouse);
  value->setWordWrap(true);   // a long value wraps rather than widen the Model dock past its buttons
  form_->addRow(captionLabel, value);
  return value;
}

void ModelSummaryView::setMeaning(QWidget* field, const QString& meaning) {
  field->setToolTip(meaning);
  if (QWidget* caption = form_->labelForField(field)) caption->setToolTip(meaning);
}

void ModelSummaryView::restoreFolderCaptions() {
  if (!synthetic_) return;
  synthetic_ = false;
  for (auto it = folderMeanings_.constBegin(); it != folderMeanings_.constEnd(); ++it) setMeaning(it.key(), it.value());
  if (auto* caption = qobject_cast<QLabel*>(form_->labelForField(path_))) caption->setText(tr("Folder:"));
}

void ModelSummaryView::setSyntheticSummary(const ModelSummary& s, const QString& preset) {
  setSummary(s);
  synthetic_ = true;
  for (QWidget* field : std::initializer_list<QWidget*>{path_, architecture_, parameters_, size_, dtype_, files_})
    folderMeanings_.insert(field, field->toolTip());
  if (auto* caption = qobject_cast<QLabel*>(form_->labelForField(path_))) caption->setText(tr("Synthetic:"));
  path_->setText(tr("%1 (published configuration, random weights)").arg(preset));
  path_->setCursorPosition(0);
  setMeaning(path_, tr("A synthetic model: the published config.json of %1, built into Pareto, with random weights "
                       "made on the device when a benchmark runs. Its speed is the real model's; its outputs are "
                       "noise, so it cannot be compressed or evaluated.")
                        .arg(preset));
  setMeaning(architecture_, tr("The model class and model_type of the published configuration of %1.").arg(preset));
  setMeaning(parameters_,
             tr("Number of weights of the published configuration, counted from its shapes (no file is read): the "
                "embedding, every layer's attention and MLP weights, biases and norms, the final norm and the "
                "output head unless it is tied to the embedding."));
  size_->setText(tr("%1 (at fp16)").arg(display::bytes(s.bytes)));
  setMeaning(size_, tr("Bytes the weights take at 16 bits per weight (fp16 or bf16: 2 bytes each), parameters × 2: "
                       "the size of the published checkpoint. Nothing is stored on disk."));
  setMeaning(dtype_, tr("The torch_dtype of the published configuration. Synthetic weights are made in float16 on "
                        "CUDA and bfloat16 on the CPU (2 bytes per weight either way)."));
  files_->setText(tr("none: random weights, made when a benchmark runs"));
  setMeaning(files_, tr("A synthetic model has no files: its weights are random and made on the device."));
}

void ModelSummaryView::setSummary(const ModelSummary& s) {
  restoreFolderCaptions();
  path_->setText(qs(s.path));
  path_->setCursorPosition(0);
  architecture_->setText(s.modelType.empty() ? qs(s.architecture)
                                             : QString("%1 (%2)").arg(qs(s.architecture), qs(s.modelType)));
  parameters_->setText(display::count(s.parameters));
  size_->setText(display::bytes(s.bytes));
  dtype_->setText(dtypeDescription(s.dtype));
  layers_->setText(display::integer(s.numLayers));
  hidden_->setText(display::integer(s.hiddenSize));
  ffn_->setText(display::integer(s.intermediateSize));
  heads_->setText(display::integer(s.numHeads));
  kvHeads_->setText(kvHeadsDescription(s.numHeads, s.numKvHeads));
  headDim_->setText(display::integer(s.headDim));
  vocab_->setText(display::integer(s.vocabSize));
  tied_->setText(s.tiedEmbeddings ? tr("yes (no separate lm_head.weight)") : tr("no"));
  compression_->setText(compressionDescription(s));
  QStringList files;
  for (const auto& f : s.files) files << qs(f);
  files_->setText(files.isEmpty() ? kNoValue : files.join("\n"));

  // Filled with sorting off: re-sorting after every inserted row is quadratic.
  tensorView_->setSortingEnabled(false);
  tensors_->removeRows(0, tensors_->rowCount());
  for (const auto& t : s.tensors) {
    const QString name = qs(t.name);
    const qlonglong numel = elementCount(t.shape);
    QStandardItem* nameCell = cell(name, display::naturalSortKey(name));
    nameCell->setToolTip(name);
    tensors_->appendRow({nameCell, cell(qs(t.dtype), qs(t.dtype)), cell(display::shape(t.shape), numel),
                         cell(display::integer(numel), numel, Qt::AlignRight),
                         cell(display::bytes(t.bytes), qulonglong(t.bytes), Qt::AlignRight)});
  }
  tensorView_->setSortingEnabled(true);
  updateTensorCount();
}

void ModelSummaryView::clear() {
  restoreFolderCaptions();
  path_->clear();
  for (QLabel* value : {architecture_, parameters_, size_, dtype_, layers_, hidden_, ffn_, heads_, kvHeads_,
                        headDim_, vocab_, tied_, compression_, files_})
    value->setText(kNoValue);
  tensors_->removeRows(0, tensors_->rowCount());
  updateTensorCount();
}

void ModelSummaryView::setDevice(const QString& device) { device_->setText(device); }

QAbstractItemModel* ModelSummaryView::tensorTable() const { return sortedTensors_; }

void ModelSummaryView::updateTensorCount() {
  const int total = tensors_->rowCount();
  const int shown = sortedTensors_->rowCount();
  if (total == 0)
    tensorCount_->setText(tr("no tensors"));
  else if (shown == total)
    tensorCount_->setText(tr("%1 tensors").arg(total));
  else
    tensorCount_->setText(tr("%1 of %2 tensors").arg(shown).arg(total));
}

}  // namespace pareto
