#include "widgets/RecipePanel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QSaveFile>
#include <QSlider>
#include <QSpinBox>
#include <QTableWidget>
#include <QToolButton>
#include <QUndoCommand>
#include <QUndoStack>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "compress/Recipe.h"
#include "util/Error.h"
#include "util/Json.h"
#include "widgets/DisplayFormat.h"
#include "widgets/FormCaptions.h"

namespace pareto {

using nlohmann::json;

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QVariantMap defaultValues() {
  return {{RecipePanel::kCalibrationSource, "text"},
          {RecipePanel::kCalibrationFile, QString()},
          {RecipePanel::kCalibrationTokens, 16384},
          {RecipePanel::kCalibrationWindow, 512},
          {RecipePanel::kCalibrationMaxNewTokens, 128},
          {RecipePanel::kCalibrationSeed, 0},
          {RecipePanel::kPruneMethod, "none"},
          {RecipePanel::kPrunePattern, "2:4"},
          {RecipePanel::kPruneSparsity, 0.5},
          {RecipePanel::kQuantMethod, "none"},
          {RecipePanel::kQuantBits, 4},
          {RecipePanel::kQuantGranularity, "group"},
          {RecipePanel::kQuantGroupSize, "128"},
          {RecipePanel::kQuantSymmetric, true},
          {RecipePanel::kQuantActOrder, false},
          {RecipePanel::kQuantOutlierRatio, 0.01},
          {RecipePanel::kQuantScaleBits, 3}};
}

bool methodNeedsCalibration(const QString& prune, const QString& quant) {
  return (prune != "none" && prune != "magnitude") || (quant != "none" && quant != "rtn");
}

// Keys kept from a loaded recipe that no longer apply once the methods change are dropped, so that the recipe
// stays one the parser accepts (static_groups is gptq-only, outlier_threshold spqr-only).
json consistentKept(const QVariantMap& v, json kept) {
  const QString prune = v.value(RecipePanel::kPruneMethod).toString();
  const QString quant = v.value(RecipePanel::kQuantMethod).toString();
  if (prune == "none") kept.erase("prune");
  if (quant == "none") kept.erase("quantize");
  if (kept.contains("quantize")) {
    json& q = kept["quantize"];
    if (quant != "gptq") q.erase("static_groups");
    if (quant != "spqr") q.erase("outlier_threshold");
    if (q.empty()) kept.erase("quantize");
  }
  return kept;
}

// Edits that bring other values along, so that a method starts from its usual settings (SpQR: 3-bit codes in
// groups of 16, asymmetric, as the parser's defaults; back to int4 g128 symmetric when leaving it).
void applyCompanionValues(const QString& key, const QVariant& before, QVariantMap& v) {
  if (key != RecipePanel::kQuantMethod) return;
  const QString now = v.value(key).toString();
  if (now == "spqr") {
    v[RecipePanel::kQuantBits] = 3;
    v[RecipePanel::kQuantGroupSize] = "16";
    v[RecipePanel::kQuantGranularity] = "group";
    v[RecipePanel::kQuantSymmetric] = false;
  } else if (before.toString() == "spqr") {
    v[RecipePanel::kQuantBits] = 4;
    v[RecipePanel::kQuantGroupSize] = "128";
    v[RecipePanel::kQuantSymmetric] = true;
  }
}

QString granularityName(QuantSpec::Granularity g) {
  switch (g) {
    case QuantSpec::Granularity::Tensor: return "tensor";
    case QuantSpec::Granularity::Channel: return "channel";
    case QuantSpec::Granularity::Group: return "group";
  }
  return "group";
}

const QString kNoValue = QStringLiteral("—");
const QString kDenseOverride = QStringLiteral("dense");

// The Advanced section's keys: the recipe section and key each sets, and the value the parser takes when the
// recipe leaves it out (compress/Recipe.h).
struct KeptNumber {
  const char* section;
  const char* key;
  double defaultValue;
  bool integer;
};
const std::map<QString, KeptNumber>& keptNumbers() {
  static const std::map<QString, KeptNumber> numbers = {
      {RecipePanel::kPruneDamp, {"prune", "damp", 0.01, false}},
      {RecipePanel::kPruneBlock, {"prune", "block", 128, true}},
      {RecipePanel::kQuantDamp, {"quantize", "damp", 0.01, false}},
      {RecipePanel::kQuantBlock, {"quantize", "block", 128, true}},
      {RecipePanel::kQuantOutlierThreshold, {"quantize", "outlier_threshold", 0, false}}};
  return numbers;
}

// How an undo step names the value it changes ("Undo Change Sparsity").
QString fieldCaption(const QString& key) {
  static const std::map<QString, const char*> captions = {
      {RecipePanel::kCalibrationSource, "Calibration Source"},  {RecipePanel::kCalibrationFile, "Calibration File"},
      {RecipePanel::kCalibrationTokens, "Calibration Tokens"},  {RecipePanel::kCalibrationWindow, "Calibration Window"},
      {RecipePanel::kCalibrationMaxNewTokens, "Max New Tokens"}, {RecipePanel::kCalibrationSeed, "Seed"},
      {RecipePanel::kPruneMethod, "Pruning Method"},            {RecipePanel::kPrunePattern, "Pattern"},
      {RecipePanel::kPruneSparsity, "Sparsity"},                {RecipePanel::kQuantMethod, "Quantization Method"},
      {RecipePanel::kQuantBits, "Bits"},                        {RecipePanel::kQuantGranularity, "Granularity"},
      {RecipePanel::kQuantGroupSize, "Group Size"},             {RecipePanel::kQuantSymmetric, "Symmetric"},
      {RecipePanel::kQuantActOrder, "Act-Order"},               {RecipePanel::kQuantOutlierRatio, "Outliers"},
      {RecipePanel::kQuantScaleBits, "Scale Bits"},              {RecipePanel::kPruneDamp, "SparseGPT Damping"},
      {RecipePanel::kPruneBlock, "SparseGPT Block"},            {RecipePanel::kQuantDamp, "GPTQ/SpQR Damping"},
      {RecipePanel::kQuantBlock, "GPTQ/SpQR Block"},            {RecipePanel::kQuantOutlierThreshold, "Outlier Threshold"},
      {"overrides", "Overrides"}};
  auto it = captions.find(key);
  return it == captions.end() ? key : RecipePanel::tr(it->second);
}

}  // namespace

