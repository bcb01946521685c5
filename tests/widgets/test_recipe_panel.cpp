// The Recipe dock: the JSON its controls produce is what core's recipe parser accepts and means what the
// controls say; example recipes survive a load/save round trip; estimates match the bytes the compress job
// writes; one slider drag is one undo step.
#include <gtest/gtest.h>

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QGroupBox>
#include <QPushButton>
#include <QTableWidget>
#include <QToolButton>
#include <QDir>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSlider>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QUndoStack>
#include <filesystem>
#include <fstream>

#include "EstimateChecks.h"
#include "OneBlockModel.h"
#include "SharedData.h"
#include "WidgetTestSupport.h"
#include "compress/CompressJob.h"
#include "compress/Recipe.h"
#include "compress/RecipeEstimate.h"
#include "model/ModelSummary.h"
#include "runtime/CopyBandwidth.h"
#include "util/Error.h"
#include "util/Json.h"
#include "widgets/RecipePanel.h"
#include "widgets/RunRecord.h"

namespace pareto {
namespace {

using nlohmann::json;
using test::str;
using test::textOf;

template <typename T>
T* control(const RecipePanel& panel, const char* key) {
  T* w = panel.findChild<T*>(key);
  if (w == nullptr) ADD_FAILURE() << "no control " << key;
  return w;
}

// Chooses a combo entry by its data, as a click would.
void choose(const RecipePanel& panel, const char* key, const QString& data) {
  QComboBox* combo = control<QComboBox>(panel, key);
  const int i = combo->findData(data);
  ASSERT_GE(i, 0) << key << " has no " << str(data);
  combo->setCurrentIndex(i);
}

ModelSummary refTiny() { return summarizeModel(test::sharedPath("models/ref-tiny")); }

using test::oneBlockModel;

TEST(RecipePanel, StartsWithNothingToRunAndSaysSo) {
  RecipePanel panel;
  EXPECT_TRUE(panel.problems().join("\n").contains("pruning or a quantization")) << str(panel.problems().join("|"));
  EXPECT_FALSE(panel.estimate().has_value());   // no model yet
  EXPECT_TRUE(textOf(&panel, "estimate.linearBits").contains("open a model"));
  panel.setModel(oneBlockModel());
  ASSERT_TRUE(panel.estimate().has_value());   // the dense model's figures
  EXPECT_DOUBLE_EQ(panel.estimate()->linearBitsPerWeight, 16.0);
}

TEST(RecipePanel, ControlsProduceTheRecipeCoreParses) {
  PARETO_REQUIRE_SHARED();
  RecipePanel panel;
  const QString text = QString::fromStdString(test::sharedPath("data/heldout-prose.txt"));
  choose(panel, RecipePanel::kPruneMethod, "sparsegpt");
  choose(panel, RecipePanel::kPrunePattern, "4:8");
  choose(panel, RecipePanel::kQuantMethod, "rtn");
  control<QSpinBox>(panel, RecipePanel::kQuantBits)->setValue(4);
  choose(panel, RecipePanel::kQuantGroupSize, "64");
  control<QCheckBox>(panel, RecipePanel::kQuantSymmetric)->setChecked(false);
  QLineEdit* file = control<QLineEdit>(panel, RecipePanel::kCalibrationFile);
  file->setText(text);
  emit file->editingFinished();
  control<QSpinBox>(panel, RecipePanel::kCalibrationTokens)->setValue(2048);
  control<QSpinBox>(panel, RecipePanel::kCalibrationWindow)->setValue(256);

  const json expected = {
      {"calibration", {{"source", "text"}, {"text", str(text)}, {"tokens", 2048}, {"window", 256}, {"seed", 0}}},
      {"prune", {{"method", "sparsegpt"}, {"pattern", "4:8"}}},
      {"quantize", {{"method", "rtn"}, {"bits", 4}, {"granularity", "group"}, {"group_size", 64}, {"symmetric", false}}},
      {"skip", {"lm_head"}}};
  EXPECT_EQ(panel.recipeJson(), expected) << panel.recipeJson().dump(2);
  EXPECT_TRUE(panel.problems().isEmpty()) << str(panel.problems().join("\n"));

  const Recipe r = Recipe::fromJson(panel.recipeJson(), "", "panel");
  ASSERT_TRUE(r.calibration && r.prune && r.quantize);
  EXPECT_EQ(r.calibration->source, "text");
  EXPECT_EQ(r.calibration->file, str(text));
  EXPECT_EQ(r.calibration->tokens, 2048);
  EXPECT_EQ(r.calibration->window, 256);
  EXPECT_EQ(r.prune->method, "sparsegpt");
  EXPECT_EQ(r.prune->pattern, SparsityPattern::nm(4, 8));
  EXPECT_EQ(r.quantize->method, "rtn");
  EXPECT_EQ(r.quantize->grid.bits, 4);
  EXPECT_EQ(r.quantize->grid.groupSize, 64);
  EXPECT_FALSE(r.quantize->grid.symmetric);
  EXPECT_FALSE(r.pruneFor("lm_head").has_value());

  // Unstructured takes the slider's sparsity; decode calibration swaps the keys that apply.
  choose(panel, RecipePanel::kPrunePattern, "unstructured");
  control<QSlider>(panel, "prune.sparsity.slider")->setValue(60);
  choose(panel, RecipePanel::kCalibrationSource, "decode");
  control<QSpinBox>(panel, RecipePanel::kCalibrationMaxNewTokens)->setValue(64);
  const json j = panel.recipeJson();
  EXPECT_EQ(j["prune"], json({{"method", "sparsegpt"}, {"sparsity", 0.6}}));
  EXPECT_EQ(j["calibration"]["prompts"], str(text));
  EXPECT_EQ(j["calibration"]["max_new_tokens"], 64);
  EXPECT_FALSE(j["calibration"].contains("window"));
  EXPECT_FALSE(j["calibration"].contains("text"));
  const Recipe decode = Recipe::fromJson(j, "", "panel");
  EXPECT_EQ(decode.calibration->source, "decode");
  EXPECT_DOUBLE_EQ(decode.prune->pattern.sparsity(), 0.6);
}

TEST(RecipePanel, SpqrAndGptqWriteTheirOwnKeys) {
  RecipePanel panel;
  choose(panel, RecipePanel::kQuantMethod, "spqr");
  // Choosing SpQR brings its usual grid: 3-bit, groups of 16.
  EXPECT_EQ(panel.value(RecipePanel::kQuantBits).toInt(), 3);
  EXPECT_EQ(panel.value(RecipePanel::kQuantGroupSize).toInt(), 16);
  control<QDoubleSpinBox>(panel, RecipePanel::kQuantOutlierRatio)->setValue(0.5);   // percent
  control<QSpinBox>(panel, RecipePanel::kQuantScaleBits)->setValue(4);
  EXPECT_EQ(panel.recipeJson()["quantize"], json({{"method", "spqr"}, {"bits", 3}, {"group_size", 16},
                                                  {"scale_bits", 4}, {"outlier_ratio", 0.005}}));
  // The calibration a method needs is required before a run.
  EXPECT_TRUE(panel.problems().join("\n").contains("calibration text file")) << str(panel.problems().join("|"));

  choose(panel, RecipePanel::kQuantMethod, "gptq");
  control<QCheckBox>(panel, RecipePanel::kQuantActOrder)->setChecked(true);
  EXPECT_EQ(panel.recipeJson()["quantize"], json({{"method", "gptq"}, {"bits", 4}, {"granularity", "group"},
                                                  {"group_size", 128}, {"symmetric", true}, {"act_order", true},
                                                  {"static_groups", true}}));
  EXPECT_FALSE(control<QSpinBox>(panel, RecipePanel::kQuantScaleBits)->isEnabled());
  EXPECT_TRUE(control<QCheckBox>(panel, RecipePanel::kQuantActOrder)->isEnabled());
  choose(panel, RecipePanel::kQuantGranularity, "channel");
  EXPECT_FALSE(panel.recipeJson()["quantize"].contains("group_size"));
  EXPECT_FALSE(control<QComboBox>(panel, RecipePanel::kQuantGroupSize)->isEnabled());
}

// Every example recipe loads, and the panel writes it back meaning the same (relative paths resolved).
TEST(RecipePanel, ExampleRecipesRoundTrip) {
  const QDir dir(QStringLiteral(PARETO_SOURCE_DIR "/resources/recipes"));
  const QStringList files = dir.entryList({"*.json"}, QDir::Files);
  ASSERT_GE(files.size(), 5);
  for (const QString& name : files) {
    SCOPED_TRACE(str(name));
    const QString path = dir.filePath(name);
    RecipePanel panel;
    QString error;
    ASSERT_TRUE(panel.loadRecipeFile(path, &error)) << str(error);
    const Recipe original = Recipe::fromFile(str(path));
    const Recipe again = Recipe::fromJson(panel.recipeJson(), "", "panel");
    ASSERT_EQ(bool(original.calibration), bool(again.calibration));
    if (original.calibration) {
      EXPECT_EQ(original.calibration->source, again.calibration->source);
      EXPECT_EQ(std::filesystem::weakly_canonical(original.calibration->file),
                std::filesystem::weakly_canonical(again.calibration->file));
      EXPECT_EQ(original.calibration->tokens, again.calibration->tokens);
      EXPECT_EQ(original.calibration->seed, again.calibration->seed);
    }
    for (const char* module : {"model.layers.0.mlp.up_proj", "lm_head"}) {
      const auto p0 = original.pruneFor(module), p1 = again.pruneFor(module);
      ASSERT_EQ(bool(p0), bool(p1)) << module;
      if (p0) {
        EXPECT_EQ(p0->method, p1->method);
        EXPECT_EQ(p0->pattern, p1->pattern);
        EXPECT_EQ(p0->damp, p1->damp);
      }
      const auto q0 = original.quantizeFor(module), q1 = again.quantizeFor(module);
      ASSERT_EQ(bool(q0), bool(q1)) << module;
      if (q0) {
        EXPECT_EQ(q0->method, q1->method);
        EXPECT_EQ(q0->grid.bits, q1->grid.bits);
        EXPECT_EQ(q0->grid.groupSize, q1->grid.groupSize);
        EXPECT_EQ(q0->grid.granularity, q1->grid.granularity);
        EXPECT_EQ(q0->grid.symmetric, q1->grid.symmetric);
        EXPECT_EQ(q0->outlierRatio, q1->outlierRatio);
        EXPECT_EQ(q0->scaleBits, q1->scaleBits);
      }
    }
  }
}

// Issue 25, point 4: every shipped recipe runs on both reference models: the estimates have no refused module
// (int4-g128 on ref-tiny's 192 input columns takes groups of 64 and says so); a recipe that cannot run shows the
// reason where the numbers would be.
TEST(RecipePanel, EveryShippedRecipeRunsOnBothReferenceModels) {
  PARETO_REQUIRE_SHARED();
  const QDir dir(QStringLiteral(PARETO_SOURCE_DIR "/resources/recipes"));
  const QStringList files = dir.entryList({"*.json"}, QDir::Files);
  ASSERT_GE(files.size(), 5);
  for (const char* model : {"models/ref-tiny", "models/ref-small"}) {
    const ModelSummary summary = summarizeModel(test::sharedPath(model));
    for (const QString& name : files) {
      SCOPED_TRACE(std::string(model) + " " + str(name));
      RecipePanel panel;
      panel.setModel(summary);
      QString error;
      ASSERT_TRUE(panel.loadRecipeFile(dir.filePath(name), &error)) << str(error);
      ASSERT_TRUE(panel.estimate().has_value());
      EXPECT_TRUE(panel.estimate()->problems.empty()) << panel.estimate()->problems.front();
      EXPECT_TRUE(panel.problems().isEmpty()) << str(panel.problems().join("\n"));
      EXPECT_FALSE(textOf(&panel, "estimate.linearBits").contains("cannot run"));
    }
  }

  RecipePanel panel;
  panel.setModel(refTiny());
  QString error;
  ASSERT_TRUE(panel.loadRecipeFile(dir.filePath("int4-g128-rtn.json"), &error)) << str(error);
  const QString predicted = textOf(&panel, "estimate.tokensPerSecond");
  EXPECT_TRUE(predicted.contains("groups of 64 instead of 128")) << str(predicted);

  // Groups of 100 have no power-of-two fraction of at least 32 dividing 192: refused, and no numbers shown.
  ASSERT_TRUE(panel.setRecipe({{"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 100}}}}, QString(),
                              "test", &error))
      << str(error);
  EXPECT_FALSE(panel.problems().isEmpty());
  const QString bits = textOf(&panel, "estimate.linearBits");
  EXPECT_TRUE(bits.startsWith("cannot run on this model")) << str(bits);
  EXPECT_TRUE(bits.contains("model.layers.0")) << str(bits);
  for (const char* name : {"estimate.modelBits", "estimate.size", "estimate.tokensPerSecond"})
    EXPECT_FALSE(textOf(&panel, name).contains(QRegularExpression("[0-9]"))) << name << " " << str(textOf(&panel, name));
}

// Issue 25, point 8: every N:M the engine takes is offered, and each gives a recipe core parses as that pattern.
TEST(RecipePanel, OffersEveryNMPatternTheEngineTakes) {
  RecipePanel panel;
  choose(panel, RecipePanel::kPruneMethod, "magnitude");
  QComboBox* pattern = control<QComboBox>(panel, RecipePanel::kPrunePattern);
  int offered = 0;
  for (int m : {2, 4, 8, 16, 32})
    for (int n = 1; n < m; ++n) {
      const QString nm = QStringLiteral("%1:%2").arg(n).arg(m);
      ASSERT_GE(pattern->findData(nm), 0) << str(nm);
      ++offered;
    }
  EXPECT_EQ(pattern->count(), offered + 1);   // and unstructured
  for (const char* nm : {"1:4", "2:8", "16:32"}) {
    choose(panel, RecipePanel::kPrunePattern, nm);
    const Recipe r = Recipe::fromJson(panel.recipeJson(), "", "panel");
    ASSERT_TRUE(r.pruneFor("model.layers.0.mlp.up_proj").has_value()) << nm;
    EXPECT_EQ(r.pruneFor("model.layers.0.mlp.up_proj")->pattern.label(), nm);
  }
}

// Issue 25, point 8: the shipped recipes are listed by name with their descriptions; choosing one loads it.
TEST(RecipePanel, ListsTheShippedRecipesAndLoadsTheChosenOne) {
  RecipePanel panel;
  const QString dir = QStringLiteral(PARETO_SOURCE_DIR "/resources/recipes");
  const int listed = panel.setShippedRecipes(dir);
  EXPECT_EQ(listed, int(QDir(dir).entryList({"*.json"}, QDir::Files).size()));
  QComboBox* picker = control<QComboBox>(panel, "recipePicker");
  ASSERT_EQ(picker->count(), listed + 1);
  for (int i = 1; i < picker->count(); ++i) {
    EXPECT_FALSE(picker->itemData(i, Qt::ToolTipRole).toString().isEmpty()) << str(picker->itemText(i));
    EXPECT_NE(picker->itemData(i, Qt::ToolTipRole).toString(), picker->itemText(i)) << "no description";
  }
  const int int8 = picker->findText("int8-channel");
  ASSERT_GE(int8, 0);
  picker->setCurrentIndex(int8);
  emit picker->activated(int8);
  const Recipe r = Recipe::fromJson(panel.recipeJson(), "", "panel");
  ASSERT_TRUE(r.quantizeFor("model.layers.0.mlp.up_proj").has_value());
  EXPECT_EQ(r.quantizeFor("model.layers.0.mlp.up_proj")->grid.bits, 8);
  EXPECT_TRUE(textOf(&panel, "recipePickerNote").contains("8")) << str(textOf(&panel, "recipePickerNote"));
  EXPECT_TRUE(panel.undoStack()->canUndo());
}

TEST(RecipePanel, SavesAndLoadsJson) {
  QTemporaryDir dir;
  RecipePanel panel;
  choose(panel, RecipePanel::kPruneMethod, "magnitude");
  choose(panel, RecipePanel::kPrunePattern, "8:16");
  choose(panel, RecipePanel::kQuantMethod, "rtn");
  choose(panel, RecipePanel::kQuantGranularity, "channel");
  control<QSpinBox>(panel, RecipePanel::kQuantBits)->setValue(8);
  QString error;
  const QString path = dir.filePath("mine.json");
  ASSERT_TRUE(panel.saveRecipeFile(path, &error)) << str(error);
  EXPECT_EQ(readJsonFile(str(path)), panel.recipeJson());

  RecipePanel loaded;
  ASSERT_TRUE(loaded.loadRecipeFile(path, &error)) << str(error);
  EXPECT_EQ(loaded.recipeJson(), panel.recipeJson());
  EXPECT_EQ(loaded.value(RecipePanel::kPrunePattern).toString(), "8:16");
  EXPECT_EQ(loaded.undoStack()->count(), 1);   // loading is one undoable step
  loaded.undoStack()->undo();
  EXPECT_EQ(loaded.value(RecipePanel::kPruneMethod).toString(), "none");

  // A recipe core refuses is reported with its file and key, and changes nothing.
  std::ofstream(str(dir.filePath("bad.json"))) << R"({"prune": {"method": "magnitude", "patern": "2:4"}})";
  EXPECT_FALSE(loaded.loadRecipeFile(dir.filePath("bad.json"), &error));
  EXPECT_TRUE(error.contains("bad.json") && error.contains("patern")) << str(error);
  EXPECT_EQ(loaded.value(RecipePanel::kPruneMethod).toString(), "none");
  EXPECT_FALSE(loaded.loadRecipeFile(dir.filePath("missing.json"), &error));
  EXPECT_TRUE(error.contains("missing.json")) << str(error);
}

TEST(RecipePanel, KeysWithoutControlsAreKept) {
  RecipePanel panel;
  const json doc = {{"prune", {{"method", "magnitude"}, {"pattern", "2:4"}, {"block", 64}}},
                    {"skip", {"lm_head", "model.layers.0.*"}},
                    {"overrides", {{{"match", "model.layers.3.*"}, {"prune", nullptr}}}}};
  QString error;
  ASSERT_TRUE(panel.setRecipe(doc, QString(), "doc", &error)) << str(error);
  const json out = panel.recipeJson();
  EXPECT_EQ(out["prune"]["block"], 64);
  EXPECT_EQ(out["skip"], doc["skip"]);
  EXPECT_EQ(out["overrides"], doc["overrides"]);
  // Turning pruning off drops what only applied to it.
  choose(panel, RecipePanel::kPruneMethod, "none");
  choose(panel, RecipePanel::kQuantMethod, "rtn");
  EXPECT_FALSE(panel.recipeJson().contains("prune"));
}

// Point 8 of issue 25: the per-module overrides are a table (glob → pruning, quantization) that shows a loaded
// recipe's overrides and edits them, one undo step per edit; what core's parser refuses is not taken and says
// why; the run's label names them.
TEST(RecipePanel, OverridesAreShownAndEditedInTheTable) {
  RecipePanel panel;
  const json doc = {{"quantize", {{"method", "rtn"}, {"bits", 4}, {"granularity", "group"}, {"group_size", 64}}},
                    {"overrides", {{{"match", "model.layers.0.*"}, {"quantize", nullptr}},
                                   {{"match", "*.down_proj"}, {"quantize", {{"method", "rtn"}, {"bits", 8}, {"granularity", "channel"}}}}}}};
  QString error;
  ASSERT_TRUE(panel.setRecipe(doc, QString(), "doc", &error)) << str(error);
  auto* table = control<QTableWidget>(panel, "overridesTable");
  ASSERT_EQ(table->rowCount(), 2);
  EXPECT_EQ(str(table->item(0, RecipePanel::OverrideMatch)->text()), "model.layers.0.*");
  EXPECT_EQ(str(table->item(0, RecipePanel::OverridePrune)->text()), "—");
  EXPECT_EQ(str(table->item(0, RecipePanel::OverrideQuantize)->text()), "dense");
  EXPECT_EQ(json::parse(str(table->item(1, RecipePanel::OverrideQuantize)->text())), doc["overrides"][1]["quantize"]);
  EXPECT_EQ(panel.recipeJson()["overrides"], doc["overrides"]);

  // Editing a cell is one undo step.
  QUndoStack* undo = panel.undoStack();
  const int steps = undo->count();
  table->item(1, RecipePanel::OverrideMatch)->setText("*.mlp.*");
  QApplication::processEvents();
  EXPECT_EQ(panel.recipeJson()["overrides"][1]["match"], "*.mlp.*");
  EXPECT_EQ(undo->count(), steps + 1);
  // Add: a row that keeps layer 0 unquantized; Remove takes the selected rows.
  control<QPushButton>(panel, "addOverride")->click();
  EXPECT_EQ(panel.recipeJson()["overrides"].size(), 3u);
  table->selectRow(0);
  control<QPushButton>(panel, "removeOverride")->click();
  ASSERT_EQ(panel.recipeJson()["overrides"].size(), 2u);
  EXPECT_EQ(panel.recipeJson()["overrides"][0]["match"], "*.mlp.*");
  undo->undo();
  undo->undo();
  undo->undo();
  EXPECT_EQ(panel.recipeJson()["overrides"], doc["overrides"]);
  EXPECT_EQ(table->rowCount(), 2);

  // What the parser refuses is not taken, and the note says why.
  table->item(1, RecipePanel::OverrideQuantize)->setText(R"({"method": "rtn", "bits": 12})");
  QApplication::processEvents();
  EXPECT_EQ(panel.recipeJson()["overrides"], doc["overrides"]);
  EXPECT_TRUE(panel.overridesProblem().contains("bits")) << str(panel.overridesProblem());
  EXPECT_EQ(json::parse(str(table->item(1, RecipePanel::OverrideQuantize)->text())), doc["overrides"][1]["quantize"]);
  table->item(1, RecipePanel::OverridePrune)->setText("half");
  QApplication::processEvents();
  EXPECT_TRUE(panel.overridesProblem().contains("Row 2")) << str(panel.overridesProblem());
  EXPECT_EQ(panel.recipeJson()["overrides"], doc["overrides"]);
  // A pruning block in an override is taken as the parser reads it (the recipe's own method otherwise).
  table->item(0, RecipePanel::OverridePrune)->setText(R"({"method": "magnitude", "pattern": "4:8"})");
  QApplication::processEvents();
  EXPECT_TRUE(panel.overridesProblem().isEmpty()) << str(panel.overridesProblem());
  EXPECT_EQ(panel.recipeJson()["overrides"][0]["prune"]["pattern"], "4:8");
  EXPECT_NO_THROW(Recipe::fromJson(panel.recipeJson(), "", "panel"));

  // The run's label names the overrides.
  const QString label = describeRecipe(panel.recipeJson().dump());
  EXPECT_TRUE(label.contains("model.layers.0.* → magnitude 4:8 + unquantized")) << str(label);
  EXPECT_TRUE(label.contains("*.down_proj → rtn int8 channel")) << str(label);
}

// Point 8: SparseGPT's damping and block, GPTQ/SpQR's, and SpQR's outlier threshold, in a collapsed Advanced
// section: shown from a loaded recipe, written into the recipe when changed (one undo step each), enabled only
// for the methods they apply to; a threshold replaces the outlier ratio.
TEST(RecipePanel, AdvancedSolverSettings) {
  RecipePanel panel;
  auto* toggle = control<QToolButton>(panel, "advancedToggle");
  auto* group = control<QGroupBox>(panel, "advancedGroup");
  EXPECT_FALSE(group->isVisibleTo(&panel));   // collapsed at first
  toggle->click();
  EXPECT_TRUE(group->isVisibleTo(&panel));

  const json doc = {{"calibration", {{"source", "text"}, {"text", test::sharedPath("data/wikitext2-test.txt")}}},
                    {"prune", {{"method", "sparsegpt"}, {"pattern", "2:4"}, {"damp", 0.05}}}};
  QString error;
  ASSERT_TRUE(panel.setRecipe(doc, QString(), "doc", &error)) << str(error);
  auto* pruneDamp = control<QDoubleSpinBox>(panel, RecipePanel::kPruneDamp);
  auto* pruneBlock = control<QDoubleSpinBox>(panel, RecipePanel::kPruneBlock);
  auto* quantDamp = control<QDoubleSpinBox>(panel, RecipePanel::kQuantDamp);
  auto* threshold = control<QDoubleSpinBox>(panel, RecipePanel::kQuantOutlierThreshold);
  EXPECT_DOUBLE_EQ(pruneDamp->value(), 0.05);
  EXPECT_DOUBLE_EQ(pruneBlock->value(), 128);   // the parser's default, not written
  EXPECT_TRUE(pruneDamp->isEnabled());
  EXPECT_FALSE(quantDamp->isEnabled());
  EXPECT_FALSE(threshold->isEnabled());
  EXPECT_FALSE(panel.recipeJson()["prune"].contains("block"));

  const int steps = panel.undoStack()->count();
  pruneBlock->setValue(64);
  EXPECT_EQ(panel.recipeJson()["prune"]["block"], 64);
  pruneDamp->setValue(0.01);   // the default: left out again
  EXPECT_FALSE(panel.recipeJson()["prune"].contains("damp"));
  EXPECT_EQ(panel.undoStack()->count(), steps + 2);
  panel.undoStack()->undo();
  EXPECT_DOUBLE_EQ(panel.recipeJson()["prune"]["damp"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(pruneDamp->value(), 0.05);

  choose(panel, RecipePanel::kQuantMethod, "spqr");
  EXPECT_TRUE(quantDamp->isEnabled());
  EXPECT_TRUE(threshold->isEnabled());
  EXPECT_TRUE(panel.recipeJson()["quantize"].contains("outlier_ratio"));
  threshold->setValue(0.5);
  json q = panel.recipeJson()["quantize"];
  EXPECT_DOUBLE_EQ(q["outlier_threshold"].get<double>(), 0.5);
  EXPECT_FALSE(q.contains("outlier_ratio"));
  EXPECT_NO_THROW(Recipe::fromJson(panel.recipeJson(), "", "panel"));
  threshold->setValue(0);   // off: by the ratio again
  q = panel.recipeJson()["quantize"];
  EXPECT_FALSE(q.contains("outlier_threshold"));
  EXPECT_TRUE(q.contains("outlier_ratio"));
  quantDamp->setValue(0.1);
  EXPECT_DOUBLE_EQ(panel.recipeJson()["quantize"]["damp"].get<double>(), 0.1);
  EXPECT_NO_THROW(Recipe::fromJson(panel.recipeJson(), "", "panel"));
}

TEST(RecipePanel, OneSliderDragIsOneUndoStep) {
  RecipePanel panel;
  choose(panel, RecipePanel::kPruneMethod, "magnitude");
  choose(panel, RecipePanel::kPrunePattern, "unstructured");
  QUndoStack* undo = panel.undoStack();
  const int before = undo->count();
  QSlider* slider = control<QSlider>(panel, "prune.sparsity.slider");
  ASSERT_TRUE(slider->isEnabled());
  slider->setSliderDown(true);   // the press
  for (int v : {52, 55, 61, 68, 70}) slider->setValue(v);
  slider->setSliderDown(false);  // the release
  EXPECT_EQ(undo->count(), before + 1);
  EXPECT_DOUBLE_EQ(panel.value(RecipePanel::kPruneSparsity).toDouble(), 0.70);
  EXPECT_EQ(str(undo->undoText()), "Change Sparsity");

  // A second drag is a step of its own; plain value changes are one step each.
  slider->setSliderDown(true);
  for (int v : {72, 75}) slider->setValue(v);
  slider->setSliderDown(false);
  control<QDoubleSpinBox>(panel, RecipePanel::kPruneSparsity)->setValue(80);
  control<QDoubleSpinBox>(panel, RecipePanel::kPruneSparsity)->setValue(81);
  EXPECT_EQ(undo->count(), before + 4);

  undo->undo();
  undo->undo();
  EXPECT_DOUBLE_EQ(panel.value(RecipePanel::kPruneSparsity).toDouble(), 0.75);
  undo->undo();
  EXPECT_DOUBLE_EQ(panel.value(RecipePanel::kPruneSparsity).toDouble(), 0.70);
  undo->undo();   // the whole first drag at once
  EXPECT_DOUBLE_EQ(panel.value(RecipePanel::kPruneSparsity).toDouble(), 0.5);
  EXPECT_EQ(slider->value(), 50);   // the controls follow
  EXPECT_DOUBLE_EQ(panel.recipeJson()["prune"]["sparsity"].get<double>(), 0.5);
  undo->redo();
  EXPECT_DOUBLE_EQ(panel.value(RecipePanel::kPruneSparsity).toDouble(), 0.70);
  // A drag back to where it started leaves no step behind (and, like any edit, ends what could be redone).
  const int index = undo->index();
  slider->setSliderDown(true);
  slider->setValue(90);
  slider->setValue(70);
  slider->setSliderDown(false);
  EXPECT_EQ(undo->index(), index);
  EXPECT_EQ(undo->count(), index);
}

TEST(RecipePanel, EstimatesFollowEveryChange) {
  RecipePanel panel;
  panel.setModel(oneBlockModel());
  panel.setBandwidth({100e9, "test bandwidth"});
  const ModelSummary m = oneBlockModel();
  const double linearWeights = 4096.0 * 11008 * 2 + 4096.0 * 4096;

  choose(panel, RecipePanel::kPruneMethod, "magnitude");   // 2:4 by default
  ASSERT_TRUE(panel.estimate());
  EXPECT_DOUBLE_EQ(panel.estimate()->linearBitsPerWeight, 9.0);   // bf16 halves + one mask bit per weight
  EXPECT_TRUE(textOf(&panel, "estimate.linearBits").startsWith("9.000")) << str(textOf(&panel, "estimate.linearBits"));

  choose(panel, RecipePanel::kQuantMethod, "rtn");   // int4 g128 of the kept values
  EXPECT_DOUBLE_EQ(panel.estimate()->linearBitsPerWeight, 0.5 * (4 + 16.0 / 128) + 1);
  choose(panel, RecipePanel::kPruneMethod, "none");
  EXPECT_DOUBLE_EQ(panel.estimate()->linearBitsPerWeight, 4.125);
  control<QCheckBox>(panel, RecipePanel::kQuantSymmetric)->setChecked(false);
  EXPECT_DOUBLE_EQ(panel.estimate()->linearBitsPerWeight, 4 + 24.0 / 128);

  // Size and tokens/s: the head and embedding stay bf16; a decode step reads the head and the blocks.
  const RecipeEstimate& e = *panel.estimate();
  const double head = 32000.0 * 4096 * 2, norm = 4096 * 2;
  const double linearBytes = linearWeights * (4 + 24.0 / 128) / 8;
  EXPECT_EQ(e.modelBytes, uint64_t(head * 2 + norm + linearBytes));
  EXPECT_EQ(e.bytesPerToken, uint64_t(head + norm + linearBytes));
  EXPECT_DOUBLE_EQ(e.tokensPerSecond, 100e9 / double(e.bytesPerToken));
  EXPECT_DOUBLE_EQ(e.denseTokensPerSecond, 100e9 / (head + norm + linearWeights * 2));
  EXPECT_EQ(e.denseModelBytes, m.bytes);
  EXPECT_TRUE(textOf(&panel, "estimate.tokensPerSecond").contains("test bandwidth"));

  // A group size that does not divide a module's columns is a problem named before any run.
  choose(panel, RecipePanel::kQuantGroupSize, "256");
  control<QSpinBox>(panel, RecipePanel::kQuantBits)->setValue(3);
  EXPECT_TRUE(panel.problems().isEmpty()) << str(panel.problems().join("\n"));   // 11008 = 43 · 256
  QString error;
  ASSERT_TRUE(panel.setRecipe({{"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 96}}}}, QString(), "x", &error));
  EXPECT_TRUE(panel.problems().join("\n").contains("model.layers.0.mlp.down_proj")) << str(panel.problems().join("\n"));
}

// The estimate is the bytes the compress job writes, format by format (ref-tiny, bf16).
TEST(RecipeEstimate, EqualsWhatTheCompressJobWrites) {
  PARETO_REQUIRE_SHARED();
  const std::string scratch = test::scratchDir("widgets-estimate");
  const std::string text = test::sharedPath("data/heldout-prose.txt");
  const ModelSummary model = refTiny();
  std::vector<std::pair<std::string, std::string>> recipes = {
      {"mag24", R"({"prune": {"method": "magnitude", "pattern": "2:4"}})"},
      {"rtn4", R"({"quantize": {"method": "rtn", "bits": 4, "group_size": 64, "symmetric": false}})"},
      {"rtn3ch", R"({"quantize": {"method": "rtn", "bits": 3, "granularity": "channel"}})"},
      {"mag48int4", R"({"prune": {"method": "magnitude", "pattern": "4:8"},
                        "quantize": {"method": "rtn", "bits": 4, "group_size": 32}})"},
      {"spqr3", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 128, "window": 64},
                    "quantize": {"method": "spqr", "bits": 3, "outlier_ratio": 0.01}})"},
      {"mag24spqr", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 128, "window": 64},
                        "prune": {"method": "magnitude", "pattern": "2:4"},
                        "quantize": {"method": "spqr", "bits": 3, "outlier_ratio": 0.005}})"},
      {"gptq4act", R"({"calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 128, "window": 64},
                       "quantize": {"method": "gptq", "bits": 4, "group_size": 64, "act_order": true,
                                    "static_groups": true}})"}};
  // The shipped 2:4 + GPTQ 4-bit recipe (format bitmask-2:4+int4) with a short calibration, and groups of 32
  // kept values: ref-tiny's 192-column linears keep 96 values a row, which groups of 64 do not divide; then
  // the same with act-order (the int32 column order is stored too).
  json gptq24 = json::parse(std::ifstream(PARETO_SOURCE_DIR "/resources/recipes/sparsegpt-2of4-gptq4.json"));
  gptq24["calibration"] = {{"source", "text"}, {"text", text}, {"tokens", 128}, {"window", 64}};
  gptq24["quantize"]["group_size"] = 32;
  recipes.emplace_back("sgpt24gptq4", gptq24.dump());
  gptq24["quantize"]["act_order"] = true;
  {
    // Act-order with dynamic groups is refused by the job, so it is a problem of the estimate.
    const std::string path = scratch + "/dynamic-act-order.json";
    std::ofstream(path) << gptq24.dump();
    const RecipeEstimate e = estimateRecipe(Recipe::fromFile(path), model, {});
    ASSERT_EQ(e.problems.size(), e.modules.size());
    EXPECT_NE(e.problems.front().find("needs static groups"), std::string::npos) << e.problems.front();
  }
  gptq24["quantize"]["static_groups"] = true;
  recipes.emplace_back("sgpt24gptq4act", gptq24.dump());
  // SpQR after unstructured pruning: outliers are a share of the kept weights, which Wanda counts per row and
  // SparseGPT per block of columns (0.37 and a large outlier ratio make the scopes' counts differ in bytes).
  const std::string calibration =
      R"("calibration": {"source": "text", "text": ")" + text + R"(", "tokens": 128, "window": 64}, )";
  recipes.emplace_back("wanda37spqr", "{" + calibration + R"("prune": {"method": "wanda", "sparsity": 0.37},
      "quantize": {"method": "spqr", "bits": 3, "outlier_ratio": 0.25}})");
  recipes.emplace_back("sgpt37spqr", "{" + calibration + R"("prune": {"method": "sparsegpt", "sparsity": 0.37,
      "block": 96}, "quantize": {"method": "spqr", "bits": 3, "outlier_ratio": 0.25}})");
  recipes.emplace_back("sgpt24spqr", "{" + calibration + R"("prune": {"method": "sparsegpt", "pattern": "2:4"},
      "quantize": {"method": "spqr", "bits": 4, "outlier_ratio": 0.02}})");
  for (const auto& [name, doc] : recipes) {
    SCOPED_TRACE(name);
    const std::string path = scratch + "/" + name + ".json";
    std::ofstream(path) << doc;
    const Recipe recipe = Recipe::fromFile(path);
    const RecipeEstimate e = estimateRecipe(recipe, model, {});
    EXPECT_TRUE(e.problems.empty()) << e.problems.front();
    EXPECT_TRUE(e.notes.empty()) << e.notes.front();   // every count is known before the run
    CompressOptions o;
    o.modelDir = test::sharedPath("models/ref-tiny");
    o.recipePath = path;
    o.outDir = scratch + "/" + name;
    const CompressReport r = runCompress(o);
    test::expectEstimateIsWhatWasWritten(e, r);
  }
}

TEST(RecipeEstimate, RefusesACompressedModelAndNamesIt) {
  ModelSummary m = oneBlockModel();
  m.compressed = true;
  try {
    estimateRecipe(Recipe{}, m, {});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/models/one-block"), std::string::npos) << e.what();
  }
}

TEST(RecipeEstimate, MeasuresAHostBandwidth) {
  const double bw = measureHostCopyBandwidth(size_t(8) << 20);
  EXPECT_GT(bw, 1e8);    // any machine copies faster than 100 MB/s
  EXPECT_LT(bw, 1e13);   // and slower than 10 TB/s
}

TEST(RecipePanel, EveryEstimateSaysWhatItMeans) {
  RecipePanel panel;
  for (const QLabel* label : panel.findChildren<QLabel*>())
    EXPECT_FALSE(label->toolTip().isEmpty()) << "no tooltip on " << str(label->objectName()) << " "
                                                               << str(label->text());
  for (const char* name : {"estimate.linearBits", "estimate.modelBits", "estimate.size", "estimate.tokensPerSecond"})
    EXPECT_FALSE(panel.findChild<QLabel*>(name)->toolTip().isEmpty()) << name;
}

}  // namespace
}  // namespace pareto
