#include "checkpoint/Safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "util/Error.h"
#include "util/Json.h"
#include "util/MappedFile.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace pareto {

namespace {

// A header this big is not a model header but an attempt to make us allocate: real ones are kilobytes to a
// few megabytes even for models with tens of thousands of tensors.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;

constexpr const char* kSupportedDtypes = "F32, F16, BF16, and I32, I16, I8, U8 for packed formats";

// dtypes the safetensors format defines that we do not read, so the message can say "unsupported" rather
// than "unknown" (a quantized or integer checkpoint is a real file, just not one we handle).
const std::set<std::string>& otherSafetensorsDtypes() {
  static const std::set<std::string> names = {"F64",     "I64",     "U64",     "U32",     "U16",     "BOOL",
                                              "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"};
  return names;
}

std::optional<DType> parseDtype(const std::string& name) {
  if (name == "F32") return DType::F32;
  if (name == "F16") return DType::F16;
  if (name == "BF16") return DType::BF16;
  if (name == "I32") return DType::I32;
  if (name == "I16") return DType::I16;
  if (name == "I8") return DType::I8;
  if (name == "U8") return DType::U8;
  return std::nullopt;
}

std::string inQuotes(const std::string& s) { return "'" + s + "'"; }

// "an array", "a string", ...: for "expected X, found Y" messages.
std::string describeType(const json& value) {
  switch (value.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    default:
      return "a number";
  }
}

std::string tensorMessage(const std::string& file, const std::string& tensor, const std::string& what) {
  return fileMessage(file, "tensor " + inQuotes(tensor) + ": " + what);
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

std::string rangeText(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

uint64_t readLittleEndian64(const std::byte* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<uint64_t>(std::to_integer<uint8_t>(p[i]));
  return value;
}

// Parses the header, rejecting duplicate top-level names: nlohmann would silently keep the last one, and two
// definitions of one tensor in a file from a stranger is a sign of tampering or a broken writer.
json parseHeader(const std::string& path, const char* begin, const char* end) {
  std::set<std::string> seen;
  std::string duplicate;
  const JsonKeyVisitor onKey = [&](const std::string& key) {
    if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
  };
  json header = parseJson(std::string_view(begin, static_cast<size_t>(end - begin)), path, onKey,
                          "header is not valid JSON");
  if (!header.is_object())
    throw InputError(
        fileMessage(path, "header is " + describeType(header) + ", expected a JSON object of tensors"));
  if (!duplicate.empty()) throw InputError(tensorMessage(path, duplicate, "defined twice in the header"));
  return header;
}

std::map<std::string, std::string> parseMetadata(const std::string& path, const json& value) {
  if (!value.is_object())
    throw InputError(fileMessage(
        path, std::string("__metadata__ must be an object of strings, found ") + describeType(value)));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string())
      throw InputError(fileMessage(
          path, "__metadata__ entry " + inQuotes(key) + " must be a string, found " + describeType(item)));
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

// One header entry, checked against the data section it points into (dataSize bytes at dataStart).
TensorEntry parseEntry(const std::string& path, const std::string& name, const json& value,
                       const std::byte* dataStart, uint64_t dataSize) {
  if (!value.is_object())
    throw InputError(
        tensorMessage(path, name, std::string("entry must be an object, found ") + describeType(value)));

  auto field = [&](const char* key) -> const json& {
    auto it = value.find(key);
    if (it == value.end()) throw InputError(tensorMessage(path, name, std::string("missing \"") + key + "\""));
    return *it;
  };

  TensorEntry entry;
  entry.name = name;
  entry.file = path;

  const json& dtype = field("dtype");
  if (!dtype.is_string())
    throw InputError(
        tensorMessage(path, name, std::string("\"dtype\" must be a string, found ") + describeType(dtype)));
  const auto& dtypeText = dtype.get_ref<const std::string&>();
  auto parsedDtype = parseDtype(dtypeText);
  if (!parsedDtype) {
    if (otherSafetensorsDtypes().count(dtypeText))
      throw InputError(tensorMessage(
          path, name, "dtype " + dtypeText + " is unsupported (Pareto reads " + kSupportedDtypes + ")"));
    throw InputError(tensorMessage(path, name,
                                   "unknown dtype " + inQuotes(dtypeText) +
                                       " (not a safetensors dtype; Pareto reads " + kSupportedDtypes + ")"));
  }
  entry.dtype = *parsedDtype;

  const json& shape = field("shape");
  if (!shape.is_array())
    throw InputError(tensorMessage(
        path, name, std::string("\"shape\" must be an array of integers, found ") + describeType(shape)));
  for (const json& dim : shape) {
    if (!dim.is_number_integer())
      throw InputError(
          tensorMessage(path, name, "\"shape\" must be an array of integers, found " + shape.dump()));
    if (dim.is_number_unsigned() && dim.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      throw InputError(
          tensorMessage(path, name, "shape " + shape.dump() + " has a dimension too large to represent"));
    int64_t d = dim.get<int64_t>();
    if (d < 0)
      throw InputError(tensorMessage(path, name, "shape " + shape.dump() + " has a negative dimension"));
    entry.shape.push_back(d);
  }

  const json& offsets = field("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    throw InputError(tensorMessage(
        path, name,
        "\"data_offsets\" must be two non-negative integers [begin, end], found " + offsets.dump()));
  uint64_t begin = offsets[0].get<uint64_t>();
  uint64_t end = offsets[1].get<uint64_t>();

  // Multiply in 64 bits with an overflow check: a hostile shape can wrap to exactly the byte span it claims.
  uint64_t expected = dtypeSize(entry.dtype);
  for (int64_t d : entry.shape) {
    if (d != 0 && expected > std::numeric_limits<uint64_t>::max() / uint64_t(d))
      throw InputError(tensorMessage(
          path, name,
          "shape " + shapeText(entry.shape) + " in " + dtypeText + " overflows a 64-bit byte count"));
    expected *= uint64_t(d);
  }
  if (begin > end)
    throw InputError(
        tensorMessage(path, name, "data_offsets " + rangeText(begin, end) + " begin after they end"));
  if (end - begin != expected)
    throw InputError(tensorMessage(path, name,
                                   "shape " + shapeText(entry.shape) + " in " + dtypeText + " needs " +
                                       std::to_string(expected) + " bytes but data_offsets " +
                                       rangeText(begin, end) + " span " + std::to_string(end - begin)));
  if (end > dataSize)
    throw InputError(tensorMessage(path, name,
                                   "data_offsets " + rangeText(begin, end) +
                                       " run past the end of the data section (" + std::to_string(dataSize) +
                                       " bytes): the model is corrupted or incomplete (truncated download?)"));
  entry.nbytes = static_cast<size_t>(expected);
  entry.data = dataStart + begin;
  return entry;
}

}  // namespace

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::I32:
      return "I32";
    case DType::I16:
      return "I16";
    case DType::I8:
      return "I8";
    case DType::U8:
      return "U8";
  }
  return "?";
}