// One undo step: the panel's whole state before and after. States are a few dozen small values, so keeping
// both whole is simpler than per-key inverse logic and makes merged drags trivially correct.
class SetRecipeValuesCommand : public QUndoCommand {
 public:
  SetRecipeValuesCommand(RecipePanel* panel, QVariantMap before, json keptBefore, QVariantMap after,
                         json keptAfter, QString key, int drag, const QString& text)
      : QUndoCommand(text),
        panel_(panel),
        before_(std::move(before)),
        after_(std::move(after)),
        keptBefore_(std::move(keptBefore)),
        keptAfter_(std::move(keptAfter)),
        key_(std::move(key)),
        drag_(drag) {}

  void undo() override { panel_->applyState(before_, keptBefore_); }
  void redo() override { panel_->applyState(after_, keptAfter_); }
  int id() const override { return 1; }
  bool mergeWith(const QUndoCommand* other) override {
    const auto* o = static_cast<const SetRecipeValuesCommand*>(other);
    // Only the steps of one slider drag merge; clicks and typed values stay separate steps.
    if (drag_ == 0 || o->drag_ != drag_ || o->key_ != key_) return false;
    after_ = o->after_;
    keptAfter_ = o->keptAfter_;
    setObsolete(after_ == before_ && keptAfter_ == keptBefore_);
    return true;
  }

 private:
  RecipePanel* panel_;
  QVariantMap before_, after_;
  json keptBefore_, keptAfter_;
  QString key_;
  int drag_;
};

RecipePanel::RecipePanel(QWidget* parent) : QWidget(parent) {
  undo_ = new QUndoStack(this);
  values_ = defaultValues();
  auto* layout = new QVBoxLayout(this);
  picker_ = new QComboBox;
  picker_->setObjectName("recipePicker");
  picker_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  picker_->setMinimumContentsLength(10);
  picker_->setToolTip(tr("The recipes that ship with Pareto (resources/recipes), by name; the tooltip of each says "
                         "what it does. Choosing one loads it into the controls below (undoable)."));
  pickerNote_ = new QLabel;
  pickerNote_->setObjectName("recipePickerNote");
  pickerNote_->setWordWrap(true);
  pickerNote_->setToolTip(tr("What the chosen shipped recipe does, from its description."));
  connect(picker_, qOverload<int>(&QComboBox::activated), this, [this](int index) {
    const QString path = picker_->itemData(index).toString();
    if (path.isEmpty()) return;
    QString error;
    pickerNote_->setText(loadRecipeFile(path, &error) ? picker_->itemData(index, Qt::ToolTipRole).toString() : error);
  });
  auto* pickerRow = new QHBoxLayout;
  auto* pickerCaption = new QLabel(tr("Shipped:"));
  pickerCaption->setToolTip(picker_->toolTip());
  pickerRow->addWidget(pickerCaption);
  pickerRow->addWidget(picker_, 1);
  layout->addLayout(pickerRow);
  layout->addWidget(pickerNote_);
  pickerNote_->hide();
  picker_->setEnabled(false);
  layout->addWidget(buildCalibration());
  layout->addWidget(buildPruning());
  layout->addWidget(buildQuantization());
  layout->addWidget(buildAdvanced());
  layout->addWidget(buildOverrides());
  layout->addWidget(buildEstimates());
  layout->addStretch(1);
  shareTooltipsWithCaptions(this);
  applyState(values_, kept_);
}

RecipePanel::~RecipePanel() = default;

QComboBox* RecipePanel::addCombo(const QString& key, const std::vector<std::pair<QString, QString>>& items) {
  auto* combo = new QComboBox;
  combo->setObjectName(key);
  // A long entry elides instead of widening the dock past the screen (the arrow stays visible).
  combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  combo->setMinimumContentsLength(10);
  for (const auto& [label, data] : items) combo->addItem(label, data);
  controls_[key] = {[combo] { return QVariant(combo->currentData().toString()); },
                    [combo](const QVariant& v) {
                      int i = combo->findData(v.toString());
                      if (i < 0) {   // a value from a loaded recipe that the list does not offer (e.g. 1:4)
                        combo->addItem(v.toString(), v.toString());
                        i = combo->count() - 1;
                      }
                      combo->setCurrentIndex(i);
                    }};
  connect(combo, qOverload<int>(&QComboBox::currentIndexChanged), this,
          [this, key, combo] { userEdited(key, combo->currentData().toString()); });
  return combo;
}

QSpinBox* RecipePanel::addSpin(const QString& key, int min, int max, int step) {
  auto* spin = new QSpinBox;
  spin->setObjectName(key);
  spin->setRange(min, max);
  spin->setSingleStep(step);
  spin->setGroupSeparatorShown(true);
  spin->setKeyboardTracking(false);   // typing "4096" is one edit, not four
  controls_[key] = {[spin] { return QVariant(spin->value()); }, [spin](const QVariant& v) { spin->setValue(v.toInt()); }};
  connect(spin, qOverload<int>(&QSpinBox::valueChanged), this, [this, key](int v) { userEdited(key, v); });
  return spin;
}

QCheckBox* RecipePanel::addCheck(const QString& key, const QString& text) {
  auto* box = new QCheckBox(text);
  box->setObjectName(key);
  controls_[key] = {[box] { return QVariant(box->isChecked()); }, [box](const QVariant& v) { box->setChecked(v.toBool()); }};
  connect(box, &QCheckBox::toggled, this, [this, key](bool on) { userEdited(key, on); });
  return box;
}

QWidget* RecipePanel::addPercentSlider(const QString& key, double maxPercent, int stepsPerPercent) {
  auto* row = new QWidget;
  auto* h = new QHBoxLayout(row);
  h->setContentsMargins(0, 0, 0, 0);
  auto* slider = new QSlider(Qt::Horizontal);
  slider->setObjectName(key + ".slider");
  slider->setRange(0, int(std::lround(maxPercent * stepsPerPercent)));
  slider->setPageStep(5 * stepsPerPercent);
  auto* spin = new QDoubleSpinBox;
  spin->setObjectName(key);
  spin->setRange(0, maxPercent);
  spin->setDecimals(stepsPerPercent > 1 ? 2 : 1);
  spin->setSingleStep(1.0 / stepsPerPercent);
  spin->setSuffix(" %");
  spin->setKeyboardTracking(false);
  h->addWidget(slider, 1);
  h->addWidget(spin);
  const double steps = stepsPerPercent;
  controls_[key] = {[spin] { return QVariant(spin->value() / 100.0); },
                    [slider, spin, steps](const QVariant& v) {
                      slider->setValue(int(std::lround(v.toDouble() * 100.0 * steps)));
                      spin->setValue(v.toDouble() * 100.0);
                    }};
  connect(slider, &QSlider::sliderPressed, this, [this] { activeDrag_ = ++dragSerial_; });
  connect(slider, &QSlider::sliderReleased, this, [this] { activeDrag_ = 0; });
  connect(slider, &QSlider::valueChanged, this,
          [this, key, steps](int v) { userEdited(key, double(v) / steps / 100.0); });
  connect(spin, qOverload<double>(&QDoubleSpinBox::valueChanged), this,
          [this, key](double percent) { userEdited(key, percent / 100.0); });
  return row;
}

