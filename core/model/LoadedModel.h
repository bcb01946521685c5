// A model folder made ready to run: config, tokenizer and the model's weights on the chosen device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/Device.h"
#include "model/LlamaModel.h"
#include "tokenizer/Tokenizer.h"
#include "util/Progress.h"

namespace pareto {

struct LoadedModel {
  std::string directory;
  ModelConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<LlamaModel> model;
  std::vector<TokenId> eosTokenIds;   // config.json and generation_config.json together

  // The ids a prompt is scored or continued from: BOS (when the model has one) followed by the prompt,
  // without the tokenizer's own template so that BOS is never doubled.
  std::vector<TokenId> promptIds(const std::string& prompt, bool addBos = true) const;
};

// Whole: every weight on the device after loading. Streamed: the weights stay in the memory-mapped checkpoint and
// the model reads each block when it is used (LlamaModel's streamed constructor), for models larger than the
// device or the host.
enum class WeightResidency { Whole, Streamed };

// Throws InputError naming the folder/file for a missing, unreadable or inconsistent model folder. A whole
// model reports stage "load" block by block and checks `cancel` before each tensor: a cancel throws Cancelled
// within one tensor, and everything read so far is freed with the checkpoint's mapping.
LoadedModel loadModel(const std::string& modelDir, const RuntimeOptions& opts,
                      WeightResidency residency = WeightResidency::Whole, const ProgressCallback& progress = {},
                      const CancelToken* cancel = nullptr);

}  // namespace pareto
