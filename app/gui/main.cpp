// pareto [MODEL_DIR]: the workbench.
// pareto --model DIR --screenshot FILE [--tab NAME]... [--run RECIPE]...: renders the window after loading the
// model (and, with --run, after compressing and evaluating with each recipe in turn) to a PNG and exits; for
// documentation and for tests (run it with QT_QPA_PLATFORM=offscreen, or under Xvfb, where there is no display).
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QEventLoop>
#include <QFileInfo>
#include <QTimer>
#include <cstdio>

#include "app/gui/MainWindow.h"
#include "widgets/EvaluationPanel.h"
#include "widgets/RecipePanel.h"
#include "util/Version.h"

namespace {

void describeApplication() {
  QCoreApplication::setOrganizationName("Pareto");
  QCoreApplication::setApplicationName("pareto");
  QCoreApplication::setApplicationVersion(QString::fromUtf8(pareto::paretoVersion()));
}

void defineOptions(QCommandLineParser& parser) {
  parser.setApplicationDescription("Pareto: a workbench for compressing large language models.");
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument("MODEL_DIR", "Model folder to open at start (config.json and safetensors).",
                               "[MODEL_DIR]");
  parser.addOption({"model", "Model folder to open at start (same as MODEL_DIR).", "DIR"});
  parser.addOption({"screenshot", "Render the window to this PNG file and exit (after --run, if given).", "FILE"});
  parser.addOption({"tab", "Central tab to show: Inspect, Drift, Discrepancy, Pareto, Compare or Benchmark; repeat "
                           "for one screenshot per tab (FILE-<tab>.png).", "NAME"});
  parser.addOption({"run", "Load this recipe and run it (compress and evaluate) before the screenshot; repeat for "
                           "several runs (the last one is shown).", "RECIPE"});
  parser.addOption({"eval-text", "Held-out text for perplexity (overrides the saved evaluation setting).", "FILE"});
  parser.addOption({"eval-prompts", "Held-out prompts for fidelity, drift and the Hessian study.", "FILE"});
  parser.addOption({"hessian-study", "Include the Hessian discrepancy study in the run."});
  parser.addOption({"device", "Run on this device: cpu or cuda:N.", "DEVICE"});
}

int fail(const QString& message) {
  std::fprintf(stderr, "pareto: %s\n", qPrintable(message));
  return 2;
}

// Waits for `signal` of `sender` with the event loop running; false on timeout.
template <typename Sender, typename Signal>
bool waitFor(const Sender* sender, Signal signal, int timeoutMs) {
  QEventLoop loop;
  QTimer timer;
  timer.setSingleShot(true);
  QObject::connect(&timer, &QTimer::timeout, &loop, [&loop] { loop.exit(1); });
  QObject::connect(sender, signal, &loop, [&loop] { loop.exit(0); });
  timer.start(timeoutMs);
  return loop.exec() == 0;
}

}  // namespace

int main(int argc, char** argv) {
  // --help and --version are answered before QApplication exists, so that they work without a display.
  {
    QCoreApplication cli(argc, argv);
    describeApplication();
    QCommandLineParser parser;
    defineOptions(parser);
    parser.parse(cli.arguments());
    if (parser.isSet("help") || parser.isSet("help-all") || parser.isSet("version")) parser.process(cli);
  }

  // QApplication takes its own options (-platform, -style, ...) out of argv before we parse the rest.
  QApplication app(argc, argv);
  describeApplication();
  QCommandLineParser parser;
  defineOptions(parser);
  parser.process(app);  // exits with a message on unknown options
  const QStringList positional = parser.positionalArguments();
  if (positional.size() > 1)
    return fail(QStringLiteral("expected at most one MODEL_DIR, got %1").arg(positional.size()));
  QString modelDir = parser.value("model");
  if (modelDir.isEmpty() && !positional.isEmpty()) modelDir = positional.constFirst();
  const QString screenshot = parser.value("screenshot");
  if (!screenshot.isEmpty() && modelDir.isEmpty()) return fail("--screenshot needs --model DIR");
  if (parser.isSet("run") && screenshot.isEmpty()) return fail("--run is for screenshots; give --screenshot FILE");

  pareto::MainWindow window;
  window.show();
  if (screenshot.isEmpty()) {
    if (!modelDir.isEmpty()) {
      // After show(), so that an error box has its window to sit on.
      QTimer::singleShot(0, &window, [&window, modelDir] { window.openModel(modelDir); });
    }
    return app.exec();
  }

  // Screenshot mode: errors go to stderr and the exit code, never to a dialog nobody can close.
  QStringList errors;
  window.setErrorReporter([&errors](const QString& title, const QString& message) { errors << title + ": " + message; });
  if (!waitFor(&window, &pareto::MainWindow::devicesReady, 60000)) return fail("probing the devices timed out");
  if (parser.isSet("device")) window.selectDevice(parser.value("device"));
  if (!window.openModel(modelDir)) return fail(errors.join("\n"));
  if (parser.isSet("run")) {
    pareto::EvaluationSettings eval = window.evaluationPanel()->settings();
    if (parser.isSet("eval-text")) eval.heldOutText = parser.value("eval-text");
    if (parser.isSet("eval-prompts")) eval.prompts = parser.value("eval-prompts");
    if (parser.isSet("hessian-study")) eval.hessianStudy = true;
    window.evaluationPanel()->setSettings(eval);
    bool succeeded = false;
    QString message;
    QObject::connect(&window, &pareto::MainWindow::runEnded, [&](bool ok, const QString& m) {
      succeeded = ok;
      message = m;
    });
    for (const QString& recipe : parser.values("run")) {
      QString error;
      if (!window.recipePanel()->loadRecipeFile(recipe, &error)) return fail(error);
      if (!window.startRun()) return fail(errors.join("\n"));
      waitFor(&window, &pareto::MainWindow::runEnded, 24 * 3600 * 1000);
      if (!succeeded) return fail(message);
      std::fprintf(stderr, "pareto: %s\n", qPrintable(message));
    }
  }
  // One screenshot per --tab; with several, FILE.png becomes FILE-<tab>.png for each.
  QStringList tabs = parser.values("tab");
  if (tabs.isEmpty()) tabs << QString();
  for (const QString& tab : tabs) {
    if (!tab.isEmpty() && !window.selectTab(tab))
      return fail(QStringLiteral("no tab named \"%1\" (tabs: %2)").arg(tab, window.tabNames().join(", ")));
    QApplication::processEvents();   // lay out and paint the tab just chosen
    QString path = screenshot;
    if (tabs.size() > 1) {
      const QFileInfo info(screenshot);
      path = info.dir().filePath(QStringLiteral("%1-%2.%3").arg(info.completeBaseName(), tab.toLower(), info.suffix()));
    }
    QString error;
    if (!window.saveScreenshot(path, &error)) return fail(error);
  }
  return 0;
}