QGroupBox* RecipePanel::buildCalibration() {
  calibrationBox_ = new QGroupBox(tr("Calibration"));
  calibrationBox_->setObjectName("calibrationGroup");
  calibrationBox_->setToolTip(
      tr("The data whose activations build each layer's Hessian. Only Wanda, SparseGPT, GPTQ and SpQR use it; "
         "magnitude pruning and RTN need none."));
  auto* form = new QFormLayout(calibrationBox_);
  QComboBox* source = addCombo(kCalibrationSource, {{tr("Text (teacher-forced windows)"), "text"},
                                                    {tr("Decode (the model's own continuations)"), "decode"}});
  source->setToolTip(
      tr("text: windows of a text file, every position counts. decode: the dense model continues each prompt "
         "greedily and only the continuation positions count (decode-aware calibration)."));
  form->addRow(tr("Source:"), source);

  auto* fileRow = new QWidget;
  auto* h = new QHBoxLayout(fileRow);
  h->setContentsMargins(0, 0, 0, 0);
  auto* file = new QLineEdit;
  file->setObjectName(kCalibrationFile);
  file->setPlaceholderText(tr("Choose a file…"));
  file->setToolTip(tr("Text source: a UTF-8 text file. Decode source: a prompts file, one prompt per line."));
  auto* browse = new QPushButton(tr("Browse…"));
  browse->setObjectName("calibration.browse");
  browse->setToolTip(tr("Choose the calibration file."));
  h->addWidget(file, 1);
  h->addWidget(browse);
  controls_[kCalibrationFile] = {[file] { return QVariant(file->text()); },
                                 [file](const QVariant& v) { file->setText(v.toString()); }};
  connect(file, &QLineEdit::editingFinished, this, [this, file] { userEdited(kCalibrationFile, file->text()); });
  connect(browse, &QPushButton::clicked, this, &RecipePanel::chooseCalibrationFile);
  calibrationFileCaption_ = new QLabel(tr("Text file:"));
  form->addRow(calibrationFileCaption_, fileRow);

  QSpinBox* tokens = addSpin(kCalibrationTokens, 1, 1 << 30, 1024);
  tokens->setToolTip(tr("Token budget: how many positions reach the Hessian (text windows, or decode steps "
                        "of the continuations)."));
  form->addRow(tr("Tokens:"), tokens);
  QSpinBox* window = addSpin(kCalibrationWindow, 2, 1 << 20, 128);
  window->setToolTip(tr("Text source: length of each teacher-forced window in tokens."));
  form->addRow(tr("Window:"), window);
  QSpinBox* maxNew = addSpin(kCalibrationMaxNewTokens, 1, 1 << 20, 16);
  maxNew->setToolTip(tr("Decode source: most tokens the dense model generates per prompt."));
  form->addRow(tr("Max new tokens:"), maxNew);
  QSpinBox* seed = addSpin(kCalibrationSeed, 0, 1 << 30, 1);
  seed->setToolTip(tr("Seed of the window / prompt order, so that a run can be repeated exactly."));
  form->addRow(tr("Seed:"), seed);
  return calibrationBox_;
}

QGroupBox* RecipePanel::buildPruning() {
  auto* box = new QGroupBox(tr("Pruning"));
  box->setObjectName("pruningGroup");
  auto* form = new QFormLayout(box);
  QComboBox* method = addCombo(kPruneMethod, {{tr("None"), "none"},
                                              {tr("Magnitude (|W|)"), "magnitude"},
                                              {tr("Wanda (|W|·‖x‖)"), "wanda"},
                                              {tr("SparseGPT (OBS)"), "sparsegpt"}});
  method->setToolTip(tr("Which weights to remove: the smallest |W| (magnitude), the smallest |W| times the "
                        "input norm (Wanda), or SparseGPT's optimal brain surgeon update with the Hessian."));
  form->addRow(tr("Method:"), method);
  // Every N:M the engine takes: M dividing 32 (a mask word holds whole groups), 0 < N < M; by M, then N.
  std::vector<std::pair<QString, QString>> patterns{{tr("Unstructured"), "unstructured"}};
  for (int m : {2, 4, 8, 16, 32})
    for (int n = 1; n < m; ++n) patterns.emplace_back(QStringLiteral("%1:%2").arg(n).arg(m), QStringLiteral("%1:%2").arg(n).arg(m));
  QComboBox* pattern = addCombo(kPrunePattern, patterns);
  pattern->setMaxVisibleItems(16);
  pattern->setToolTip(tr("N:M keeps N of every M consecutive inputs (stored as 32-bit masks, which the bitmask "
                         "kernel decodes fast); unstructured removes the given fraction anywhere."));
  form->addRow(tr("Pattern:"), pattern);
  QWidget* sparsity = addPercentSlider(kPruneSparsity, 99, 1);
  sparsity->setToolTip(tr("Unstructured: the fraction of each module's weights removed."));
  form->addRow(tr("Sparsity:"), sparsity);
  sparsityNote_ = new QLabel;
  sparsityNote_->setObjectName("sparsityNote");
  sparsityNote_->setToolTip(tr("The fraction of weights an N:M pattern removes: 1 − N/M."));
  form->addRow(QString(), sparsityNote_);
  return box;
}

