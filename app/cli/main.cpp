// pareto-cli: the headless face of the engine. Every command prints human text by default and exactly one
// JSON object on stdout with --json. Exit codes: 0 ok, 1 internal failure, 2 bad input (files, options),
// 130 cancelled (Ctrl-C).
#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <string>

#include "CliSupport.h"
#include "Commands.h"
#include "util/Error.h"
#include "util/Version.h"

int main(int argc, char** argv) {
  CLI::App app{"Pareto: compress large language models and measure what it costs and buys.\n"
               "Run `pareto-cli COMMAND --help` for a command's options."};
  app.name("pareto-cli");
  app.set_version_flag("--version", std::string("pareto-cli ") + pareto::paretoVersion());
  app.require_subcommand(1);
  pareto::cli::addRecordingOptions(app);   // first: subcommands inherit its fallthrough
  app.add_flag_callback("--quiet", [] { pareto::cli::setQuiet(true); },
                        "No progress on stderr (by default a bar on a terminal, else a line at most every 2 s)");
  pareto::cli::addInspectCommand(app);
  pareto::cli::addPerplexityCommand(app);
  pareto::cli::addScoreCommand(app);
  pareto::cli::addGenerateCommand(app);
  pareto::cli::addTokenizeCommands(app);
  pareto::cli::addAnalyzeCommand(app);
  pareto::cli::addFidelityCommand(app);
  pareto::cli::addCompressCommand(app);
  pareto::cli::addSearchCommand(app);
  pareto::cli::addBenchCommand(app);
  pareto::cli::addRunsCommand(app);
  pareto::cli::addExportCommand(app);
  pareto::cli::addSynthesizeCommand(app);

  try {
    app.parse(argc, argv);
    pareto::cli::checkStdout();   // a result lost on a full disk or a closed pipe is a failure, not exit 0
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const pareto::Cancelled&) {
    pareto::cli::printErrorLine(std::string("pareto-cli: cancelled (") + pareto::cli::cancelSignalName() + ")");
    return pareto::cli::cancelledExitCode();
  } catch (const pareto::InputError& e) {
    pareto::cli::printErrorLine("pareto-cli: error: " + pareto::cli::terminalSafe(e.what()));
    return 2;
  } catch (const c10::Error& e) {
    pareto::cli::printErrorLine("pareto-cli: error: " + pareto::cli::terminalSafe(e.what_without_backtrace()));
    return 1;
  } catch (const std::exception& e) {
    pareto::cli::printErrorLine("pareto-cli: error: " + pareto::cli::terminalSafe(e.what()));
    return 1;
  }
  return 0;
}
