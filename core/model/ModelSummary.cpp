#include "model/ModelSummary.h"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/ModelConfig.h"
#include "checkpoint/ModelPresets.h"
#include "checkpoint/Safetensors.h"
#include "formats/CompressionManifest.h"
#include "util/Error.h"

namespace pareto {

namespace {

// The fields that come from config.json.
ModelSummary configSummary(const std::string& path, const ModelConfig& config) {
  ModelSummary s;
  s.path = path;
  s.architecture = config.architecture;
  s.modelType = config.modelType;
  s.vocabSize = config.vocabSize;
  s.hiddenSize = config.hiddenSize;
  s.intermediateSize = config.intermediateSize;
  s.numLayers = config.numLayers;
  s.numHeads = config.numHeads;
  s.numKvHeads = config.numKvHeads;
  s.headDim = config.headDim;
  s.tiedEmbeddings = config.tieWordEmbeddings;
  return s;
}

}  // namespace

ModelSummary summarizePreset(const std::string& preset) {
  const ModelConfig c = modelPreset(preset);
  ModelSummary s = configSummary("synthetic:" + preset, c);
  // Storage as published; either 16-bit type takes 2 bytes per weight.
  s.dtype = c.torchDtype == "bfloat16" ? "BF16" : "F16";
  for (const ConfigTensor& t : checkpointTensors(c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    s.tensors.push_back({t.name, s.dtype, t.shape, uint64_t(n) * 2});
    s.bytes += uint64_t(n) * 2;
  }
  s.parameters = parameterCount(c);
  std::sort(s.tensors.begin(), s.tensors.end(),
            [](const TensorSummary& a, const TensorSummary& b) { return a.name < b.name; });
  return s;
}

ModelSummary summarizeModel(const std::string& modelDir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(modelDir)) throw InputError(fileMessage(modelDir, "not a model folder (no such directory)"));
  const std::string configPath = (fs::path(modelDir) / "config.json").string();
  if (!fs::exists(configPath)) throw InputError(fileMessage(modelDir, "no config.json in this folder"));
  ModelConfig config = ModelConfig::fromFile(configPath);
  Checkpoint ckpt = Checkpoint::open(modelDir);

  ModelSummary s = configSummary(modelDir, config);
  for (const auto& f : ckpt.files()) s.files.push_back(fs::path(f).filename().string());

  std::map<std::string, uint64_t> bytesByDtype;
  for (const TensorEntry* t : ckpt.tensors()) {
    s.tensors.push_back({t->name, dtypeName(t->dtype), t->shape, t->nbytes});
    s.parameters += t->numel();
    s.bytes += t->nbytes;
    bytesByDtype[dtypeName(t->dtype)] += t->nbytes;
  }
  if (auto manifest = CompressionManifest::readFrom(modelDir)) {
    s.compressed = true;
    // Packed tensors are not parameters; the manifest counts the dense model's weights.
    s.parameters = manifest->document.value("parameters", s.parameters);
    s.linearBitsPerWeight = manifest->document.value("linear_bits_per_weight", 0.0);
    // Bytes per module as stored: "<module>.weight" (dense) or its packed parts "<module>.weight.*".
    std::map<std::string, uint64_t> storedBytes;
    for (const TensorEntry* t : ckpt.tensors()) {
      for (size_t at = t->name.find(".weight"); at != std::string::npos; at = t->name.find(".weight", at + 1)) {
        const size_t end = at + 7;
        if (end == t->name.size() || t->name[end] == '.') {
          storedBytes[t->name.substr(0, at)] += t->nbytes;
          break;
        }
      }
    }
    uint64_t linearBits = 0, linearWeights = 0;
    bool allShaped = true;
    for (const auto& [name, f] : manifest->modules) {
      double bpw = f.bitsPerWeight;
      if (f.shape.size() == 2) {
        const uint64_t weights = static_cast<uint64_t>(f.shape[0] * f.shape[1]);
        const auto it = storedBytes.find(name);
        if (it == storedBytes.end())
          throw InputError(
              fileMessage(modelDir, "pareto.json lists module " + name + ", but no tensor of it is stored"));
        bpw = 8.0 * double(it->second) / double(weights);
        // The linears' bits per weight are the block linears' (a quantized lm_head is listed, not counted).
        if (name != "lm_head") {
          linearBits += 8 * it->second;
          linearWeights += weights;
        }
      } else {
        allShaped = false;
      }
      s.modules.push_back({name, f.format, bpw, f.sparsity, f.method, f.actOrder});
    }
    if (allShaped && linearWeights > 0)
      s.linearBitsPerWeight = double(linearBits) / double(linearWeights);
  }
  uint64_t best = 0;
  for (const auto& [name, bytes] : bytesByDtype)
    if (bytes > best) best = bytes, s.dtype = name;
  return s;
}

nlohmann::json toJson(const ModelSummary& s) {
  nlohmann::json modules = nlohmann::json::array();
  for (const auto& m : s.modules)
    modules.push_back({{"name", m.name}, {"format", m.format}, {"bits_per_weight", m.bitsPerWeight},
                       {"sparsity", m.sparsity}, {"method", m.method}, {"act_order", m.actOrder}});
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : s.tensors)
    tensors.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}, {"bytes", t.bytes}});
  return {{"path", s.path},
          {"architecture", s.architecture},
          {"model_type", s.modelType},
          {"parameters", s.parameters},
          {"bytes", s.bytes},
          {"dtype", s.dtype},
          {"vocab_size", s.vocabSize},
          {"hidden_size", s.hiddenSize},
          {"intermediate_size", s.intermediateSize},
          {"num_layers", s.numLayers},
          {"num_heads", s.numHeads},
          {"num_kv_heads", s.numKvHeads},
          {"head_dim", s.headDim},
          {"tied_embeddings", s.tiedEmbeddings},
          {"files", s.files},
          {"tensors", tensors},
          {"compressed", s.compressed},
          {"linear_bits_per_weight", s.linearBitsPerWeight},
          {"modules", modules}};
}