QGroupBox* RecipePanel::buildQuantization() {
  auto* box = new QGroupBox(tr("Quantization"));
  box->setObjectName("quantizationGroup");
  auto* form = new QFormLayout(box);
  QComboBox* method = addCombo(kQuantMethod, {{tr("None"), "none"},
                                              {tr("RTN (round to nearest)"), "rtn"},
                                              {tr("GPTQ"), "gptq"},
                                              {tr("SpQR (with fp16 outliers)"), "spqr"}});
  method->setToolTip(tr("RTN rounds each weight on its grid; GPTQ rounds column by column and moves the error "
                        "onto the columns not yet rounded using the Hessian; SpQR does the same in small groups "
                        "with quantized statistics and keeps the most salient weights in fp16."));
  form->addRow(tr("Method:"), method);
  QSpinBox* bits = addSpin(kQuantBits, 2, 8, 1);
  bits->setToolTip(tr("Bits of each weight code."));
  form->addRow(tr("Bits:"), bits);
  QComboBox* granularity = addCombo(kQuantGranularity, {{tr("Per group of input columns"), "group"},
                                                        {tr("Per output channel"), "channel"},
                                                        {tr("Per tensor"), "tensor"}});
  granularity->setToolTip(tr("How many weights share one scale (and zero point)."));
  form->addRow(tr("Granularity:"), granularity);
  QComboBox* group = addCombo(kQuantGroupSize, {{"16", "16"}, {"32", "32"}, {"64", "64"}, {"128", "128"}, {"256", "256"}});
  group->setToolTip(tr("Input columns per group; each group stores an fp16 scale (16 bits over the group)."));
  form->addRow(tr("Group size:"), group);
  QCheckBox* symmetric = addCheck(kQuantSymmetric, tr("Symmetric (absmax, no zero point)"));
  symmetric->setToolTip(tr("Symmetric grids are centred on 0; asymmetric (min-max) grids store a zero point "
                           "per group as well (8 more bits per group)."));
  form->addRow(QString(), symmetric);
  QCheckBox* actOrder = addCheck(kQuantActOrder, tr("Act-order (largest Hessian diagonal first)"));
  actOrder->setToolTip(tr("GPTQ: quantize the columns with the largest input energy first. With groups, each "
                          "group's grid is then fixed before the sweep (static groups)."));
  form->addRow(QString(), actOrder);
  QWidget* outliers = addPercentSlider(kQuantOutlierRatio, 5, 20);
  outliers->setToolTip(tr("SpQR: fraction of weights, by saliency w²/[H⁻¹]ⱼⱼ, kept exactly in fp16 (CSR), "
                          "each costing 32 bits."));
  form->addRow(tr("Outliers:"), outliers);
  outlierNote_ = new QLabel;
  outlierNote_->setObjectName("outlierNote");
  outlierNote_->setWordWrap(true);
  outlierNote_->setToolTip(tr("How the loaded recipe selects SpQR outliers."));
  form->addRow(QString(), outlierNote_);
  QSpinBox* scaleBits = addSpin(kQuantScaleBits, 2, 8, 1);
  scaleBits->setToolTip(tr("SpQR: bits of the quantized group scales (second-level groups of 16 rows)."));
  form->addRow(tr("Scale bits:"), scaleBits);
  return box;
}

QDoubleSpinBox* RecipePanel::addKeptNumber(const QString& name, double min, double max, int decimals, double step) {
  auto* spin = new QDoubleSpinBox;
  spin->setObjectName(name);
  spin->setRange(min, max);
  spin->setDecimals(decimals);
  spin->setSingleStep(step);
  spin->setKeyboardTracking(false);
  keptControls_[name] = spin;
  const KeptNumber n = keptNumbers().at(name);
  connect(spin, qOverload<double>(&QDoubleSpinBox::valueChanged), this, [this, name, n](double v) {
    if (applying_) return;
    // The default (or 0 for the threshold: choose by ratio) leaves the key out, as a recipe written by hand would.
    if (v == n.defaultValue) keptEdited(name, nullptr);
    else keptEdited(name, n.integer ? json(int64_t(std::llround(v))) : json(v));
  });
  return spin;
}

QWidget* RecipePanel::buildAdvanced() {
  auto* section = new QWidget;
  auto* v = new QVBoxLayout(section);
  v->setContentsMargins(0, 0, 0, 0);
  auto* toggle = new QToolButton;
  toggle->setObjectName("advancedToggle");
  toggle->setText(tr("Advanced: solver damping, block size, outlier threshold"));
  toggle->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  toggle->setArrowType(Qt::RightArrow);
  toggle->setCheckable(true);
  toggle->setAutoRaise(true);
  toggle->setToolTip(tr("Settings of the Hessian-based solvers that the recipe usually leaves at their defaults."));
  advanced_ = new QGroupBox;
  advanced_->setObjectName("advancedGroup");
  auto* form = new QFormLayout(advanced_);
  QDoubleSpinBox* pruneDamp = addKeptNumber(kPruneDamp, 0.0001, 1, 4, 0.005);
  pruneDamp->setToolTip(tr("SparseGPT: damping added to the Hessian diagonal, as a fraction of its mean (default "
                           "0.01). Raise it when the solve reports an ill-conditioned Hessian."));
  form->addRow(tr("SparseGPT damping:"), pruneDamp);
  QDoubleSpinBox* pruneBlock = addKeptNumber(kPruneBlock, 1, 65536, 0, 32);
  pruneBlock->setToolTip(tr("SparseGPT: columns per lazy-update block (default 128); masks are chosen a block at "
                            "a time."));
  form->addRow(tr("SparseGPT block:"), pruneBlock);
  QDoubleSpinBox* quantDamp = addKeptNumber(kQuantDamp, 0.0001, 1, 4, 0.005);
  quantDamp->setToolTip(tr("GPTQ and SpQR: damping added to the Hessian diagonal, as a fraction of its mean "
                           "(default 0.01)."));
  form->addRow(tr("GPTQ/SpQR damping:"), quantDamp);
  QDoubleSpinBox* quantBlock = addKeptNumber(kQuantBlock, 1, 65536, 0, 32);
  quantBlock->setToolTip(tr("GPTQ and SpQR: columns per lazy-update block (default 128)."));
  form->addRow(tr("GPTQ/SpQR block:"), quantBlock);
  QDoubleSpinBox* threshold = addKeptNumber(kQuantOutlierThreshold, 0, 1e6, 4, 0.1);
  threshold->setSpecialValueText(tr("off (by ratio)"));
  threshold->setToolTip(tr("SpQR: keep in fp16 every weight whose saliency w²/[H⁻¹]ⱼⱼ exceeds this threshold, "
                           "instead of the fraction the Outliers slider gives. Off: by the fraction."));
  form->addRow(tr("SpQR outlier threshold:"), threshold);
  advanced_->setVisible(false);
  connect(toggle, &QToolButton::toggled, this, [this, toggle](bool open) {
    toggle->setArrowType(open ? Qt::DownArrow : Qt::RightArrow);
    advanced_->setVisible(open);
  });
  v->addWidget(toggle);
  v->addWidget(advanced_);
  return section;
}

