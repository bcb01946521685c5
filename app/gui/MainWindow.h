// The workbench window. For now it opens a model folder and shows what `pareto-cli inspect` shows: the Model
// dock holds the summary and tensor table, the central tabs the inspect report. Later docks (Recipe, Runs,
// Generation) and plot tabs attach to the same dock areas and tab widget.
#pragma once

#include <QMainWindow>
#include <functional>

class QMenu;
class QPlainTextEdit;
class QTabWidget;
class QLabel;

namespace pareto {

class ModelSummaryView;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);

  // Reads the folder's config and safetensors headers and shows them. On failure the message (naming the folder
  // or file at fault) goes to the error reporter and the model shown before stays; returns whether it loaded.
  bool openModel(const QString& dir);

  // Where errors go: a modal message box unless replaced (tests replace it so that nothing blocks).
  using ErrorReporter = std::function<void(const QString& title, const QString& message)>;
  void setErrorReporter(ErrorReporter reporter);

  ModelSummaryView* modelView() const { return modelView_; }
  QString currentModelDir() const { return currentModelDir_; }

 protected:
  void closeEvent(QCloseEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void createDocksAndTabs();
  void createMenus();
  void chooseModelFolder();
  void rebuildRecentMenu();
  void showAbout();
  void restoreWindowLayout();
  void saveWindowLayout() const;

  ModelSummaryView* modelView_ = nullptr;
  QPlainTextEdit* inspectText_ = nullptr;
  QTabWidget* centralTabs_ = nullptr;
  QMenu* viewMenu_ = nullptr;
  QMenu* recentMenu_ = nullptr;
  QLabel* modelStatus_ = nullptr;
  QString currentModelDir_;
  ErrorReporter reportError_;
};

}  // namespace pareto
