// A model summary with the shapes of one Llama-7B-like block at 4096 wide (bf16), its output head and embedding:
// enough for estimates worked out by hand in the recipe-estimate, Recipe dock and benchmark tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/ModelSummary.h"

namespace pareto::test {

inline ModelSummary oneBlockModel() {
  ModelSummary s;
  s.path = "/models/one-block";
  s.dtype = "BF16";
  auto add = [&s](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    s.tensors.push_back({name, "BF16", shape, uint64_t(n) * 2});
    s.parameters += n;
    s.bytes += uint64_t(n) * 2;
  };
  add("lm_head.weight", {32000, 4096});
  add("model.embed_tokens.weight", {32000, 4096});
  add("model.layers.0.mlp.down_proj.weight", {4096, 11008});
  add("model.layers.0.mlp.up_proj.weight", {11008, 4096});
  add("model.layers.0.self_attn.q_proj.weight", {4096, 4096});
  add("model.norm.weight", {4096});
  return s;
}

}  // namespace pareto::test