QGroupBox* RecipePanel::buildOverrides() {
  auto* box = new QGroupBox(tr("Per-module overrides"));
  box->setObjectName("overridesGroup");
  box->setToolTip(tr("Modules whose names match a glob (e.g. model.layers.0.* or *.down_proj) get their own "
                     "pruning and quantization; later rows win. In each cell: — keeps the recipe's own, dense "
                     "leaves the modules unpruned (or unquantized), or a JSON block such as "
                     "{\"method\": \"rtn\", \"bits\": 8, \"granularity\": \"channel\"}."));
  auto* v = new QVBoxLayout(box);
  overridesTable_ = new QTableWidget(0, 3);
  overridesTable_->setObjectName("overridesTable");
  overridesTable_->setHorizontalHeaderLabels({tr("Modules (glob)"), tr("Pruning"), tr("Quantization")});
  overridesTable_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  overridesTable_->verticalHeader()->setVisible(false);
  overridesTable_->setSelectionBehavior(QAbstractItemView::SelectRows);
  overridesTable_->setMinimumHeight(90);
  overridesTable_->setMaximumHeight(160);
  overridesTable_->setToolTip(box->toolTip());
  // Handled once the edit has ended: taking it rebuilds the table, which must not happen inside its own signal.
  connect(overridesTable_, &QTableWidget::itemChanged, this, [this] {
    if (!applying_) QMetaObject::invokeMethod(this, [this] { overridesEdited(); }, Qt::QueuedConnection);
  });
  v->addWidget(overridesTable_);
  auto* buttons = new QHBoxLayout;
  auto* add = new QPushButton(tr("Add"));
  add->setObjectName("addOverride");
  add->setToolTip(tr("A new row: the modules of layer 0 left unquantized; edit the glob and the cells."));
  auto* remove = new QPushButton(tr("Remove"));
  remove->setObjectName("removeOverride");
  remove->setToolTip(tr("Remove the selected rows."));
  connect(add, &QPushButton::clicked, this, [this] {
    applying_ = true;
    const int row = overridesTable_->rowCount();
    overridesTable_->insertRow(row);
    overridesTable_->setItem(row, OverrideMatch, new QTableWidgetItem("model.layers.0.*"));
    overridesTable_->setItem(row, OverridePrune, new QTableWidgetItem(kNoValue));
    overridesTable_->setItem(row, OverrideQuantize, new QTableWidgetItem(kDenseOverride));
    applying_ = false;
    overridesEdited();
  });
  connect(remove, &QPushButton::clicked, this, [this] {
    QList<int> rows;
    for (const QModelIndex& i : overridesTable_->selectionModel()->selectedRows()) rows << i.row();
    if (rows.isEmpty()) return;
    std::sort(rows.begin(), rows.end(), std::greater<int>());
    applying_ = true;
    for (int r : rows) overridesTable_->removeRow(r);
    applying_ = false;
    overridesEdited();
  });
  buttons->addWidget(add);
  buttons->addWidget(remove);
  buttons->addStretch(1);
  v->addLayout(buttons);
  overridesNote_ = new QLabel;
  overridesNote_->setObjectName("overridesNote");
  overridesNote_->setWordWrap(true);
  overridesNote_->setToolTip(tr("Why the last edit of the overrides was not taken (the table shows the recipe's)."));
  overridesNote_->setVisible(false);
  v->addWidget(overridesNote_);
  return box;
}

void RecipePanel::keptEdited(const QString& name, const json& value) {
  const KeptNumber n = keptNumbers().at(name);
  json keptAfter = kept_;
  if (value.is_null()) {
    if (keptAfter.contains(n.section)) {
      keptAfter[n.section].erase(n.key);
      if (keptAfter[n.section].empty()) keptAfter.erase(n.section);
    }
  } else {
    keptAfter[n.section][n.key] = value;
  }
  if (keptAfter == kept_) return;
  undo_->push(new SetRecipeValuesCommand(this, values_, kept_, values_, keptAfter, name, 0,
                                         tr("Change %1").arg(fieldCaption(name))));
}

void RecipePanel::overridesEdited() {
  json list = json::array();
  QString problem;
  auto cell = [this](int row, int column) {
    const QTableWidgetItem* item = overridesTable_->item(row, column);
    return item != nullptr ? item->text().trimmed() : QString();
  };
  for (int row = 0; row < overridesTable_->rowCount() && problem.isEmpty(); ++row) {
    json o = {{"match", cell(row, OverrideMatch).toStdString()}};
    for (const auto& [column, key] : {std::pair{OverridePrune, "prune"}, std::pair{OverrideQuantize, "quantize"}}) {
      const QString text = cell(row, column);
      if (text.isEmpty() || text == kNoValue) continue;
      if (text == kDenseOverride) {
        o[key] = nullptr;
        continue;
      }
      json block = json::parse(text.toStdString(), nullptr, /*allow_exceptions=*/false);
      if (!block.is_object()) {
        problem = tr("Row %1, %2: \"%3\" is not —, dense or a JSON object.")
                      .arg(row + 1)
                      .arg(overridesTable_->horizontalHeaderItem(column)->text(), text);
        break;
      }
      o[key] = block;
    }
    list.push_back(o);
  }
  json keptAfter = kept_;
  if (list.empty()) keptAfter.erase("overrides");
  else keptAfter["overrides"] = list;
  if (problem.isEmpty()) {
    // Checked by core's parser as a whole recipe, so a table the compress job would refuse is never taken.
    json candidate = recipeJson();
    candidate.erase("overrides");
    if (!list.empty()) candidate["overrides"] = list;
    try {
      Recipe::fromJson(candidate, "", "overrides");
    } catch (const InputError& e) {
      problem = qs(e.what());
    }
  }
  overridesProblem_ = problem;
  if (!problem.isEmpty()) {
    overridesNote_->setText(tr("Not taken: %1").arg(problem));
    overridesNote_->setVisible(true);
    showOverrides();   // back to the recipe's overrides
    return;
  }
  overridesNote_->setVisible(false);
  if (keptAfter == kept_) return;
  undo_->push(new SetRecipeValuesCommand(this, values_, kept_, values_, keptAfter, "overrides", 0,
                                         tr("Change %1").arg(fieldCaption("overrides"))));
}

void RecipePanel::showOverrides() {
  const bool was = applying_;
  applying_ = true;
  const json list = kept_.contains("overrides") ? kept_["overrides"] : json::array();
  overridesTable_->setRowCount(int(list.size()));
  auto blockText = [](const json& o, const char* key) {
    if (!o.contains(key)) return kNoValue;
    if (o.at(key).is_null()) return kDenseOverride;
    return qs(o.at(key).dump());
  };
  for (int row = 0; row < int(list.size()); ++row) {
    const json& o = list[size_t(row)];
    overridesTable_->setItem(row, OverrideMatch, new QTableWidgetItem(qs(o.value("match", ""))));
    overridesTable_->setItem(row, OverridePrune, new QTableWidgetItem(blockText(o, "prune")));
    overridesTable_->setItem(row, OverrideQuantize, new QTableWidgetItem(blockText(o, "quantize")));
  }
  applying_ = was;
}

void RecipePanel::showAdvanced() {
  const bool was = applying_;
  applying_ = true;
  for (const auto& [name, spin] : keptControls_) {
    const KeptNumber n = keptNumbers().at(name);
    const bool set = kept_.contains(n.section) && kept_[n.section].contains(n.key) && kept_[n.section][n.key].is_number();
    spin->setValue(set ? kept_[n.section][n.key].get<double>() : n.defaultValue);
  }
  applying_ = was;
}

