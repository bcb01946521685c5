#include "export/GgufExport.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <utility>

#include "checkpoint/ModelConfig.h"
#include "checkpoint/Safetensors.h"
#include "export/DenseWeights.h"
#include "export/GgufWriter.h"
#include "formats/GgufQuant.h"
#include "formats/GridAsGguf.h"
#include "formats/PackedModuleIO.h"
#include "model/CheckpointTensors.h"
#include "util/Error.h"
#include "util/InputFile.h"
#include "util/Json.h"
#include "util/OutputFolder.h"
#include "util/Version.h"

namespace pareto {
namespace fs = std::filesystem;
using gguf::TensorType;

namespace {

constexpr const char* kProducerKey = "pareto.producer";

// The pre-tokenizer regexes llama.cpp knows by name (tokenizer.ggml.pre), as tokenizer.json spells them.
constexpr const char* kLlama3Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

// llama.cpp's token types (llama_token_type).
enum TokenType : int32_t { kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5 };

struct Vocabulary {
  std::string pre;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  bool addBos = false;
};

std::string dump(const nlohmann::json& j) { return j.dump().substr(0, 200); }

std::string preTokenizerName(const nlohmann::json& pre, const std::string& file) {
  auto isByteLevel = [](const nlohmann::json& p, bool regex) {
    return p.is_object() && p.value("type", "") == "ByteLevel" && p.value("use_regex", true) == regex;
  };
  if (isByteLevel(pre, true)) return "gpt-2";
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].is_array() && pre["pretokenizers"].size() == 2 && isByteLevel(pre["pretokenizers"][1], false)) {
    const nlohmann::json& split = pre["pretokenizers"][0];
    if (split.is_object() && split.value("type", "") == "Split" && split.contains("pattern") &&
        split["pattern"].is_object() && split["pattern"].contains("Regex") && split["pattern"]["Regex"].is_string()) {
      const std::string regex = split["pattern"]["Regex"].get<std::string>();
      if (regex == kLlama3Split) return "llama-bpe";
      if (regex == kQwen2Split) return "qwen2";
    }
  }
  throw InputError(fileMessage(file, "pre_tokenizer " + dump(pre) + " is not one llama.cpp knows by name (GPT-2 "
                                     "byte-level, Llama-3 or Qwen2 split): it cannot be written to GGUF"));
}

