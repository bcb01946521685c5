// The Recipe dock's content: calibration source, pruning and quantization controls that produce a recipe JSON
// with the keys of DESIGN.md ("Compression methods"), and the instant estimates core computes for it on the
// loaded model (bits per weight, size, predicted decode tokens/s; compress/RecipeEstimate.h).
//
// Every edit is a QUndoCommand on undoStack(); the commands of one slider drag merge into one step, so a drag
// from 10% to 60% undoes in one go. Loading a recipe file is one step too. The solvers' damping and block size
// and SpQR's outlier threshold are set in a collapsed Advanced section, and the per-module overrides in a table
// (glob → pruning, quantization); the keys the panel has no control for (static_groups, skip) are kept from the
// loaded recipe and written back unchanged.
#pragma once

#include <QVariantMap>
#include <QWidget>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "compress/RecipeEstimate.h"
#include "model/ModelSummary.h"

class QAbstractButton;
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QSlider;
class QSpinBox;
class QTableWidget;
class QUndoStack;

namespace pareto {

class RecipePanel : public QWidget {
  Q_OBJECT

 public:
  // The names of the recipe's values, also the object names of their controls (tests find them by these).
  static constexpr const char* kCalibrationSource = "calibration.source";   // "text" | "decode"
  static constexpr const char* kCalibrationFile = "calibration.file";       // text or prompts file, absolute
  static constexpr const char* kCalibrationTokens = "calibration.tokens";
  static constexpr const char* kCalibrationWindow = "calibration.window";
  static constexpr const char* kCalibrationMaxNewTokens = "calibration.max_new_tokens";
  static constexpr const char* kCalibrationSeed = "calibration.seed";
  static constexpr const char* kPruneMethod = "prune.method";       // "none" | magnitude | wanda | sparsegpt
  static constexpr const char* kPrunePattern = "prune.pattern";     // "unstructured" | "N:M"
  static constexpr const char* kPruneSparsity = "prune.sparsity";   // fraction removed (unstructured)
  static constexpr const char* kQuantMethod = "quantize.method";    // "none" | rtn | gptq | spqr
  static constexpr const char* kQuantBits = "quantize.bits";
  static constexpr const char* kQuantGranularity = "quantize.granularity";   // tensor | channel | group
  static constexpr const char* kQuantGroupSize = "quantize.group_size";
  static constexpr const char* kQuantSymmetric = "quantize.symmetric";
  static constexpr const char* kQuantActOrder = "quantize.act_order";
  static constexpr const char* kQuantOutlierRatio = "quantize.outlier_ratio";   // fraction of weights
  static constexpr const char* kQuantScaleBits = "quantize.scale_bits";
  // The Advanced section's controls (object names), each the recipe key it sets.
  static constexpr const char* kPruneDamp = "prune.damp";
  static constexpr const char* kPruneBlock = "prune.block";
  static constexpr const char* kQuantDamp = "quantize.damp";
  static constexpr const char* kQuantBlock = "quantize.block";
  static constexpr const char* kQuantOutlierThreshold = "quantize.outlier_threshold";   // 0: by outlier_ratio

  explicit RecipePanel(QWidget* parent = nullptr);
  ~RecipePanel() override;

  // The recipe as JSON, exactly as it is saved and handed to the compress job.
  nlohmann::json recipeJson() const;

  // Replaces the recipe (one undo step). The document is checked by core's recipe parser first; relative paths
  // resolve against baseDir. Returns false and sets *error (naming `source`) when the parser refuses it.
  bool setRecipe(const nlohmann::json& recipe, const QString& baseDir, const QString& source, QString* error);
  bool loadRecipeFile(const QString& path, QString* error);
  // The shipped recipes of a folder (resources/recipes) in the picker at the top, each by name with its
  // "description"; choosing one loads it (undoable). Returns how many were listed.
  int setShippedRecipes(const QString& dir);
  QString shippedRecipesDir() const { return shippedDir_; }
  bool saveRecipeFile(const QString& path, QString* error) const;

  QVariant value(const QString& key) const { return values_.value(key); }
  // Sets a value as the user would (one undo step, merged with the running slider drag if any).
  void edit(const QString& key, const QVariant& value);

