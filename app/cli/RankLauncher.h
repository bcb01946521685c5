// `--processes N`: this command run as N processes of one distributed job on this host. The launcher re-runs
// this program (/proc/self/exe) with its own arguments, less --processes, plus --rank R --world-size N --master
// 127.0.0.1:PORT (a free port; rank 0 serves the rendezvous there) and LOCAL_RANK=R in the environment (which GPU
// a rank takes with --device cuda). Ranks above 0 run with --quiet --no-record: rank 0 draws the progress, prints
// the result and records the run.
#pragma once

#include <string>

namespace pareto::cli {

// Runs the ranks and waits for them. SIGINT/SIGTERM/SIGHUP sent to the launcher alone go on to every rank (a
// terminal's Ctrl-C reaches them directly); cancelled ranks end the launcher with their exit status (130, 143,
// 129). When a rank fails, the others are stopped (SIGTERM, then SIGKILL after a grace period) and the launcher
// throws as that rank failed: InputError for exit status 2, otherwise Error naming the rank and its status or
// signal. `option` is how the user wrote the flag ("--processes").
void runRanks(int processes, const std::string& option);

}  // namespace pareto::cli