QGroupBox* RecipePanel::buildEstimates() {
  auto* box = new QGroupBox(tr("Estimates (before any run)"));
  box->setObjectName("estimatesGroup");
  box->setToolTip(tr("Computed at once from the model's tensor shapes and the storage formats this recipe "
                     "produces; nothing is run."));
  auto* form = new QFormLayout(box);
  auto metric = [&](const char* name, const QString& caption, const QString& meaning) {
    auto* captionLabel = new QLabel(caption);
    captionLabel->setToolTip(meaning);
    auto* value = new QLabel(kNoValue);
    value->setObjectName(name);
    value->setToolTip(meaning);
    value->setWordWrap(true);
    value->setTextInteractionFlags(Qt::TextSelectableByMouse);
    form->addRow(captionLabel, value);
    return value;
  };
  linearBits_ = metric("estimate.linearBits", tr("Bits/weight:"),
                       tr("Every byte the chosen formats store for the block linears (values, codes, masks, "
                          "scales, zeros, outlier indices) times 8, over their number of weights."));
  modelBits_ = metric("estimate.modelBits", tr("Whole model:"),
                      tr("Bits per weight over every tensor of the model, including the embedding, norms and "
                         "output head, which recipes leave dense."));
  size_ = metric("estimate.size", tr("Size:"),
                 tr("Bytes of weight data the compressed folder will hold, against the checkpoint's now."));
  tokensPerSecond_ = metric("estimate.tokensPerSecond", tr("Predicted decode:"), tokensPerSecondMeaning());
  problemsLabel_ = new QLabel;
  problemsLabel_->setObjectName("recipeProblems");
  problemsLabel_->setWordWrap(true);
  problemsLabel_->setToolTip(tr("What must change before this recipe can run."));
  QPalette warn = problemsLabel_->palette();
  warn.setColor(QPalette::WindowText, QColor(0xc0, 0x39, 0x2b));
  problemsLabel_->setPalette(warn);
  form->addRow(problemsLabel_);
  return box;
}

void RecipePanel::chooseCalibrationFile() {
  const bool text = values_.value(kCalibrationSource).toString() == "text";
  const QString current = values_.value(kCalibrationFile).toString();
  const QString path = QFileDialog::getOpenFileName(
      this, text ? tr("Calibration Text File") : tr("Calibration Prompts File"), QFileInfo(current).absolutePath(),
      text ? tr("Text files (*.txt);;All files (*)") : tr("Prompt files (*.txt *.jsonl);;All files (*)"));
  if (!path.isEmpty()) edit(kCalibrationFile, path);
}

void RecipePanel::edit(const QString& key, const QVariant& value) {
  auto it = controls_.find(key);
  if (it == controls_.end()) return;
  userEdited(key, value);
}

void RecipePanel::userEdited(const QString& key, const QVariant& value) {
  if (applying_) return;
  const QVariant before = values_.value(key);
  // The controls hold the value already; still compare as the stored type so that 4 == "4" is no change.
  if (before == value || before.toString() == value.toString()) return;
  QVariantMap after = values_;
  after[key] = value;
  applyCompanionValues(key, before, after);
  json keptAfter = consistentKept(after, kept_);
  if (key == kQuantOutlierRatio && keptAfter.contains("quantize")) {
    keptAfter["quantize"].erase("outlier_threshold");   // choosing a ratio replaces the loaded threshold
    if (keptAfter["quantize"].empty()) keptAfter.erase("quantize");
  }
  const bool slider = key == kPruneSparsity || key == kQuantOutlierRatio;
  undo_->push(new SetRecipeValuesCommand(this, values_, kept_, after, keptAfter, key, slider ? activeDrag_ : 0,
                                         tr("Change %1").arg(fieldCaption(key))));
}

void RecipePanel::applyState(const QVariantMap& values, const json& kept) {
  values_ = values;
  kept_ = kept;
  applying_ = true;
  for (auto& [key, control] : controls_) control.write(values_.value(key));
  showAdvanced();
  showOverrides();
  applying_ = false;
  refresh();
}

json RecipePanel::recipeJson() const {
  json j = json::object();
  const QString prune = values_.value(kPruneMethod).toString();
  const QString quant = values_.value(kQuantMethod).toString();
  const QString file = values_.value(kCalibrationFile).toString();
  if (methodNeedsCalibration(prune, quant) || !file.isEmpty()) {
    const std::string source = values_.value(kCalibrationSource).toString().toStdString();
    json c = {{"source", source}};
    c[source == "text" ? "text" : "prompts"] = file.toStdString();
    c["tokens"] = values_.value(kCalibrationTokens).toLongLong();
    if (source == "text")
      c["window"] = values_.value(kCalibrationWindow).toLongLong();
    else
      c["max_new_tokens"] = values_.value(kCalibrationMaxNewTokens).toLongLong();
    c["seed"] = values_.value(kCalibrationSeed).toLongLong();
    j["calibration"] = c;
  }
  if (prune != "none") {
    json p = {{"method", prune.toStdString()}};
    const QString pattern = values_.value(kPrunePattern).toString();
    if (pattern == "unstructured")
      p["sparsity"] = values_.value(kPruneSparsity).toDouble();
    else
      p["pattern"] = pattern.toStdString();
    if (kept_.contains("prune")) p.update(kept_["prune"]);
    j["prune"] = p;
  }
  if (quant != "none") {
    json q = {{"method", quant.toStdString()}, {"bits", values_.value(kQuantBits).toInt()}};
    const int groupSize = values_.value(kQuantGroupSize).toInt();
    if (quant == "spqr") {
      q["group_size"] = groupSize;
      q["scale_bits"] = values_.value(kQuantScaleBits).toInt();
      const bool threshold = kept_.contains("quantize") && kept_["quantize"].contains("outlier_threshold");
      if (!threshold) q["outlier_ratio"] = values_.value(kQuantOutlierRatio).toDouble();
    } else {
      const QString granularity = values_.value(kQuantGranularity).toString();
      q["granularity"] = granularity.toStdString();
      if (granularity == "group") q["group_size"] = groupSize;
      q["symmetric"] = values_.value(kQuantSymmetric).toBool();
      if (quant == "gptq") {
        const bool actOrder = values_.value(kQuantActOrder).toBool();
        q["act_order"] = actOrder;
        // GPTQ cannot regroup columns it visits out of order: with groups, act-order fixes every group's grid
        // before the sweep (static groups), as the reference implementation's static_groups does.
        if (actOrder && granularity == "group") q["static_groups"] = true;
      }
    }
    if (kept_.contains("quantize")) q.update(kept_["quantize"]);
    j["quantize"] = q;
  }
  j["skip"] = kept_.contains("skip") ? kept_["skip"] : json::array({"lm_head"});
  if (kept_.contains("overrides")) j["overrides"] = kept_["overrides"];
  if (kept_.contains("lm_head")) j["lm_head"] = kept_["lm_head"];   // no control of its own: kept as loaded
  return j;
}

