// How a checkpoint's tensors are split over safetensors files the way transformers' save_pretrained splits
// them: in order, a new shard whenever the next tensor would push the current one past the size limit (a
// tensor larger than the limit gets a shard of its own), files named model-0000k-of-0000n.safetensors and an
// index model.safetensors.index.json mapping each tensor to its file; one shard is model.safetensors alone.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace pareto {

struct ShardedTensor {
  std::string name;
  uint64_t bytes = 0;
};

struct Shard {
  std::string file;
  std::vector<ShardedTensor> tensors;
  uint64_t bytes = 0;
};

// Throws InputError for a limit of 0 or a list without tensors.
std::vector<Shard> planShards(const std::vector<ShardedTensor>& tensors, uint64_t maxShardBytes);

// The index file's name, and its contents for a plan of more than one shard (metadata.total_size, weight_map).
inline constexpr const char* kShardIndexFile = "model.safetensors.index.json";
nlohmann::json shardIndex(const std::vector<Shard>& shards);

// "5GB", "500MB", "2GiB", "123" (bytes) → bytes; units as transformers reads max_shard_size (decimal KB/MB/GB,
// binary KiB/MiB/GiB). Throws InputError naming the text.
uint64_t parseByteSize(const std::string& text);

}  // namespace pareto