bool isFloating(DType dtype) { return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16; }

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 4;
    case DType::F16:
      return 2;
    case DType::BF16:
      return 2;
    case DType::I32:
      return 4;
    case DType::I16:
      return 2;
    case DType::I8:
    case DType::U8:
      return 1;
  }
  return 0;
}

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// `head` holds the file's first bytes (the length and, once the length is checked, the header) and `base` the
// whole file: the same memory for an image in memory, a guarded copy of the header for a mapped file so that a
// file truncated while it is parsed cannot fault.
SafetensorsContents parseImage(const std::byte* head, const std::byte* base, uint64_t fileSize,
                               const std::string& path) {
  if (fileSize < 8)
    throw InputError(fileMessage(path, "too short to be a safetensors file (" + std::to_string(fileSize) +
                                           " bytes; the header length alone takes 8)"));
  const uint64_t headerSize = readLittleEndian64(head);
  if (headerSize == 0) throw InputError(fileMessage(path, "header length is 0 (not a safetensors file)"));
  if (headerSize > kMaxHeaderBytes)
    throw InputError(
        fileMessage(path, "header length " + std::to_string(headerSize) +
                              " exceeds the 100 MB limit (not a safetensors file, or a hostile one)"));
  if (headerSize > fileSize - 8)
    throw InputError(
        fileMessage(path, "header length " + std::to_string(headerSize) + " is larger than the file (" +
                              std::to_string(fileSize) +
                              " bytes): the model is corrupted or incomplete, or not safetensors"));

  const char* headerBegin = reinterpret_cast<const char*>(head + 8);
  json header = parseHeader(path, headerBegin, headerBegin + headerSize);

  SafetensorsContents contents;
  std::vector<TensorEntry>& tensors = contents.tensors;
  const std::byte* dataStart = base + 8 + headerSize;
  const uint64_t dataSize = fileSize - 8 - headerSize;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      contents.metadata = parseMetadata(path, value);
      continue;
    }
    tensors.push_back(parseEntry(path, name, value, dataStart, dataSize));
  }

  std::sort(tensors.begin(), tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    if (a.data != b.data) return a.data < b.data;
    if (a.nbytes != b.nbytes) return a.nbytes < b.nbytes;
    return a.name < b.name;
  });
  // Sorted by start, so an overlap shows as a tensor starting before the furthest end seen so far. Empty
  // tensors occupy no bytes and cannot overlap anything.
  const TensorEntry* furthest = nullptr;
  for (const TensorEntry& t : tensors) {
    if (t.nbytes == 0) continue;
    if (furthest != nullptr && t.data < furthest->data + furthest->nbytes)
      throw InputError(
          tensorMessage(path, t.name, "bytes overlap those of tensor " + inQuotes(furthest->name)));
    if (furthest == nullptr || t.data + t.nbytes > furthest->data + furthest->nbytes) furthest = &t;
  }
  return contents;
}

}  // namespace

