#include <CLI/CLI.hpp>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <memory>
#include <sstream>

#include "CliSupport.h"
#include "Commands.h"
#include "RankLauncher.h"
#include "RunRecording.h"
#include "MemoryOptions.h"
#include "checkpoint/ShardPlan.h"
#include "compress/CompressResume.h"
#include "dist/ProcessGroup.h"
#include "util/Error.h"
#include "util/InputFile.h"
#include "jobs/CompressEvaluateJob.h"

namespace pareto::cli {
namespace {

struct DistributedArgs {
  int processes = 1;
  int rank = 0;
  int worldSize = 1;
  std::string master;
  double timeoutSeconds = 600;
};

void addDistributedOptions(CLI::App* cmd, DistributedArgs& d) {
  auto* processes =
      cmd->add_option("--processes", d.processes,
                      "Run as N processes on this host sharing the calibration and the sequential pass: with "
                      "--device cuda one per GPU (cuda:0..N-1, NCCL between them), on the CPU N processes (gloo). "
                      "The result is one process's up to float rounding, which GPTQ and small calibration sets can amplify "
                      "(docs/distributed.md)")
          ->check(CLI::PositiveNumber);
  auto* rank = cmd->add_option("--rank", d.rank,
                               "Join a distributed job as this rank (0..world size-1); rank 0 writes --out. For Slurm "
                               "--rank $SLURM_PROCID, for torchrun-style launchers --rank $RANK")
                   ->check(CLI::NonNegativeNumber);
  auto* world = cmd->add_option("--world-size", d.worldSize, "Processes in the distributed job (with --rank)")
                    ->check(CLI::PositiveNumber);
  auto* master = cmd->add_option("--master", d.master,
                                 "HOST:PORT where rank 0 serves the rendezvous (TCPStore), reachable from every rank");
  cmd->add_option("--dist-timeout", d.timeoutSeconds,
                  "Seconds a rank waits for the others (rendezvous, each collective) before it fails the job")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  processes->excludes(rank)->excludes(world)->excludes(master);
  rank->needs(world);
  world->needs(master);
}

// The device string of this rank: plain "cuda" takes the GPU of its local rank (LOCAL_RANK, as torchrun and
// --processes set it; SLURM_LOCALID under Slurm; else the rank).
std::string rankDevice(const std::string& device, int rank) {
  if (device != "cuda") return device;
  for (const char* name : {"LOCAL_RANK", "SLURM_LOCALID"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return "cuda:" + std::string(v);
  return "cuda:" + std::to_string(rank);
}

}  // namespace

void addCompressCommand(CLI::App& app) {
  struct Args {
    CompressOptions opts;   // all but the runtime, which the job makes from device and dtype
    std::string device = "cpu", dtype = kDefaultComputeDtype;
    MemoryOptions memory;
    std::string shardSize = "5GB";
    bool json = false;
    DistributedArgs dist;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "compress",
      "Compress a model as a recipe says (calibration, pruning, overrides) with the layer-wise sequential pass, "
      "and write a model folder that every command accepts (weights in safetensors, packed formats as tensors, "
      "pareto.json manifest). Each finished layer is kept as it completes: after a kill, a crash or Ctrl-C, --resume "
      "continues from the last one; a run that fails before finishing a layer leaves nothing behind.");
  cmd->add_option("--model", args->opts.modelDir, "Dense Hugging Face model folder")->required();
  cmd->add_option("--recipe", args->opts.recipePath, "Recipe JSON (see resources/recipes/)")->required();
  cmd->add_option("--out", args->opts.outDir, "Output folder (must not exist unless --overwrite)")->required();
  cmd->add_flag("--overwrite", args->opts.overwrite, "Replace an existing output folder once the new one is complete");
  cmd->add_flag("--resume", args->opts.resume,
                "Continue the interrupted run to --out (killed, crashed or cancelled) from its last finished layer; "
                "the model, recipe, --device, --dtype and --batch must be that run's. The result is the one an "
                "uninterrupted run gives");
  cmd->add_option("--device", args->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Compute dtype during calibration (float32, bfloat16, float16)")
      ->capture_default_str();
  cmd->add_option("--batch", args->opts.batch, "Calibration sequences per forward (0: pick for the device)")
      ->check(CLI::NonNegativeNumber);
  args->memory.add(cmd);
  cmd->add_option("--scratch-dir", args->opts.scratchDir,
                  "Folder for the activations' scratch file when they fit neither memory budget (default: beside "
                  "the output)");
  cmd->add_option("--max-shard-size", args->shardSize,
                  "Split the result's safetensors past this size, as transformers does (model-0000k-of-0000n)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object (out, modules, bits_per_weight, timings, memory)");
  addDistributedOptions(cmd, args->dist);
  auto compress = recordedJob("compress", [args](JobRecord& run) {
    CompressEvaluateOptions options;
    options.compress = args->opts;
    options.compress.budget = args->memory.budget();
    options.compress.maxShardBytes = parseByteSize(args->shardSize);
    options.device = args->device;
    options.dtype = args->dtype;
    const DistributedArgs& d = args->dist;
    std::unique_ptr<ProcessGroup> group;
    if (d.worldSize > 1) {
      options.device = rankDevice(args->device, d.rank);
      ProcessGroupOptions g;
      g.rank = d.rank;
      g.worldSize = d.worldSize;
      parseMasterAddress(d.master, g);
      g.device = c10::Device(options.device);
      g.timeout = std::chrono::milliseconds(static_cast<int64_t>(d.timeoutSeconds * 1000));
      group = std::make_unique<ProcessGroup>(g);
      options.compress.group = group.get();
    }
    CompressEvaluateJob job(options);
    if (group != nullptr && group->rank() > 0) {
      // Rank 0 records the run and prints the result; the others only work. Their errors name their rank.
      try {
        job.run(terminalProgress(), interruptToken());
      } catch (const Cancelled&) {
        throw;
      } catch (const InputError& e) {
        group->reportFailure(e.what());
        throw InputError("rank " + std::to_string(group->rank()) + ": " + e.what());
      } catch (const std::exception& e) {
        group->reportFailure(e.what());
        throw Error("rank " + std::to_string(group->rank()) + ": " + e.what());
      }
      return;
    }
    try {
      run.run(job);
    } catch (const std::exception& e) {
      if (group != nullptr && dynamic_cast<const Cancelled*>(&e) == nullptr) group->reportFailure(e.what());
      const InterruptedCompress kept = interruptedCompress(args->opts.outDir);
      if (kept.layersDone > 0)
        std::fprintf(stderr, "pareto-cli: %lld finished layers are kept in %s; run the same command with --resume "
                             "to continue from there\n", static_cast<long long>(kept.layersDone), kept.staging.c_str());
      throw;
    }
    const CompressReport& r = job.report().compress;
    std::ostringstream text;
    text << std::fixed;
    for (const auto& m : r.modules)
      text << std::left << std::setw(36) << m.name << " " << std::setw(10) << m.method << std::setw(6) << m.pattern
           << std::setw(13) << m.format << std::right << std::setprecision(1) << std::setw(6) << 100 * m.sparsity
           << "% zeros " << std::setprecision(2) << std::setw(6) << m.bitsPerWeight << " bpw\n";
    text << std::setprecision(3) << "wrote " << r.outDir << ": " << r.linearBitsPerWeight
         << " bits per weight over the block linears, " << r.modelBitsPerWeight << " over the whole model ("
         << std::setprecision(2) << r.bytes / 1048576.0 << " MiB"
         << (r.headBytes > 0 ? ", lm_head " + formatBytes(r.headBytes) : std::string()) << "); calibration " << r.calibrationTokens
         << " tokens in " << std::setprecision(1) << r.calibrationSeconds << " s, pass " << r.passSeconds
         << " s, total " << r.totalSeconds << " s\n"
         << "memory: peak resident " << formatBytes(r.peakHostBytes) << " (" << formatBytes(r.hostBaseBytes)
         << " at the start)";
    if (r.peakGpuBytes > 0) text << ", GPU peak " << formatBytes(r.peakGpuBytes);
    if (!r.activations.empty()) text << ", activations on the " << r.activations;
    printResult(args->json, job.result(), text.str());
  });
  cmd->callback([args, compress] {
    if (args->dist.processes > 1) {
      if (args->device.rfind("cuda:", 0) == 0)
        throw InputError("--processes " + std::to_string(args->dist.processes) + " with --device " + args->device +
                         " would put every rank on one GPU: use --device cuda (rank R takes cuda:R)");
      return runRanks(args->dist.processes, "--processes");
    }
    compress();
  });
}

}  // namespace pareto::cli