// tokenizer.json (and tokenizer_config.json, where present) as llama.cpp's "gpt2" (byte-level BPE) vocabulary.
Vocabulary readVocabulary(const fs::path& dir, int64_t vocabSize) {
  const std::string file = (dir / "tokenizer.json").string();
  if (!fs::exists(file)) throw InputError(fileMessage(dir.string(), "no tokenizer.json in this folder"));
  const nlohmann::json tok = readJsonFile(file, kMaxTokenizerJsonBytes, "a tokenizer.json");
  const nlohmann::json& model = tok.contains("model") ? tok["model"] : nlohmann::json();
  if (!model.is_object() || model.value("type", "") != "BPE" || !model.contains("vocab") || !model["vocab"].is_object())
    throw InputError(fileMessage(file, "model is not a BPE vocabulary: only byte-level BPE tokenizers are written to GGUF"));
  if (model.value("byte_fallback", false))
    throw InputError(fileMessage(file, "a SentencePiece-style BPE (byte_fallback) is not written to GGUF yet; only "
                                       "byte-level BPE (Llama-3, Qwen, GPT-2 style) is"));
  Vocabulary v;
  v.pre = preTokenizerName(tok.contains("pre_tokenizer") ? tok["pre_tokenizer"] : nlohmann::json(), file);

  v.tokens.assign(size_t(vocabSize), std::string());
  v.types.assign(size_t(vocabSize), kUnused);
  auto place = [&](const std::string& text, int64_t id, int32_t type) {
    if (id < 0 || id >= vocabSize)
      throw InputError(fileMessage(file, "token \"" + text + "\" has id " + std::to_string(id) +
                                         " outside the model's vocabulary of " + std::to_string(vocabSize)));
    v.tokens[size_t(id)] = text;
    v.types[size_t(id)] = type;
  };
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer()) throw InputError(fileMessage(file, "vocab entry \"" + text + "\" has no integer id"));
    place(text, id.get<int64_t>(), kNormal);
  }
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
    for (const auto& a : tok["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a.contains("content") || !a["content"].is_string()) continue;
      place(a["content"].get<std::string>(), a["id"].get<int64_t>(), a.value("special", false) ? kControl : kUserDefined);
    }
  // Ids the tokenizer does not use (a vocabulary padded to a multiple) still need a distinct text in GGUF.
  for (size_t id = 0; id < v.tokens.size(); ++id)
    if (v.types[id] == kUnused) v.tokens[id] = "[PAD" + std::to_string(id) + "]";

  if (model.contains("merges") && model["merges"].is_array())
    for (const auto& m : model["merges"]) {
      if (m.is_string()) v.merges.push_back(m.get<std::string>());
      else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
        v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      else throw InputError(fileMessage(file, "merge " + dump(m) + " is neither \"a b\" nor [\"a\", \"b\"]"));
    }

  // BOS is added when the post-processor's single-sequence template starts with a special token.
  if (tok.contains("post_processor") && tok["post_processor"].is_object()) {
    const nlohmann::json& post = tok["post_processor"];
    std::vector<nlohmann::json> processors;
    if (post.value("type", "") == "Sequence" && post.contains("processors") && post["processors"].is_array())
      for (const auto& p : post["processors"]) processors.push_back(p);
    else processors.push_back(post);
    for (const auto& p : processors)
      if (p.is_object() && p.value("type", "") == "TemplateProcessing" && p.contains("single") &&
          p["single"].is_array() && !p["single"].empty() && p["single"][0].is_object() &&
          p["single"][0].contains("SpecialToken"))
        v.addBos = true;
  }
  return v;
}

// llama.cpp's "llama" architecture rotates interleaved pairs (GPT-J style); transformers' Llama rotates the two
// halves of each head. Reordering the rows of q and k (and their biases) per head makes the two the same.
at::Tensor permuteForRope(const at::Tensor& w, int64_t heads) {
  const int64_t headDim = w.size(0) / heads;
  return w.reshape({heads, 2, headDim / 2, -1}).transpose(1, 2).reshape(w.sizes()).contiguous();
}

// Llama 3.1's frequency-dependent RoPE scaling as llama.cpp reads it: one factor per rotated pair that divides
// the pair's frequency (rope_freqs.weight).
std::vector<float> llama3RopeFactors(const ModelConfig& c) {
  const Llama3RopeScaling& s = *c.llama3Rope;
  const double lowWavelen = double(s.originalMaxPositionEmbeddings) / s.lowFreqFactor;
  const double highWavelen = double(s.originalMaxPositionEmbeddings) / s.highFreqFactor;
  std::vector<float> factors;
  for (int64_t i = 0; i < c.headDim; i += 2) {
    const double freq = 1.0 / std::pow(c.ropeTheta, double(i) / double(c.headDim));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < highWavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > lowWavelen) {
      factors.push_back(float(s.factor));
    } else {
      const double smooth = (double(s.originalMaxPositionEmbeddings) / wavelen - s.lowFreqFactor) /
                            (s.highFreqFactor - s.lowFreqFactor);
      factors.push_back(float(1.0 / ((1 - smooth) / s.factor + smooth)));
    }
  }
  return factors;
}

