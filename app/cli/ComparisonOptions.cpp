#include "ComparisonOptions.h"


namespace pareto::cli {

void ComparisonOptions::add(CLI::App* cmd) {
  cmd->add_option("--dense", dense, "The dense reference model folder")->required();
  cmd->add_option("--model", model, "The compressed model folder (same architecture and tokenizer)")->required();
  cmd->add_option("--prompts", prompts, "Prompts file, one prompt per line; use prompts the model was not calibrated on")
      ->required();
  cmd->add_option("--max-prompts", maxPrompts, "Use the first N prompts of the file (0: all)")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--dtype", dtype, "Compute dtype of both models: float32, bfloat16 or float16 (CUDA)")
      ->capture_default_str();
  memory.addForGeneration(cmd);
}

Comparison ComparisonOptions::load(int64_t batch, int64_t maxNewTokens, const std::string& what) const {
  return loadComparison(dense, model, prompts, maxPrompts, device, dtype,
                        {memory.budget(), batch, maxNewTokens, what});
}

nlohmann::json ComparisonOptions::settings(const LoadedModel& d) const {
  return {{"dense", dense},
          {"model", model},
          {"prompts", prompts},
          {"max_prompts", maxPrompts},
          {"device", deviceDescription(d.model->options().device)},
          {"dtype", dtypeLabel(d.model->options().dtype)}};
}

}  // namespace pareto::cli