namespace {
std::string shapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}
}  // namespace

std::string toText(const ModelSummary& s) {
  std::ostringstream o;
  o << "model         " << s.path << "\n"
    << "architecture  " << s.architecture << " (" << s.modelType << ")\n"
    << "parameters    " << s.parameters << " (" << std::fixed << std::setprecision(2) << s.parameters / 1e6
    << " M)\n"
    << "size          " << std::setprecision(2) << s.bytes / 1048576.0 << " MiB in " << s.files.size()
    << " file(s), mostly " << s.dtype << "\n"
    << "layers        " << s.numLayers << ", hidden " << s.hiddenSize << ", ffn " << s.intermediateSize
    << ", heads " << s.numHeads << " / kv heads " << s.numKvHeads << ", head_dim " << s.headDim << "\n"
    << "vocab         " << s.vocabSize << (s.tiedEmbeddings ? ", output head tied to the embedding" : "") << "\n"
    << "tensors       " << s.tensors.size() << "\n";
  if (s.compressed) {
    o << "compressed    " << std::setprecision(3) << s.linearBitsPerWeight << " bits per weight over the block linears\n";
    size_t w = 0;
    for (const auto& m : s.modules) w = std::max(w, m.name.size());
    for (const auto& m : s.modules)
      o << "  " << std::left << std::setw(static_cast<int>(w)) << m.name << "  " << std::setw(24) << m.format
        << std::right << std::setprecision(3) << std::setw(7) << m.bitsPerWeight << " bpw  " << std::setprecision(1)
        << std::setw(5) << 100 * m.sparsity << "% zeros" << (m.method.empty() ? "" : "  " + m.method)
        << (m.actOrder ? "  act-order" : "") << "\n";
    o << "stored tensors:\n";
  }
  size_t width = 0;
  for (const auto& t : s.tensors) width = std::max(width, t.name.size());
  for (const auto& t : s.tensors)
    o << "  " << std::left << std::setw(static_cast<int>(width)) << t.name << "  " << std::setw(5) << t.dtype << " "
      << shapeText(t.shape) << "\n";
  std::string text = o.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace pareto
