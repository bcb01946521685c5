#include "formats/CompressionManifest.h"
#include <algorithm>
#include <fstream>

#include <cstdio>
#include <filesystem>

#include "formats/WeightFormat.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {

std::optional<CompressionManifest> CompressionManifest::readFrom(const std::string& modelDir) {
  const std::string path = (std::filesystem::path(modelDir) / "pareto.json").string();
  if (!std::filesystem::exists(path)) return std::nullopt;
  CompressionManifest m;
  m.document = readJsonFile(path);
  auto fail = [&](const std::string& what) { throw InputError(fileMessage(path, what)); };
  if (!m.document.is_object()) fail("must be a JSON object");
  if (!m.document.contains("format_version") || !m.document["format_version"].is_number_integer() ||
      m.document["format_version"].get<int>() > kFormatVersion)
    fail("format_version missing or newer than this Pareto understands (" + std::to_string(kFormatVersion) + ")");
  if (!m.document.contains("modules") || !m.document["modules"].is_object()) fail("missing \"modules\" object");
  const int version = m.document["format_version"].get<int>();
  for (const auto& [name, entry] : m.document["modules"].items()) {
    if (!entry.is_object() || !entry.contains("format") || !entry["format"].is_string())
      fail("module " + name + ": missing \"format\"");
    ModuleFormat f;
    f.format = entry["format"].get<std::string>();
    // A name of today's vocabulary is checked below in the terms of the earlier one ("bitmask-2:4+int4"), whose
    // rules the grid records ("quant", "spqr") still follow.
    std::optional<WeightFormat> named;
    try {
      named = WeightFormat::parse(f.format);
    } catch (const InputError&) {
    }
    std::string rest = f.format;
    if (named) {
      rest = named->isBitmask() ? "bitmask-" + std::to_string(named->n) + ":" + std::to_string(named->m) : "";
      if (named->isQuantized())
        rest += std::string(named->isBitmask() ? "+" : "") +
                (named->values == WeightFormat::Values::Int ? "int" : "spqr") + std::to_string(named->bits);
      if (named->isDense()) rest = "dense";
      if (named->isGguf()) rest = named->name();   // one name, nothing recorded beside it
    }
    const std::string stored = f.format;
    f.format = rest;
    if (rest.rfind("bitmask-", 0) == 0) {
      int used = 0;
      if (std::sscanf(rest.c_str(), "bitmask-%d:%d%n", &f.n, &f.m, &used) != 2 || f.n < 1 || f.m <= f.n ||
          f.m > 32 || 32 % f.m != 0)
        fail("module " + name + ": bad bitmask format \"" + f.format + "\"");
      rest = rest.substr(static_cast<size_t>(used));
      if (rest.rfind("+", 0) == 0) rest = rest.substr(1);
    }
    if (rest.rfind("spqr", 0) == 0) {
      if (version < 2)
        fail("module " + name + ": SpQR weights of format version " + std::to_string(version) +
             " (fp16 zero-point grids) are no longer readable; compress the model again");
      const auto& q = entry.value("spqr", nlohmann::json());
      for (const char* k : {"bits", "scale_bits", "group_size", "scale_group"})
        if (!q.is_object() || !q.contains(k) || !q[k].is_number_integer())
          fail("module " + name + ": format \"" + f.format + "\" needs spqr." + k);
      f.bits = q["bits"].get<int>();
      f.scaleBits = q["scale_bits"].get<int>();
      f.groupSize = q["group_size"].get<int64_t>();
      f.scaleGroup = q["scale_group"].get<int64_t>();
      if (f.bits < 1 || f.bits > 8 || f.scaleBits < 1 || f.scaleBits > 8 || f.groupSize < 1 ||
          f.scaleGroup < 1 || rest != "spqr" + std::to_string(f.bits))
        fail("module " + name + ": bad spqr format \"" + f.format + "\"");
    } else if (rest.rfind("int", 0) == 0) {
      const auto& q = entry.value("quant", nlohmann::json());
      if (!q.is_object() || !q.contains("bits") || !q.contains("symmetric") || !q.contains("group_size") ||
          !q["bits"].is_number_integer() || !q["symmetric"].is_boolean() || !q["group_size"].is_number_integer())
        fail("module " + name + ": quantized format \"" + f.format + "\" needs quant.bits, quant.symmetric and "
             "quant.group_size");
      f.bits = q["bits"].get<int>();
      f.symmetric = q["symmetric"].get<bool>();
      f.groupSize = q["group_size"].get<int64_t>();
      if (q.contains("act_order")) {
        if (!q["act_order"].is_boolean()) fail("module " + name + ": quant.act_order must be true or false");
        f.actOrder = q["act_order"].get<bool>();
      }
      if (f.bits < 2 || f.bits > 8 || f.groupSize < 1 || rest != "int" + std::to_string(f.bits))
        fail("module " + name + ": bad quantized format \"" + f.format + "\"");
    } else if (!rest.empty() && f.format != "dense" && !(named && named->isGguf())) {
      fail("module " + name + ": format \"" + f.format + "\" is not known to this Pareto");
    }
    if (entry.contains("shape")) {
      const auto& shape = entry["shape"];
      if (!shape.is_array() || shape.size() != 2 || !shape[0].is_number_integer() || !shape[1].is_number_integer() ||
          shape[0].get<int64_t>() < 1 || shape[1].get<int64_t>() < 1)
        fail("module " + name + ": \"shape\" must be [rows, cols]");
      f.shape = {shape[0].get<int64_t>(), shape[1].get<int64_t>()};
    }
    try {
      f.weight = WeightFormat::fromStored(f.format, f.groupSize, f.shape.empty() ? 0 : f.shape[1], f.symmetric,
                                          f.groupSize, f.scaleBits);
    } catch (const InputError& e) {
      fail("module " + name + ": " + e.what());
    }
    if (named) {
      // The grid record must say what the name says.
      WeightFormat recorded = f.weight;
      if (named->values == WeightFormat::Values::Int && named->groupSize <= 0) recorded.groupSize = named->groupSize;
      if (recorded != *named)
        fail("module " + name + ": format \"" + stored + "\" disagrees with its grid record (which says \"" +
             f.weight.name() + "\")");
      f.weight = *named;
    }
    f.format = f.weight.name();
    f.bitsPerWeight = entry.value("bits_per_weight", 0.0);
    f.sparsity = entry.value("sparsity", 0.0);
    f.method = entry.value("method", std::string());
    m.modules[name] = f;
  }
  return m;
}

const ModuleFormat* CompressionManifest::find(const std::string& module) const {
  auto it = modules.find(module);
  return it == modules.end() ? nullptr : &it->second;
}

std::string contentHash(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string checkpointIdentityHash(const std::string& dir) {
  namespace fs = std::filesystem;
  std::string bytes = readTextFile((fs::path(dir) / "config.json").string());
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(index)) {
    bytes += readTextFile(index.string());
  } else if (fs::exists(single)) {
    // stat, not open: a FIFO under the name must be refused, not waited on.
    if (!fs::is_regular_file(single)) throw InputError(fileMessage(single.string(), "not a regular file"));
    std::ifstream in(single, std::ios::binary);
    unsigned char le[8] = {};
    in.read(reinterpret_cast<char*>(le), 8);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t(le[i]) << (8 * i);
    std::string header(static_cast<size_t>(std::min<uint64_t>(n, 100ull << 20)), '\0');
    in.read(header.data(), static_cast<std::streamsize>(header.size()));
    bytes += header;
  }
  return contentHash(bytes);
}

}  // namespace pareto
