// Options shared by the commands that run a model: the folder, the device and the compute dtype.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "model/Device.h"

namespace pareto::cli {

struct ModelOptions {
  std::string model;
  std::string device = "cpu";
  std::string dtype = kDefaultComputeDtype;

  void add(CLI::App* cmd) {
    cmd->add_option("--model", model, "Hugging Face model folder (config.json, safetensors, tokenizer.json)")
        ->required();
    cmd->add_option("--device", device, "cpu, cuda or cuda:N")->capture_default_str();
    cmd->add_option("--dtype", dtype, "Compute dtype: float32, bfloat16 or float16 (float16 needs CUDA)")
        ->capture_default_str();
  }
};

}  // namespace pareto::cli