SafetensorsContents parseSafetensors(const std::byte* base, uint64_t fileSize, const std::string& path) {
  return parseImage(base, base, fileSize, path);
}

void readTensorBytes(const TensorEntry& entry, void* to) {
  copyFromMapping(to, entry.data, entry.nbytes, entry.file);
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_unique<MappedFile>(path)), path_(path) {
  // The header is copied out of the mapping before it is parsed (only as much as the length field promises and
  // the file holds; parseImage refuses the rest before reading past the 8 bytes).
  std::vector<std::byte> head;
  if (file_->size() >= 8) {
    head.resize(8);
    file_->copy(head.data(), file_->data(), 8);
    const uint64_t headerSize = readLittleEndian64(head.data());
    if (headerSize > 0 && headerSize <= kMaxHeaderBytes && headerSize <= file_->size() - 8) {
      head.resize(8 + headerSize);
      file_->copy(head.data() + 8, file_->data() + 8, headerSize);
    }
  }
  SafetensorsContents contents = parseImage(head.data(), file_->data(), file_->size(), path);
  tensors_ = std::move(contents.tensors);
  metadata_ = std::move(contents.metadata);
}

SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;

const std::string& SafetensorsFile::path() const { return path_; }

void SafetensorsFile::releasePages(const TensorEntry& entry) const { file_->dropPages(entry.data, entry.nbytes); }

namespace {

const char* kIndexName = "model.safetensors.index.json";
const char* kSingleName = "model.safetensors";

// Shard names come from a downloaded JSON file; one must not be able to point us at /etc/passwd or ../../x.
void checkShardName(const std::string& indexPath, const std::string& tensor, const std::string& shard) {
  fs::path p(shard);
  bool escapes = shard.empty() || p.is_absolute() || p.has_root_name() || p.has_root_directory();
  for (const auto& part : p)
    if (part == "..") escapes = true;
  if (escapes)
    throw InputError(
        tensorMessage(indexPath, tensor,
                      "shard file name " + inQuotes(shard) + " is not a plain name inside the model folder"));
}

// weight_map of the index: tensor name -> shard file name.
std::map<std::string, std::string> readWeightMap(const std::string& indexPath) {
  json index = readJsonFile(indexPath, kMaxIndexJsonBytes, "a safetensors index");
  if (!index.is_object()) throw InputError(fileMessage(indexPath, "must be a JSON object"));
  auto it = index.find("weight_map");
  if (it == index.end()) throw InputError(fileMessage(indexPath, "missing \"weight_map\""));
  if (!it->is_object())
    throw InputError(fileMessage(
        indexPath,
        std::string("\"weight_map\" must be an object of tensor -> shard file, found ") + describeType(*it)));
  std::map<std::string, std::string> weightMap;
  for (const auto& [tensor, shard] : it->items()) {
    if (!shard.is_string())
      throw InputError(tensorMessage(indexPath, tensor,
                                     std::string("shard must be a file name, found ") + describeType(shard)));
    checkShardName(indexPath, tensor, shard.get<std::string>());
    weightMap[tensor] = shard.get<std::string>();
  }
  if (weightMap.empty()) throw InputError(fileMessage(indexPath, "\"weight_map\" is empty"));
  return weightMap;
}

bool isPickleCheckpoint(const fs::path& p) {
  std::string ext = p.extension().string();
  return ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".ckpt";
}

[[noreturn]] void throwNoCheckpoint(const std::string& dir) {
  std::vector<std::string> pickles, otherSafetensors;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    if (!item.is_regular_file(ec)) continue;
    if (isPickleCheckpoint(item.path())) pickles.push_back(item.path().filename().string());
    if (item.path().extension() == ".safetensors") otherSafetensors.push_back(item.path().filename().string());
  }
  std::sort(pickles.begin(), pickles.end());
  std::sort(otherSafetensors.begin(), otherSafetensors.end());
  auto join = [](const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  if (!pickles.empty())
    throw InputError(fileMessage(
        dir, "only PyTorch pickle checkpoints found (" + join(pickles) +
                 "); Pareto does not load pickle files because unpickling can run arbitrary code. If you trust "
                 "where the files come from, convert them to safetensors first, e.g.: python -c \"from transformers import AutoModelForCausalLM as M; "
                 "M.from_pretrained('" +
                 dir + "').save_pretrained('" + dir + "', safe_serialization=True)\""));
  std::string what = std::string("no ") + kSingleName + " or " + kIndexName + " in the folder";
  if (!otherSafetensors.empty())
    what += " (found " + join(otherSafetensors) + ", which are not named as a model)";
  throw InputError(fileMessage(dir, what));
}

}  // namespace