bool RecipePanel::setRecipe(const json& doc, const QString& baseDir, const QString& source, QString* error) {
  Recipe r;
  try {
    r = Recipe::fromJson(doc, baseDir.toStdString(), source.toStdString());
  } catch (const InputError& e) {
    if (error) *error = qs(e.what());
    return false;
  }
  QVariantMap v = defaultValues();
  json kept = json::object();
  if (r.calibration) {
    v[kCalibrationSource] = qs(r.calibration->source);
    v[kCalibrationFile] = r.calibration->file.empty() ? QString() : QDir::cleanPath(qs(r.calibration->file));
    v[kCalibrationTokens] = qlonglong(r.calibration->tokens);
    v[kCalibrationWindow] = qlonglong(r.calibration->window);
    v[kCalibrationMaxNewTokens] = qlonglong(r.calibration->maxNewTokens);
    v[kCalibrationSeed] = qulonglong(r.calibration->seed);
  }
  if (r.prune) {
    v[kPruneMethod] = qs(r.prune->method);
    const SparsityPattern& p = r.prune->pattern;
    v[kPrunePattern] = p.isNM() ? QString("%1:%2").arg(p.n()).arg(p.m()) : QString("unstructured");
    if (p.isUnstructured()) v[kPruneSparsity] = p.sparsity();
    for (const char* key : {"damp", "block"})
      if (doc.at("prune").contains(key)) kept["prune"][key] = doc.at("prune").at(key);
  }
  if (r.quantize) {
    const QuantizeSpec& q = *r.quantize;
    v[kQuantMethod] = qs(q.method);
    v[kQuantBits] = q.grid.bits;
    v[kQuantGranularity] = granularityName(q.grid.granularity);
    v[kQuantGroupSize] = QString::number(q.grid.groupSize);
    v[kQuantSymmetric] = q.grid.symmetric;
    v[kQuantActOrder] = q.actOrder;
    v[kQuantScaleBits] = q.scaleBits;
    if (q.outlierRatio >= 0) v[kQuantOutlierRatio] = q.outlierRatio;
    for (const char* key : {"damp", "block", "static_groups", "outlier_threshold"})
      if (doc.at("quantize").contains(key)) kept["quantize"][key] = doc.at("quantize").at(key);
  }
  if (doc.contains("skip")) kept["skip"] = doc.at("skip");
  if (doc.contains("overrides")) kept["overrides"] = doc.at("overrides");
  if (doc.contains("lm_head")) kept["lm_head"] = doc.at("lm_head");
  undo_->push(new SetRecipeValuesCommand(this, values_, kept_, v, kept, QString(), 0,
                                         tr("Load recipe %1").arg(QFileInfo(source).fileName())));
  return true;
}

bool RecipePanel::loadRecipeFile(const QString& path, QString* error) {
  json doc;
  try {
    doc = readJsonFile(path.toStdString());
  } catch (const InputError& e) {
    if (error) *error = qs(e.what());
    return false;
  }
  return setRecipe(doc, QFileInfo(path).absolutePath(), path, error);
}

int RecipePanel::setShippedRecipes(const QString& dir) {
  shippedDir_ = dir;
  picker_->clear();
  const QFileInfoList files = QDir(dir).entryInfoList({"*.json"}, QDir::Files, QDir::Name);
  picker_->addItem(files.isEmpty() ? tr("(no shipped recipes in %1)").arg(dir) : tr("Choose a shipped recipe…"), QString());
  for (const QFileInfo& f : files) {
    QString description;
    try {
      description = qs(readJsonFile(f.absoluteFilePath().toStdString()).value("description", ""));
    } catch (const std::exception&) {
      continue;   // not a readable recipe: not offered
    }
    picker_->addItem(f.completeBaseName(), f.absoluteFilePath());
    picker_->setItemData(picker_->count() - 1, description.isEmpty() ? f.completeBaseName() : description,
                         Qt::ToolTipRole);
  }
  picker_->setEnabled(picker_->count() > 1);
  pickerNote_->setVisible(picker_->count() > 1);
  return picker_->count() - 1;
}

