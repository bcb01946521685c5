// Each pareto-cli subcommand lives in its own file and registers itself on the CLI11 app.
#pragma once

namespace CLI {
class App;
}

namespace pareto::cli {

void addInspectCommand(CLI::App& app);
void addPerplexityCommand(CLI::App& app);
void addScoreCommand(CLI::App& app);
void addGenerateCommand(CLI::App& app);
void addTokenizeCommands(CLI::App& app);   // tokenize, detokenize
void addAnalyzeCommand(CLI::App& app);     // analyze hessian, analyze drift
void addDriftSubcommand(CLI::App& analyze); // analyze drift (registered by addAnalyzeCommand)
void addFidelityCommand(CLI::App& app);
void addCompressCommand(CLI::App& app);

}  // namespace pareto::cli