std::vector<uint8_t> floatBytes(const at::Tensor& t, TensorType type) {
  const c10::ScalarType dtype = type == TensorType::F32 ? at::kFloat : type == TensorType::F16 ? at::kHalf : at::kBFloat16;
  const at::Tensor c = t.to(dtype).contiguous();
  std::vector<uint8_t> out(size_t(c.numel() * c.element_size()));
  std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

TensorType floatType(c10::ScalarType dtype) {
  if (dtype == at::kHalf) return TensorType::F16;
  if (dtype == at::kBFloat16) return TensorType::BF16;
  return TensorType::F32;
}

// llama_ftype of a file whose block linears are mostly `type` (general.file_type: informational to llama.cpp).
uint32_t fileType(TensorType type) {
  switch (type) {
    case TensorType::F32: return 0;
    case TensorType::F16: return 1;
    case TensorType::Q4_0: return 2;
    case TensorType::Q8_0: return 7;
    case TensorType::Q4_K: return 14;
    case TensorType::Q6_K: return 18;
    case TensorType::BF16: return 32;
  }
  return 0;
}

struct NameMap {
  std::string architecture;   // "llama", "qwen2", "qwen3"
  bool permuteQk = false;
};

NameMap architectureOf(const ModelConfig& c, const std::string& configPath) {
  if (c.modelType == "llama" || c.modelType == "mistral") return {"llama", true};
  if (c.modelType == "qwen2") return {"qwen2", false};
  if (c.modelType == "qwen3") return {"qwen3", false};
  throw InputError(fileMessage(configPath, "model_type \"" + c.modelType + "\" has no GGUF architecture here"));
}

// "model.layers.3.self_attn.q_proj.weight" → "blk.3.attn_q.weight"; "" for a tensor GGUF does not keep.
std::string ggufName(const std::string& hf) {
  static const std::vector<std::pair<std::string, std::string>> inLayer = {
      {"input_layernorm", "attn_norm"},      {"self_attn.q_proj", "attn_q"},        {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},        {"self_attn.o_proj", "attn_output"},   {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"},   {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},             {"mlp.down_proj", "ffn_down"}};
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  static const std::regex layer(R"(model\.layers\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (std::regex_match(hf, m, layer))
    for (const auto& [from, to] : inLayer)
      if (m[2] == from) return "blk." + m[1].str() + "." + to + "." + m[3].str();
  return "";
}

bool isBlockLinear(const std::string& hf) {
  return hf.rfind("model.layers.", 0) == 0 && hf.size() > 7 && hf.compare(hf.size() - 7, 7, ".weight") == 0 &&
         (hf.find("_proj.weight") != std::string::npos);
}

}  // namespace

bool isParetoGguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(64 << 10, '\0');
  in.read(head.data(), std::streamsize(head.size()));
  head.resize(size_t(in.gcount()));
  return head.size() > 4 && head.compare(0, 4, "GGUF") == 0 && head.find(kProducerKey) != std::string::npos;
}

GgufExportReport exportGguf(const GgufExportOptions& opts, const ProgressCallback& progress, const CancelToken* cancel) {
  const auto start = std::chrono::steady_clock::now();
  auto report = [&](const std::string& stage, double fraction, const std::string& msg) {
    if (progress) progress({stage, fraction, msg});
  };
  if (!fs::is_directory(opts.modelDir))
    throw InputError(fileMessage(opts.modelDir, "not a model folder (no such directory)"));
  if (opts.outFile.empty()) throw InputError("no output file given");
  const bool automatic = opts.type == "auto";
  const std::optional<TensorType> asked = automatic ? std::nullopt : std::optional(gguf::parseTensorType(opts.type));
  const fs::path src = fs::weakly_canonical(fs::absolute(opts.modelDir));
  const std::string configPath = (src / "config.json").string();
  if (!fs::exists(configPath)) throw InputError(fileMessage(opts.modelDir, "no config.json in this folder"));
  const ModelConfig config = ModelConfig::fromFile(configPath);
  const NameMap arch = architectureOf(config, configPath);
  const Vocabulary vocab = readVocabulary(src, config.vocabSize);

  OutputClaim claim;
  claim.path = opts.outFile;
  claim.overwrite = opts.overwrite;
  claim.inputs = {src.string()};
  claim.job = "export gguf";
  claim.file = true;
  claim.writtenByPareto = isParetoGguf;
  OutputFolder output(claim);

  report("load", 0, src.string());
  DenseWeights weights = readDenseWeights(src.string(), std::nullopt, cancel);
  const TensorType sourceFloat = floatType(weights.sourceDtype);
  const bool floatAsked = asked && !gguf::traits(*asked).quantized;

  // A module compressed to a gguf-* format: its stored blocks, written as they are under `auto`.
  std::map<std::string, WeightFormat> stored;
  if (automatic)
    for (const std::string& module : weights.densified)
      if (const ModuleFormat* f = weights.manifest->find(module); f != nullptr && f->weight.isGguf())
        stored.emplace(module + ".weight", f->weight);
  // A packed module GGUF has no type for: only a --type that converts it can write it. The head is the exception:
  // its blocks when its grid is a ggml type (formats/GridAsGguf.h), else the source's float type (as a dense head
  // is), dequantized; a note says which.
  const ModuleFormat* packedHead =
      weights.densified.count("lm_head") && !stored.count("lm_head.weight") ? weights.manifest->find("lm_head") : nullptr;
  if (automatic)
    for (const std::string& module : weights.densified) {
      const ModuleFormat* f = weights.manifest->find(module);
      if (stored.count(module + ".weight") || module == "lm_head") continue;
      throw InputError(fileMessage(opts.modelDir, module + " is stored as " + (f ? f->format : std::string("packed")) +
                                                     ", which GGUF has no type for; --type q4_0, q4_k, q6_k or q8_0 "
                                                     "requantizes it from its dequantized weights by round-to-nearest, "
                                                     "--type f16 writes it dense"));
    }

  GgufExportReport result;
  result.type = opts.type;
  result.architecture = arch.architecture;
  gguf::Writer w;
  const std::string& a = arch.architecture;
  w.set("general.architecture", a);
  w.set(kProducerKey, std::string("pareto ") + paretoVersion());
  w.set("pareto.source", src.string());
  w.set("general.name", src.filename().string());
  // `auto`: the file is named after the GGUF type most of its stored modules have, when they have one.
  std::map<TensorType, int64_t> storedTypes;
  for (const auto& [name, format] : stored) ++storedTypes[format.ggufType];
  const auto mostStored = std::max_element(storedTypes.begin(), storedTypes.end(),
                                           [](const auto& x, const auto& y) { return x.second < y.second; });
  const TensorType named = asked ? *asked : mostStored != storedTypes.end() ? mostStored->first : sourceFloat;
  w.set("general.file_type", fileType(named));
  if (gguf::traits(named).quantized) w.set("general.quantization_version", uint32_t(2));
  w.set(a + ".context_length", uint32_t(config.maxPositionEmbeddings));
  w.set(a + ".embedding_length", uint32_t(config.hiddenSize));
  w.set(a + ".block_count", uint32_t(config.numLayers));
  w.set(a + ".feed_forward_length", uint32_t(config.intermediateSize));
  w.set(a + ".attention.head_count", uint32_t(config.numHeads));
  w.set(a + ".attention.head_count_kv", uint32_t(config.numKvHeads));
  w.set(a + ".attention.key_length", uint32_t(config.headDim));
  w.set(a + ".attention.value_length", uint32_t(config.headDim));
  w.set(a + ".attention.layer_norm_rms_epsilon", float(config.rmsNormEps));
  w.set(a + ".rope.freq_base", float(config.ropeTheta));
  w.set(a + ".rope.dimension_count", uint32_t(config.headDim));
  w.set(a + ".vocab_size", uint32_t(config.vocabSize));
  w.set("tokenizer.ggml.model", std::string("gpt2"));
  w.set("tokenizer.ggml.pre", vocab.pre);
  w.set("tokenizer.ggml.tokens", vocab.tokens);
  w.set("tokenizer.ggml.token_type", vocab.types);
  w.set("tokenizer.ggml.merges", vocab.merges);
  if (config.bosTokenId) w.set("tokenizer.ggml.bos_token_id", uint32_t(*config.bosTokenId));
  if (!config.eosTokenIds.empty()) w.set("tokenizer.ggml.eos_token_id", uint32_t(config.eosTokenIds.front()));
  w.set("tokenizer.ggml.add_bos_token", vocab.addBos);
  if (fs::exists(src / "tokenizer_config.json")) {
    const nlohmann::json tc = readJsonFile((src / "tokenizer_config.json").string(), kMaxTokenizerJsonBytes,
                                           "a tokenizer_config.json");
    if (tc.contains("chat_template") && tc["chat_template"].is_string())
      w.set("tokenizer.chat_template", tc["chat_template"].get<std::string>());
    if (tc.contains("add_bos_token") && tc["add_bos_token"].is_boolean())
      w.set("tokenizer.ggml.add_bos_token", tc["add_bos_token"].get<bool>());
  }

  // Tensors in llama.cpp's order: the embedding, each block, the final norm and the head.
  std::vector<std::pair<std::string, std::string>> order;   // (gguf name, hf name)
  for (const auto& [name, t] : weights.tensors) {
    if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;   // recomputed from rope.freq_base
    const std::string g = ggufName(name);
    if (g.empty()) throw InputError(fileMessage(opts.modelDir, "tensor " + name + " has no place in a GGUF " + a + " model"));
    order.emplace_back(g, name);
  }
  auto rank = [](const std::string& g) {
    if (g.rfind("token_embd", 0) == 0) return std::pair<int64_t, std::string>(-1, g);
    if (g.rfind("blk.", 0) == 0) return std::pair<int64_t, std::string>(std::stoll(g.substr(4)), g.substr(g.find('.', 4)));
    return std::pair<int64_t, std::string>(1 << 30, g == "output.weight" ? "~" : g);
  };
  std::sort(order.begin(), order.end(), [&](const auto& x, const auto& y) { return rank(x.first) < rank(y.first); });

  int64_t linearWeights = 0;
  uint64_t linearBytes = 0;
  std::map<std::string, int64_t> fallbacks;
  std::optional<Checkpoint> ckpt;
  std::optional<CheckpointTensors> storedTensors;
  if (!stored.empty() || packedHead != nullptr) storedTensors.emplace(ckpt.emplace(Checkpoint::open(src.string())));
  std::optional<TensorType> headGrid;   // the head's int grid written as the ggml type it is (formats/GridAsGguf.h)
  // q and k rows are reordered for llama.cpp's RoPE: whole rows, so a stored module's rows of blocks move alike.
  auto permuteRows = [&](const std::string& hf, const at::Tensor& rows) {
    if (arch.permuteQk && hf.find("self_attn.q_proj.") != std::string::npos) return permuteForRope(rows, config.numHeads);
    if (arch.permuteQk && hf.find("self_attn.k_proj.") != std::string::npos) return permuteForRope(rows, config.numKvHeads);
    return rows;
  };
  for (const auto& [g, hf] : order) {
    const at::Tensor t = permuteRows(hf, weights.tensors.at(hf));
    gguf::TensorInfo info;
    info.name = g;
    info.shape = t.sizes().vec();
    if (auto it = stored.find(hf); it != stored.end()) {
      const std::string module = hf.substr(0, hf.size() - 7);
      const PackedModule packed = readPackedModule(*storedTensors, module, it->second, t.size(0), t.size(1));
      const at::Tensor blocks = permuteRows(hf, packed.gguf).contiguous();
      info.type = it->second.ggufType;
      info.data = [blocks]() {
        return std::vector<uint8_t>(blocks.data_ptr<uint8_t>(), blocks.data_ptr<uint8_t>() + blocks.numel());
      };
      if (isBlockLinear(hf)) {
        linearWeights += t.numel();
        linearBytes += info.bytes();
      }
      ++result.tensorsByType[gguf::traits(info.type).name];
      w.addTensor(std::move(info));
      continue;
    }
    if (automatic && packedHead != nullptr && hf == "lm_head.weight") {
      PackedModuleRecord record;
      record.actOrder = packedHead->actOrder;
      const PackedModule packed = readPackedModule(*storedTensors, "lm_head", packedHead->weight, t.size(0), t.size(1), record);
      if (packed.quant && !packed.bitmask && ggufTypeOfGrid(*packed.quant)) {
        headGrid = ggufTypeOfGrid(*packed.quant);
        const at::Tensor blocks = gridAsGgufBlocks(*packed.quant);
        info.type = *headGrid;
        info.data = [blocks]() {
          return std::vector<uint8_t>(blocks.data_ptr<uint8_t>(), blocks.data_ptr<uint8_t>() + blocks.numel());
        };
        ++result.tensorsByType[gguf::traits(info.type).name];
        w.addTensor(std::move(info));
        continue;
      }
    }
    if (t.dim() == 1) {
      info.type = TensorType::F32;   // norms and biases: llama.cpp computes them in f32
    } else if (!isBlockLinear(hf)) {
      info.type = floatAsked ? *asked : sourceFloat;
    } else {
      info.type = asked.value_or(sourceFloat);
      if (gguf::traits(info.type).quantized && t.size(1) % gguf::traits(info.type).weightsPerBlock != 0) {
        const TensorType fallback = gguf::narrowRowType(info.type);
        if (t.size(1) % gguf::traits(fallback).weightsPerBlock != 0)
          throw InputError(fileMessage(opts.modelDir, hf + ": " + std::to_string(t.size(1)) + " input columns are not a "
                                                        "multiple of 32, which every GGUF block type needs"));
        ++fallbacks[std::string(gguf::traits(info.type).name) + " → " + gguf::traits(fallback).name + " (" +
                    std::to_string(t.size(1)) + " columns)"];
        info.type = fallback;
      }
      linearWeights += t.numel();
    }
    const TensorType type = info.type;
    info.data = [t, type]() -> std::vector<uint8_t> {
      if (!gguf::traits(type).quantized) return floatBytes(t, type);
      const at::Tensor f = t.to(at::kFloat).contiguous();
      return gguf::quantizeRows(type, f.data_ptr<float>(), f.size(0), f.size(1));
    };
    if (isBlockLinear(hf)) linearBytes += info.bytes();
    ++result.tensorsByType[gguf::traits(type).name];
    w.addTensor(std::move(info));
  }
  if (config.llama3Rope) {
    const std::vector<float> factors = llama3RopeFactors(config);
    gguf::TensorInfo info;
    info.name = "rope_freqs.weight";
    info.shape = {int64_t(factors.size())};
    info.type = TensorType::F32;
    info.data = [factors] {
      std::vector<uint8_t> out(factors.size() * sizeof(float));
      std::memcpy(out.data(), factors.data(), out.size());
      return out;
    };
    ++result.tensorsByType["f32"];
    w.addTensor(std::move(info));
  }
  for (const auto& [what, count] : fallbacks)
    result.notes.push_back(std::to_string(count) + " block linears " + what + ": a k-quant row is whole 256-weight "
                           "super-blocks");
  const size_t storedLinears = stored.size() - stored.count("lm_head.weight");
  if (storedLinears > 0)
    result.notes.push_back(std::to_string(storedLinears) + " block linears written as compress stored them (gguf-*)");
  if (stored.count("lm_head.weight"))
    result.notes.push_back("output.weight written as compress stored lm_head (" +
                           stored.at("lm_head.weight").name() + ")");
  if (headGrid)
    result.notes.push_back("output.weight written as " + std::string(gguf::traits(*headGrid).name) + ", the blocks "
                           "lm_head's " + packedHead->format + " grid is, with nothing requantized");
  else if (packedHead != nullptr)
    result.notes.push_back("output.weight written dequantized (" + std::string(gguf::traits(
                               floatAsked ? *asked : sourceFloat).name) + "): lm_head is stored as " +
                           packedHead->format + (packedHead->weight.isGguf() ? ", whose blocks only --type auto keeps"
                                                                              : ", which GGUF has no type for"));
  const size_t requantized = weights.densified.size() - (weights.densified.count("lm_head") ? 1 : 0);
  if (asked && requantized > 0)
    result.notes.push_back(std::to_string(requantized) + " packed modules requantized from their "
                           "dequantized weights to " + opts.type + " by round-to-nearest");

  w.write(output.staging(), [&](const ProgressUpdate& u) { report("write", 0.05 + 0.9 * u.fraction, u.message); },
          cancel);
  output.commit();
  result.outFile = output.target();
  result.tensors = int64_t(w.tensors().size());
  result.bytes = uint64_t(fs::file_size(result.outFile));
  result.linearBitsPerWeight = linearWeights > 0 ? 8.0 * double(linearBytes) / double(linearWeights) : 0;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report("write", 1.0, result.outFile);
  return result;
}

}  // namespace pareto