Checkpoint Checkpoint::open(const std::string& modelDir) {
  std::error_code ec;
  if (!fs::exists(modelDir, ec)) throw InputError(fileMessage(modelDir, "model folder does not exist"));
  if (!fs::is_directory(modelDir, ec))
    throw InputError(fileMessage(modelDir, "not a folder (expected a model folder)"));

  Checkpoint ckpt;
  ckpt.dir_ = modelDir;
  const fs::path dir(modelDir);
  const std::string indexPath = (dir / kIndexName).string();
  const std::string singlePath = (dir / kSingleName).string();

  std::map<std::string, std::string> weightMap;  // empty for a single-file checkpoint
  std::vector<std::string> shardNames;
  if (fs::exists(indexPath, ec)) {
    weightMap = readWeightMap(indexPath);
    std::set<std::string> distinct;
    for (const auto& [tensor, shard] : weightMap) distinct.insert(shard);
    for (const auto& [tensor, shard] : weightMap) {
      if (!fs::exists(dir / shard, ec))
        throw InputError(tensorMessage(
            indexPath, tensor,
            "its shard " + inQuotes(shard) + " is missing from the folder (incomplete download?)"));
    }
    shardNames.assign(distinct.begin(), distinct.end());
  } else if (fs::exists(singlePath, ec)) {
    shardNames.push_back(kSingleName);
  } else {
    throwNoCheckpoint(modelDir);
  }

  // Tensor name -> the shard it was found in, to catch one tensor stored twice.
  std::map<std::string, std::string> foundIn;
  for (const auto& shard : shardNames) {
    std::string shardPath = (dir / shard).string();
    auto file = std::make_unique<SafetensorsFile>(shardPath);
    for (const TensorEntry& t : file->tensors()) {
      auto [it, inserted] = foundIn.emplace(t.name, shard);
      if (!inserted)
        throw InputError(fileMessage(modelDir, "tensor " + inQuotes(t.name) + " is present in both " +
                                                   inQuotes(it->second) + " and " + inQuotes(shard)));
      ckpt.byName_[t.name] = &t;
    }
    ckpt.fileNames_.push_back(shardPath);
    ckpt.files_.push_back(std::move(file));
  }

  if (!weightMap.empty()) {
    for (const auto& [tensor, shard] : weightMap) {
      auto it = foundIn.find(tensor);
      if (it == foundIn.end())
        throw InputError(tensorMessage(
            indexPath, tensor, "listed in shard " + inQuotes(shard) + ", but that shard has no such tensor"));
      if (it->second != shard)
        throw InputError(
            tensorMessage(indexPath, tensor,
                          "listed in shard " + inQuotes(shard) + ", but it is in " + inQuotes(it->second)));
    }
    // A tensor the index does not know about means the index and the shards come from different saves.
    for (const auto& [tensor, shard] : foundIn) {
      if (!weightMap.count(tensor))
        throw InputError(tensorMessage((dir / shard).string(), tensor, "not listed in " + indexPath));
    }
  }

  ckpt.ordered_.reserve(ckpt.byName_.size());
  for (const auto& [name, entry] : ckpt.byName_) ckpt.ordered_.push_back(entry);
  return ckpt;
}

void Checkpoint::releasePages(const TensorEntry& entry) const {
  for (const auto& file : files_)
    if (file->path() == entry.file) file->releasePages(entry);
}

const TensorEntry* Checkpoint::find(const std::string& name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : it->second;
}

const TensorEntry& Checkpoint::at(const std::string& name) const {
  if (const TensorEntry* entry = find(name)) return *entry;
  throw InputError(fileMessage(dir_, "no tensor " + inQuotes(name) + " in the checkpoint"));
}

}  // namespace pareto
