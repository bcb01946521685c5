// Each pareto-cli subcommand lives in its own file and registers itself on the CLI11 app.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace pareto {
struct BenchmarkOptions;
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
void addBenchCommand(CLI::App& app);        // bench kernels, bench decode
void addBenchDecodeCommand(CLI::App& bench);   // bench decode (a subcommand of bench)
// What both bench commands do with their options: core's benchmark job, recorded once finished, its JSON written to
// `output` (when given) and printed (or its table).
void runBenchmark(const BenchmarkOptions& options, const std::string& output, bool json);
void addRecordingOptions(CLI::App& app);   // global --db, --no-record (RunRecording.h)
void addRunsCommand(CLI::App& app);        // runs list/show/compare/export/delete
void addExportCommand(CLI::App& app);      // export hf
void addSynthesizeCommand(CLI::App& app);  // synthesize (a random-weight checkpoint of a preset)
void addSearchCommand(CLI::App& app);      // search (per-module candidates under a budget)

}  // namespace pareto::cli
