#include "checkpoint/ShardPlan.h"

#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "util/Error.h"

namespace pareto {

std::vector<Shard> planShards(const std::vector<ShardedTensor>& tensors, uint64_t maxShardBytes) {
  if (maxShardBytes == 0) throw InputError("the shard size limit must be positive");
  if (tensors.empty()) throw InputError("a checkpoint needs at least one tensor");
  std::vector<Shard> shards(1);
  for (const ShardedTensor& t : tensors) {
    if (!shards.back().tensors.empty() && shards.back().bytes + t.bytes > maxShardBytes) shards.emplace_back();
    shards.back().tensors.push_back(t);
    shards.back().bytes += t.bytes;
  }
  const size_t n = shards.size();
  for (size_t i = 0; i < n; ++i) {
    if (n == 1) {
      shards[i].file = "model.safetensors";
      break;
    }
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, n);
    shards[i].file = name;
  }
  return shards;
}

nlohmann::json shardIndex(const std::vector<Shard>& shards) {
  uint64_t total = 0;
  nlohmann::json map = nlohmann::json::object();
  for (const Shard& s : shards) {
    total += s.bytes;
    for (const ShardedTensor& t : s.tensors) map[t.name] = s.file;
  }
  return {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
}

uint64_t parseByteSize(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string unit = text.substr(digits);
  uint64_t scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KB") scale = 1000ull;
  else if (unit == "MB") scale = 1000ull * 1000;
  else if (unit == "GB") scale = 1000ull * 1000 * 1000;
  else if (unit == "KiB") scale = 1ull << 10;
  else if (unit == "MiB") scale = 1ull << 20;
  else if (unit == "GiB") scale = 1ull << 30;
  if (digits == 0 || digits > 15 || scale == 0)
    throw InputError("\"" + text + "\" is not a size (a whole number with B, KB, MB, GB, KiB, MiB or GiB)");
  return std::stoull(text.substr(0, digits)) * scale;
}

}  // namespace pareto