  // The model the estimates are computed on; nullopt clears them.
  void setModel(const std::optional<ModelSummary>& model);
  // Where predicted tokens/s come from; until it is set, no tokens/s is predicted. Its kernel measurements (the
  // run store's kernel benchmarks of the current device) are preferred when they cover the recipe.
  void setBandwidth(const DecodeBandwidth& bandwidth);
  const DecodeBandwidth& bandwidth() const { return bandwidth_; }

  // The estimate for the current recipe and model (nullopt without a model or for a recipe core refuses).
  const std::optional<RecipeEstimate>& estimate() const { return estimate_; }
  // What stops this recipe from running, as sentences for the user ("Choose a calibration text file.").
  QStringList problems() const { return problems_; }

  QUndoStack* undoStack() const { return undo_; }

  // The overrides table's columns: the glob over module names, then the pruning and the quantization of the
  // modules it matches, each as "—" (the recipe's own), "dense" (none) or the block's JSON.
  enum OverrideColumn { OverrideMatch = 0, OverridePrune = 1, OverrideQuantize = 2 };
  // Why the last edit of the overrides table was refused ("" when it was taken).
  QString overridesProblem() const { return overridesProblem_; }

 signals:
  void recipeChanged();

 private:
  QString shippedDir_;
  QComboBox* picker_ = nullptr;
  QLabel* pickerNote_ = nullptr;
  friend class SetRecipeValuesCommand;

  struct Control {
    std::function<QVariant()> read;
    std::function<void(const QVariant&)> write;
  };

  QGroupBox* buildCalibration();
  QGroupBox* buildPruning();
  QGroupBox* buildQuantization();
  QGroupBox* buildEstimates();
  QWidget* buildAdvanced();
  QGroupBox* buildOverrides();
  // A spin box for a solver key kept in kept_[section][key] (default shown when the recipe leaves it out).
  QDoubleSpinBox* addKeptNumber(const QString& name, double min, double max, int decimals, double step);
  void keptEdited(const QString& name, const nlohmann::json& value);
  void overridesEdited();
  void showOverrides();
  void showAdvanced();
  static QString tokensPerSecondMeaning();
  QComboBox* addCombo(const QString& key, const std::vector<std::pair<QString, QString>>& items);
  QSpinBox* addSpin(const QString& key, int min, int max, int step);
  QCheckBox* addCheck(const QString& key, const QString& text);
  // A slider (for drags) and a spin box (for exact values) showing one fraction as percent.
  QWidget* addPercentSlider(const QString& key, double maxPercent, int sliderStepsPerPercent);
  void chooseCalibrationFile();

  // Applies a whole state (values and kept keys) to the controls; undo commands call it.
  void applyState(const QVariantMap& values, const nlohmann::json& kept);
  void userEdited(const QString& key, const QVariant& value);
  void refresh();   // enabled states, recipe problems, estimates
  void updateEnabledStates();
  void updateEstimates();

  QVariantMap values_;
  nlohmann::json kept_ = nlohmann::json::object();   // keys without a control, from the loaded recipe
  std::map<QString, Control> controls_;
  bool applying_ = false;
  int dragSerial_ = 0;     // increases with every slider press
  int activeDrag_ = 0;     // the serial of the drag in progress, 0 when none

  std::optional<ModelSummary> model_;
  DecodeBandwidth bandwidth_;
  std::optional<RecipeEstimate> estimate_;
  QStringList problems_;

  QUndoStack* undo_ = nullptr;
  QLabel* calibrationFileCaption_ = nullptr;
  QLabel* sparsityNote_ = nullptr;
  QLabel* outlierNote_ = nullptr;
  QLabel* linearBits_ = nullptr;
  QLabel* modelBits_ = nullptr;
  QLabel* size_ = nullptr;
  QLabel* tokensPerSecond_ = nullptr;
  QLabel* problemsLabel_ = nullptr;
  QGroupBox* calibrationBox_ = nullptr;
  std::map<QString, QDoubleSpinBox*> keptControls_;   // the Advanced section's, by name
  QWidget* advanced_ = nullptr;
  QTableWidget* overridesTable_ = nullptr;
  QLabel* overridesNote_ = nullptr;
  QString overridesProblem_;
};

}  // namespace pareto
