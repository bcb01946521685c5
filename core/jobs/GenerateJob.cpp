#include "jobs/GenerateJob.h"

#include <chrono>
#include <memory>

#include "decode/DecodeModel.h"
#include "decode/DecodeSession.h"
#include "util/Error.h"

namespace pareto {

double GeneratedSequence::tokensPerSecond() const {
  return tokens.size() > 1 && decodeSeconds > 0 ? double(tokens.size() - 1) / decodeSeconds : 0.0;
}

GenerateJob::GenerateJob(GenerateOptions options, TokenCallback onToken, ModelCache* models)
    : options_(std::move(options)), onToken_(std::move(onToken)), models_(models != nullptr ? models : &own_) {}

const LoadedModel& GenerateJob::model(size_t sequence) const { return *loaded_.at(sequence); }

void GenerateJob::run(const ProgressCallback& progress, const CancelToken& cancel) {
  const auto start = std::chrono::steady_clock::now();
  report_ = {};
  loaded_.clear();
  RuntimeOptions runtime = makeRuntimeOptions(options_.device, options_.dtype);
  runtime.packedWeights = options_.runtime != "eager";
  if (progress) progress({"load", 0, options_.compressedDir.empty() ? "the model" : "dense and compressed models"});
  const double denseShare = options_.compressedDir.empty() ? 1.0 : 0.5;
  loaded_.push_back(&models_->dense(options_.modelDir, runtime, partOfStage(progress, 0, denseShare), &cancel));
  if (!options_.compressedDir.empty())
    loaded_.push_back(
        &models_->compressed(options_.compressedDir, runtime, partOfStage(progress, denseShare, 1), &cancel));
  const std::vector<TokenId> prompt = loaded_[0]->promptIds(options_.prompt, options_.addBos);
  if (loaded_.size() > 1 && loaded_[1]->promptIds(options_.prompt, options_.addBos) != prompt)
    throw InputError(fileMessage(options_.compressedDir,
                                 "its tokenizer reads the prompt differently from the dense model's"));
  report_.device = deviceDescription(runtime.device);
  for (size_t i = 0; i < loaded_.size(); ++i)
    report_.sequences.push_back({loaded_[i]->directory, i > 0, {}, 0});
  auto finish = [&] {
    report_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  if (options_.runtime == "graph") {
    const LoadedModel& m = *loaded_[0];
    const DecodeModel d = DecodeModel::fromModel(*m.model);
    GeneratedSequence& s = report_.sequences[0];
    s.tokens = decodeGenerate(d, {prompt}, options_.generation.maxNewTokens, m.eosTokenIds, /*useGraph=*/true,
                              options_.generation.sampling)
                   .at(0);
    report_.generated = int64_t(s.tokens.size());
    if (onToken_) onToken_(0, s);
    finish();
    return;
  }

  // Each model's stream, taking turns a token at a time; greedy or sampled by the same rule for both.
  std::vector<std::unique_ptr<GenerationStream>> streams;
  for (const LoadedModel* m : loaded_) {
    GenerationOptions o = options_.generation;
    o.eosTokenIds = m->eosTokenIds;
    streams.push_back(std::make_unique<GenerationStream>(*m->model, prompt, o));
  }
  for (bool any = true; any;) {
    any = false;
    for (size_t i = 0; i < streams.size(); ++i) {
      if (cancel.isCancelled()) {
        finish();
        throw Cancelled();
      }
      if (!streams[i]->step()) continue;
      any = true;
      ++report_.generated;
      GeneratedSequence& s = report_.sequences[i];
      s.tokens = streams[i]->tokens();
      s.decodeSeconds = streams[i]->decodeSeconds();
      if (onToken_) onToken_(i, s);
    }
  }
  finish();
}

}  // namespace pareto