bool RecipePanel::saveRecipeFile(const QString& path, QString* error) const {
  QSaveFile file(path);   // written whole or not at all
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) {
    if (error) *error = tr("%1: cannot write: %2").arg(path, file.errorString());
    return false;
  }
  const std::string text = recipeJson().dump(2) + "\n";
  file.write(text.data(), qint64(text.size()));
  if (!file.commit()) {
    if (error) *error = tr("%1: cannot write: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

QString RecipePanel::tokensPerSecondMeaning() {
  return tr("Batch-1 decode reads every block weight and the output head once per token, so a memory-bound decode "
            "runs at most at bandwidth ÷ bytes per token. With kernel benchmarks of this device in the run store "
            "(Benchmark kernels, or pareto-cli bench kernels) each module's bytes are read at the GB/s its kernel "
            "format measured (\"from bench kernels on …\"); otherwise every byte at the device's measured copy "
            "bandwidth (\"estimate: bytes / bandwidth\"). Which one is shown below the number.");
}

void RecipePanel::setModel(const std::optional<ModelSummary>& model) {
  model_ = model;
  refresh();
}

void RecipePanel::setBandwidth(const DecodeBandwidth& bandwidth) {
  bandwidth_ = bandwidth;
  refresh();
}

void RecipePanel::refresh() {
  updateEnabledStates();
  updateEstimates();
  emit recipeChanged();
}

void RecipePanel::updateEnabledStates() {
  const QString prune = values_.value(kPruneMethod).toString();
  const QString quant = values_.value(kQuantMethod).toString();
  const QString pattern = values_.value(kPrunePattern).toString();
  const bool text = values_.value(kCalibrationSource).toString() == "text";
  auto enable = [this](const QString& key, bool on) {
    for (QWidget* w : findChildren<QWidget*>())
      if (w->objectName() == key || w->objectName() == key + ".slider") w->setEnabled(on);
  };
  calibrationBox_->setEnabled(methodNeedsCalibration(prune, quant));
  calibrationFileCaption_->setText(text ? tr("Text file:") : tr("Prompts file:"));
  enable(kCalibrationWindow, text);
  enable(kCalibrationMaxNewTokens, !text);
  enable(kPrunePattern, prune != "none");
  enable(kPruneSparsity, prune != "none" && pattern == "unstructured");
  if (pattern != "unstructured" && prune != "none") {
    const SparsityPattern p = SparsityPattern::parse(pattern.toStdString());
    sparsityNote_->setText(tr("%1 removes %2% of the weights").arg(pattern).arg(100.0 * p.sparsity(), 0, 'g', 4));
  } else {
    sparsityNote_->clear();
  }
  const bool quantizing = quant != "none", spqr = quant == "spqr";
  const bool threshold = kept_.contains("quantize") && kept_["quantize"].contains("outlier_threshold");
  enable(kQuantBits, quantizing);
  enable(kQuantGranularity, quantizing && !spqr);
  enable(kQuantGroupSize, quantizing && (spqr || values_.value(kQuantGranularity).toString() == "group"));
  enable(kQuantSymmetric, quantizing && !spqr);
  enable(kQuantActOrder, quant == "gptq");
  enable(kQuantOutlierRatio, spqr);
  enable(kQuantScaleBits, spqr);
  enable(kPruneDamp, prune == "sparsegpt");
  enable(kPruneBlock, prune == "sparsegpt");
  enable(kQuantDamp, quant == "gptq" || spqr);
  enable(kQuantBlock, quant == "gptq" || spqr);
  enable(kQuantOutlierThreshold, spqr);
  outlierNote_->setText(spqr && threshold
                            ? tr("The loaded recipe keeps outliers by saliency threshold %1; moving the ratio "
                                 "replaces it.")
                                  .arg(qs(kept_["quantize"]["outlier_threshold"].dump()))
                            : QString());
}

void RecipePanel::updateEstimates() {
  problems_.clear();
  estimate_.reset();
  const QString prune = values_.value(kPruneMethod).toString();
  const QString quant = values_.value(kQuantMethod).toString();
  const bool nothing = prune == "none" && quant == "none" && !kept_.contains("overrides");
  if (nothing) problems_ << tr("Choose a pruning or a quantization method.");
  if (methodNeedsCalibration(prune, quant)) {
    const bool text = values_.value(kCalibrationSource).toString() == "text";
    const QString file = values_.value(kCalibrationFile).toString();
    if (file.isEmpty())
      problems_ << (text ? tr("Choose a calibration text file.") : tr("Choose a calibration prompts file."));
    else if (!QFileInfo(file).isFile())
      problems_ << tr("%1: calibration file not found.").arg(file);
  }

  Recipe recipe;   // no prune, no quantize: the dense model, for "nothing chosen yet"
  bool parsed = nothing;
  if (!nothing) {
    try {
      recipe = Recipe::fromJson(recipeJson(), "", "recipe");
      parsed = true;
    } catch (const InputError& e) {
      problems_ << qs(e.what());
    }
  }
  if (parsed && model_) {
    try {
      estimate_ = estimateRecipe(recipe, *model_, bandwidth_);
    } catch (const InputError& e) {
      problems_ << qs(e.what());
    }
  }
  if (estimate_) {
    constexpr int kShown = 3;   // a mismatch usually hits every layer alike; a few examples say it
    const auto& refused = estimate_->problems;
    for (size_t i = 0; i < refused.size() && i < kShown; ++i) problems_ << qs(refused[i]);
    if (refused.size() > kShown) problems_ << tr("… and %1 more modules.").arg(refused.size() - kShown);
  }

  tokensPerSecond_->setToolTip(tokensPerSecondMeaning());
  if (estimate_ && !estimate_->problems.empty()) {
    // Numbers for a recipe that cannot run would pass for what a run gives: the reason stands in their place.
    linearBits_->setText(tr("cannot run on this model: %1").arg(qs(estimate_->problems.front())));
    for (QLabel* l : {modelBits_, size_, tokensPerSecond_}) l->setText(tr("— (the recipe cannot run on this model)"));
  } else if (!estimate_) {
    for (QLabel* l : {linearBits_, modelBits_, size_, tokensPerSecond_})
      l->setText(model_ ? kNoValue : tr("— (open a model)"));
  } else {
    const RecipeEstimate& e = *estimate_;
    const QLocale locale;
    linearBits_->setText(tr("%1 (block linears)").arg(locale.toString(e.linearBitsPerWeight, 'f', 3)));
    modelBits_->setText(tr("%1 bits/weight (dense %2)")
                            .arg(locale.toString(e.modelBitsPerWeight, 'f', 3),
                                 locale.toString(e.denseModelBitsPerWeight, 'f', 2)));
    size_->setText(tr("%1 (dense %2, %3%)")
                       .arg(display::bytes(e.modelBytes), display::bytes(e.denseModelBytes))
                       .arg(locale.toString(100.0 * double(e.modelBytes) / double(std::max<uint64_t>(1, e.denseModelBytes)), 'f', 1)));
    QStringList notes;
    for (const auto& n : e.notes) notes << qs(n);
    // Which of core's two predictions this is: kernels measured on this device, or bytes over one bandwidth.
    const QString basis = e.fromKernelBenchmarks
                              ? tr("from %1").arg(qs(e.bandwidthSource))
                              : tr("estimate: bytes / bandwidth — %1 per token over %2")
                                    .arg(display::bytes(e.bytesPerToken), qs(e.bandwidthSource));
    if (e.tokensPerSecond > 0) {
      tokensPerSecond_->setText(tr("%1 tok/s (dense %2, ×%3)\n%4")
                                    .arg(locale.toString(e.tokensPerSecond, 'f', 0),
                                         locale.toString(e.denseTokensPerSecond, 'f', 0),
                                         locale.toString(e.tokensPerSecond / e.denseTokensPerSecond, 'f', 2), basis));
      tokensPerSecond_->setToolTip(tokensPerSecondMeaning() + "\n\n" +
                                   (e.fromKernelBenchmarks
                                        ? tr("Now: from the kernel benchmarks stored for this device — each module's "
                                             "bytes at the GB/s its kernel format achieved, the output head at "
                                             "dense's.\n%1")
                                              .arg(qs(e.bandwidthSource))
                                        : tr("Now: estimate: bytes / bandwidth (%1). Run Benchmark kernels on a GPU "
                                             "to predict from measured kernels.")
                                              .arg(qs(e.bandwidthSource))));
    } else {
      tokensPerSecond_->setText(tr("%1 per token (bandwidth not yet known)").arg(display::bytes(e.bytesPerToken)));
    }
    if (!notes.isEmpty()) tokensPerSecond_->setText(tokensPerSecond_->text() + "\n" + notes.join("\n"));
  }
  problemsLabel_->setText(problems_.join("\n"));
  problemsLabel_->setVisible(!problems_.isEmpty());
}

}  // namespace pareto
