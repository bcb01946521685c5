// Generation as both front ends run it: `pareto-cli generate` (one model, eager, packed or through the decode
// runtime) and the workbench's side-by-side generation (the dense model and a compressed one taking turns a
// token at a time, so that both texts grow as they come). Tokens stream through a callback as each model's
// GenerationStream (model/Generation.h) produces them. Generation keeps no run in the store.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "jobs/Job.h"
#include "jobs/ModelCache.h"
#include "model/Generation.h"

namespace pareto {

struct GenerateOptions {
  std::string modelDir;
  std::string compressedDir;   // "": modelDir alone; else modelDir (dense) and this one side by side
  std::string device = "cpu";
  std::string dtype = kDefaultComputeDtype;
  // eager: LibTorch ops, packed modules unpacked; packed: packed modules on their kernels (or references);
  // graph: the decode runtime (one model; its tokens come at once, not as they are made).
  std::string runtime = "eager";
  std::string prompt;
  bool addBos = true;
  GenerationOptions generation;   // its eosTokenIds are each model's own
};

struct GeneratedSequence {
  std::string modelDir;
  bool compressed = false;        // the compressed side of a side-by-side generation
  std::vector<TokenId> tokens;    // new tokens only
  double decodeSeconds = 0;       // the steps after the first (which holds the prompt's prefill)
  // Decode speed over the steps after the first; 0 when there were none (or the decode runtime ran).
  double tokensPerSecond() const;
};

struct GenerateReport {
  std::vector<GeneratedSequence> sequences;   // the model first, then the compressed one
  int64_t generated = 0;                      // new tokens of all sequences
  double seconds = 0;
  std::string device;                         // its description ("cpu", "NVIDIA H200")
};

// After each new token: the sequence it extends (an index into GenerateReport::sequences) and that sequence.
using TokenCallback = std::function<void(size_t sequence, const GeneratedSequence& sofar)>;

class GenerateJob : public Job {
 public:
  // `models` keeps the loaded models between jobs (nullptr: loaded for this job alone).
  GenerateJob(GenerateOptions options, TokenCallback onToken = {}, ModelCache* models = nullptr);
  // Throws InputError for a prompt the two tokenizers read differently; Cancelled between tokens, with what was
  // generated until then in report().
  void run(const ProgressCallback& progress, const CancelToken& cancel) override;
  const GenerateReport& report() const { return report_; }
  // The model a sequence came from (its tokenizer decodes the tokens); valid after run().
  const LoadedModel& model(size_t sequence) const;

 private:
  GenerateOptions options_;
  TokenCallback onToken_;
  ModelCache* models_;
  ModelCache own_;
  std::vector<const LoadedModel*> loaded_;
  GenerateReport report_;
};

}  // namespace pareto
