// The workbench's widgets and main window, offscreen: values shown for a summary, tooltips on every metric,
// opening the reference model, errors from bad folders reported (not thrown, not crashing), settings persisted.
#include <gtest/gtest.h>

#include <QAbstractItemModel>
#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMenu>
#include <QPlainTextEdit>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <filesystem>
#include <fstream>
#include <memory>

#include "SharedData.h"
#include "app/gui/MainWindow.h"
#include "widgets/DisplayFormat.h"
#include "widgets/ModelSummaryView.h"

namespace pareto {
namespace {

// The "text" property of a named child (QLabel and QLineEdit both have one).
QString textOf(const QObject* root, const char* name) {
  const QObject* child = root->findChild<QObject*>(name);
  if (child == nullptr) {
    ADD_FAILURE() << "no child named " << name;
    return {};
  }
  return child->property("text").toString();
}

std::string str(const QString& s) { return s.toStdString(); }

ModelSummary syntheticSummary() {
  ModelSummary s;
  s.path = "/models/synthetic";
  s.architecture = "LlamaForCausalLM";
  s.modelType = "llama";
  s.vocabSize = 32000;
  s.hiddenSize = 4096;
  s.intermediateSize = 11008;
  s.numLayers = 32;
  s.numHeads = 32;
  s.numKvHeads = 8;
  s.headDim = 128;
  s.tiedEmbeddings = false;
  s.dtype = "BF16";
  s.files = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
  s.tensors = {{"lm_head.weight", "BF16", {32000, 4096}, 32000ull * 4096 * 2},
               {"model.layers.10.mlp.up_proj.weight", "BF16", {11008, 4096}, 11008ull * 4096 * 2},
               {"model.layers.2.input_layernorm.weight", "F32", {4096}, 4096ull * 4},
               {"model.layers.2.mlp.up_proj.weight", "BF16", {11008, 4096}, 11008ull * 4096 * 2}};
  for (const auto& t : s.tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    s.parameters += n;
    s.bytes += t.bytes;
  }
  return s;
}

QStringList column(const QAbstractItemModel* model, int col) {
  QStringList values;
  for (int r = 0; r < model->rowCount(); ++r) values << model->index(r, col).data().toString();
  return values;
}

class Settings : public ::testing::Test {
 protected:
  void SetUp() override { QSettings().clear(); }
};

TEST(DisplayFormat, SizesCountsAndShapes) {
  EXPECT_EQ(str(display::bytes(512)), "512 B");
  EXPECT_EQ(str(display::bytes(3ull * 1024 * 1024)), "3.00 MiB");
  EXPECT_EQ(str(display::count(15728640)), "15.73 M (15,728,640)");
  EXPECT_EQ(str(display::count(999)), "999");
  EXPECT_EQ(str(display::shape({8192, 384})), "[8192, 384]");
  EXPECT_EQ(str(display::shape({})), "[]");
  EXPECT_LT(display::naturalSortKey("layers.2.x"), display::naturalSortKey("layers.10.x"));
  EXPECT_LT(display::naturalSortKey("a9"), display::naturalSortKey("b1"));
}

TEST(ModelSummaryView, ShowsTheSummary) {
  ModelSummaryView view;
  ModelSummary s = syntheticSummary();
  view.setSummary(s);
  EXPECT_EQ(str(textOf(&view, "path")), "/models/synthetic");
  EXPECT_EQ(str(textOf(&view, "architecture")), "LlamaForCausalLM (llama)");
  EXPECT_EQ(textOf(&view, "parameters"), display::count(s.parameters));
  EXPECT_EQ(textOf(&view, "size"), display::bytes(s.bytes));
  EXPECT_TRUE(textOf(&view, "dtype").startsWith("BF16"));
  EXPECT_EQ(str(textOf(&view, "layers")), "32");
  EXPECT_EQ(str(textOf(&view, "hidden")), "4,096");
  EXPECT_EQ(str(textOf(&view, "ffn")), "11,008");
  EXPECT_EQ(str(textOf(&view, "heads")), "32");
  EXPECT_EQ(str(textOf(&view, "kvHeads")), "8 (grouped-query attention: 4 query heads share each)");
  EXPECT_EQ(str(textOf(&view, "headDim")), "128");
  EXPECT_EQ(str(textOf(&view, "vocab")), "32,000");
  EXPECT_EQ(str(textOf(&view, "tiedEmbeddings")), "no");
  EXPECT_TRUE(textOf(&view, "files").contains("model-00002-of-00002.safetensors"));
  EXPECT_EQ(view.tensorTable()->rowCount(), 4);
  EXPECT_EQ(str(textOf(&view, "tensorCount")), "4 tensors");
}

// A compressed folder's formats, with GPTQ act-order (ModuleFormatSummary::actOrder) marked per format.
TEST(ModelSummaryView, ShowsCompressedFormatsAndActOrder) {
  ModelSummaryView view;
  ModelSummary s = syntheticSummary();
  view.setSummary(s);
  EXPECT_EQ(str(textOf(&view, "compression")), "none (dense checkpoint)");
  s.compressed = true;
  s.linearBitsPerWeight = 3.125;
  s.modules = {{"model.layers.0.mlp.up_proj", "bitmask-2:4+int4-g128", 3.125, 0.5, "sparsegpt+gptq", true},
               {"model.layers.1.mlp.up_proj", "bitmask-2:4+int4-g128", 3.125, 0.5, "sparsegpt+gptq", true},
               {"model.layers.0.self_attn.q_proj", "int4-g128", 4.25, 0, "gptq", true},
               {"model.layers.1.self_attn.q_proj", "int4-g128", 4.125, 0, "gptq", false},
               {"model.layers.0.self_attn.k_proj", "bitmask-2:4+spqr-3bit", 2.1, 0.5, "magnitude+spqr", false}};
  view.setSummary(s);
  EXPECT_EQ(str(textOf(&view, "compression")),
            "3.125 bits per weight over the block linears\n"
            "bitmask-2:4+int4-g128: 2 modules (act-order)\n"
            "int4-g128: 2 modules (act-order in 1)\n"
            "bitmask-2:4+spqr-3bit: 1 module");
  EXPECT_TRUE(view.findChild<QLabel*>("compression")->toolTip().contains("qperm"));
  view.clear();
  EXPECT_EQ(str(textOf(&view, "compression")), "—");
}

TEST(ModelSummaryView, TensorTableSortsNaturallyAndNumerically) {
  ModelSummaryView view;
  view.setSummary(syntheticSummary());
  QAbstractItemModel* table = view.tensorTable();
  // Default: by name, with layer numbers in numeric order.
  EXPECT_EQ(column(table, ModelSummaryView::NameColumn),
            QStringList({"lm_head.weight", "model.layers.2.input_layernorm.weight",
                         "model.layers.2.mlp.up_proj.weight", "model.layers.10.mlp.up_proj.weight"}));
  EXPECT_EQ(str(table->index(0, ModelSummaryView::ShapeColumn).data().toString()), "[32000, 4096]");
  EXPECT_EQ(str(table->index(1, ModelSummaryView::DtypeColumn).data().toString()), "F32");

  // By bytes, descending: sizes compare as numbers, not as the "84.00 MiB" text shown.
  table->sort(ModelSummaryView::BytesColumn, Qt::DescendingOrder);
  EXPECT_EQ(str(table->index(0, ModelSummaryView::NameColumn).data().toString()), "lm_head.weight");
  EXPECT_EQ(str(table->index(3, ModelSummaryView::NameColumn).data().toString()),
            "model.layers.2.input_layernorm.weight");
  EXPECT_EQ(str(table->index(3, ModelSummaryView::BytesColumn).data().toString()), "16.00 KiB");
}

TEST(ModelSummaryView, FilterNarrowsTheTable) {
  ModelSummaryView view;
  view.setSummary(syntheticSummary());
  auto* filter = view.findChild<QLineEdit*>("tensorFilter");
  ASSERT_NE(filter, nullptr);
  filter->setText("UP_PROJ");
  EXPECT_EQ(view.tensorTable()->rowCount(), 2);
  EXPECT_EQ(str(textOf(&view, "tensorCount")), "2 of 4 tensors");
  filter->clear();
  EXPECT_EQ(view.tensorTable()->rowCount(), 4);
}

TEST(ModelSummaryView, EveryMetricSaysWhatItMeans) {
  ModelSummaryView view;
  const auto labels = view.findChildren<QLabel*>();
  ASSERT_GE(labels.size(), 26);  // 13 metrics, each a caption and a value, plus the folder and the count
  for (const QLabel* label : labels)
    EXPECT_FALSE(label->toolTip().isEmpty())
        << "no tooltip on " << str(label->objectName()) << " " << str(label->text());
  for (int c = 0; c < ModelSummaryView::ColumnCount; ++c)
    EXPECT_FALSE(view.tensorTable()->headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString().isEmpty());
}

TEST(ModelSummaryView, ClearEmptiesEverything) {
  ModelSummaryView view;
  view.setSummary(syntheticSummary());
  view.clear();
  EXPECT_EQ(view.tensorTable()->rowCount(), 0);
  EXPECT_TRUE(textOf(&view, "path").isEmpty());
  EXPECT_EQ(str(textOf(&view, "architecture")), "—");
  EXPECT_EQ(str(textOf(&view, "tensorCount")), "no tensors");
}

// A MainWindow whose errors are collected instead of shown in a modal box.
struct TestWindow {
  TestWindow() {
    window.setErrorReporter([this](const QString&, const QString& message) { errors << message; });
  }
  MainWindow window;
  QStringList errors;
};

using MainWindowTest = Settings;

TEST_F(MainWindowTest, OpensTheReferenceModel) {
  PARETO_REQUIRE_SHARED();
  const QString dir = QString::fromStdString(test::sharedPath("models/ref-small"));
  TestWindow t;
  ASSERT_TRUE(t.window.openModel(dir)) << str(t.errors.join("\n"));
  EXPECT_TRUE(t.errors.isEmpty());
  const ModelSummaryView* view = t.window.modelView();
  EXPECT_TRUE(textOf(view, "architecture").startsWith("LlamaForCausalLM"));
  EXPECT_EQ(str(textOf(view, "layers")), "8");
  EXPECT_EQ(str(textOf(view, "hidden")), "384");
  EXPECT_TRUE(textOf(view, "tiedEmbeddings").startsWith("yes"));
  EXPECT_EQ(view->tensorTable()->rowCount(), 74);
  EXPECT_TRUE(t.window.windowTitle().contains("ref-small"));
  auto* inspect = t.window.findChild<QPlainTextEdit*>("inspectText");
  ASSERT_NE(inspect, nullptr);
  EXPECT_TRUE(inspect->toPlainText().contains("LlamaForCausalLM")) << str(inspect->toPlainText());
  EXPECT_NE(t.window.findChild<QDockWidget*>("modelDock"), nullptr);
}

TEST_F(MainWindowTest, BadFoldersAreReportedNotThrown) {
  const std::string scratch = test::scratchDir("widgets-bad-folders");
  const std::string empty = scratch + "/empty";
  const std::string corrupt = scratch + "/corrupt";
  std::filesystem::create_directories(empty);
  std::filesystem::create_directories(corrupt);
  std::ofstream(corrupt + "/config.json") << "{ not json";
  std::ofstream(corrupt + "/model.safetensors") << "abc";

  TestWindow t;
  for (const std::string& dir : {scratch + "/missing", empty, corrupt}) {
    t.errors.clear();
    EXPECT_FALSE(t.window.openModel(QString::fromStdString(dir)));
    ASSERT_EQ(t.errors.size(), 1) << dir;
    EXPECT_TRUE(t.errors[0].contains(QString::fromStdString(dir))) << str(t.errors[0]);
  }
  EXPECT_TRUE(t.window.currentModelDir().isEmpty());
  EXPECT_EQ(t.window.modelView()->tensorTable()->rowCount(), 0);
}

TEST_F(MainWindowTest, AFailedOpenKeepsTheModelShown) {
  PARETO_REQUIRE_SHARED();
  TestWindow t;
  const QString dir = QString::fromStdString(test::sharedPath("models/ref-tiny"));
  ASSERT_TRUE(t.window.openModel(dir));
  EXPECT_FALSE(t.window.openModel(dir + "/no-such-folder"));
  EXPECT_EQ(t.errors.size(), 1);
  EXPECT_EQ(t.window.currentModelDir(), QFileInfo(dir).absoluteFilePath());
  EXPECT_EQ(str(textOf(t.window.modelView(), "hidden")), "192");
}

TEST_F(MainWindowTest, RecentModelsPersist) {
  PARETO_REQUIRE_SHARED();
  const QString dir = QFileInfo(QString::fromStdString(test::sharedPath("models/ref-tiny"))).absoluteFilePath();
  {
    TestWindow t;
    ASSERT_TRUE(t.window.openModel(dir));
  }
  TestWindow reopened;
  auto* recent = reopened.window.findChild<QMenu*>("recentMenu");
  ASSERT_NE(recent, nullptr);
  ASSERT_FALSE(recent->actions().isEmpty());
  EXPECT_EQ(recent->actions().first()->text(), dir);
  EXPECT_TRUE(recent->actions().first()->isEnabled());
}

TEST_F(MainWindowTest, WindowLayoutPersists) {
  {
    TestWindow t;
    t.window.show();
    t.window.resize(1000, 700);   // above the window's minimum size with every dock
    QApplication::processEvents();
    t.window.close();
  }
  EXPECT_TRUE(QSettings().contains("mainWindow/geometry"));
  EXPECT_TRUE(QSettings().contains("mainWindow/state"));
  TestWindow reopened;
  EXPECT_EQ(reopened.window.size(), QSize(1000, 700));
}

}  // namespace
}  // namespace pareto
