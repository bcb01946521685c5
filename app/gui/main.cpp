// pareto [MODEL_DIR]: the workbench.
#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>
#include <cstdio>

#include "app/gui/MainWindow.h"

namespace {

void describeApplication() {
  QCoreApplication::setOrganizationName("Pareto");
  QCoreApplication::setApplicationName("pareto");
  QCoreApplication::setApplicationVersion(PARETO_VERSION);
}

void defineOptions(QCommandLineParser& parser) {
  parser.setApplicationDescription("Pareto: a workbench for compressing large language models.");
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument("MODEL_DIR", "Model folder to open at start (config.json and safetensors).",
                               "[MODEL_DIR]");
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
  if (positional.size() > 1) {
    std::fprintf(stderr, "pareto: expected at most one MODEL_DIR, got %lld\n",
                 static_cast<long long>(positional.size()));
    return 2;
  }

  pareto::MainWindow window;
  window.show();
  if (!positional.isEmpty()) {
    const QString dir = positional.constFirst();
    // After show(), so that an error box has its window to sit on.
    QTimer::singleShot(0, &window, [&window, dir] { window.openModel(dir); });
  }
  return app.exec();
}
