#include "export/GgufWriter.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <type_traits>

#include "util/Error.h"

namespace pareto {
namespace gguf {
namespace {

// GGUF's metadata value types (enum gguf_type).
enum class ValueType : uint32_t {
  Uint32 = 4, Int32 = 5, Float32 = 6, Bool = 7, String = 8, Array = 9, Uint64 = 10
};

uint64_t padding(uint64_t offset) { return (kAlignment - offset % kAlignment) % kAlignment; }

// Little-endian output with every write checked (x86-64 and arm64 are little-endian, as GGUF is).
class Output {
 public:
  explicit Output(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "wb")) {
    if (file_ == nullptr) throw Error(fileMessage(path, std::string("cannot create: ") + std::strerror(errno)));
    std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  }
  ~Output() {
    if (file_ != nullptr) std::fclose(file_);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  void bytes(const void* data, size_t n) {
    if (n > 0 && std::fwrite(data, 1, n, file_) != n)
      throw Error(fileMessage(path_, std::string("write failed: ") + std::strerror(errno)));
    written_ += n;
  }
  template <class T>
  void value(T v) {
    static_assert(std::is_arithmetic<T>::value, "plain numbers only");
    bytes(&v, sizeof v);
  }
  void string(const std::string& s) {
    value<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad() {
    static const char zeros[kAlignment] = {};
    bytes(zeros, size_t(padding(written_)));
  }
  // Flushes and syncs: a file reported written is on disk.
  void close() {
    if (std::fflush(file_) != 0 || ::fsync(fileno(file_)) != 0)
      throw Error(fileMessage(path_, std::string("write failed: ") + std::strerror(errno)));
    const int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) throw Error(fileMessage(path_, std::string("write failed: ") + std::strerror(errno)));
  }
  uint64_t written() const { return written_; }

 private:
  std::string path_;
  FILE* file_;
  uint64_t written_ = 0;
};

void writeValue(Output& out, const MetaValue& v) {
  struct Visitor {
    Output& out;
    void operator()(uint32_t x) { out.value(uint32_t(ValueType::Uint32)), out.value(x); }
    void operator()(int32_t x) { out.value(uint32_t(ValueType::Int32)), out.value(x); }
    void operator()(uint64_t x) { out.value(uint32_t(ValueType::Uint64)), out.value(x); }
    void operator()(float x) { out.value(uint32_t(ValueType::Float32)), out.value(x); }
    void operator()(bool x) { out.value(uint32_t(ValueType::Bool)), out.value(uint8_t(x ? 1 : 0)); }
    void operator()(const std::string& x) { out.value(uint32_t(ValueType::String)), out.string(x); }
    void operator()(const std::vector<std::string>& xs) {
      array(ValueType::String, xs.size());
      for (const auto& x : xs) out.string(x);
    }
    void operator()(const std::vector<int32_t>& xs) {
      array(ValueType::Int32, xs.size());
      for (int32_t x : xs) out.value(x);
    }
    void operator()(const std::vector<float>& xs) {
      array(ValueType::Float32, xs.size());
      for (float x : xs) out.value(x);
    }
    void array(ValueType element, size_t n) {
      out.value(uint32_t(ValueType::Array));
      out.value(uint32_t(element));
      out.value(uint64_t(n));
    }
  };
  std::visit(Visitor{out}, v);
}

}  // namespace

uint64_t TensorInfo::bytes() const {
  if (shape.empty()) throw InputError("gguf tensor " + name + ": no dimensions");
  uint64_t outer = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) outer *= uint64_t(shape[i]);
  try {
    return outer * uint64_t(rowBytes(type, shape.back()));
  } catch (const InputError& e) {
    throw InputError("gguf tensor " + name + ": " + e.what());
  }
}

void Writer::set(const std::string& key, MetaValue value) {
  for (auto& [k, v] : metadata_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  metadata_.emplace_back(key, std::move(value));
}

void Writer::addTensor(TensorInfo tensor) {
  for (const auto& t : tensors_)
    if (t.name == tensor.name) throw InputError("gguf: tensor " + tensor.name + " added twice");
  for (int64_t d : tensor.shape)
    if (d <= 0) throw InputError("gguf tensor " + tensor.name + ": a dimension is not positive");
  (void)tensor.bytes();
  tensors_.push_back(std::move(tensor));
}

uint64_t Writer::dataBytes() const {
  uint64_t total = 0;
  for (const auto& t : tensors_) total += t.bytes() + padding(t.bytes());
  return total;
}

void Writer::write(const std::string& path, const ProgressCallback& progress, const CancelToken* cancel) const {
  Output out(path);
  out.bytes("GGUF", 4);
  out.value(kVersion);
  out.value(uint64_t(tensors_.size()));
  out.value(uint64_t(metadata_.size()));
  for (const auto& [key, value] : metadata_) {
    out.string(key);
    writeValue(out, value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    out.string(t.name);
    out.value(uint32_t(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) out.value(uint64_t(*it));
    out.value(uint32_t(t.type));
    out.value(offset);
    offset += t.bytes() + padding(t.bytes());
  }
  out.pad();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (cancel != nullptr && cancel->isCancelled()) throw Cancelled();
    const TensorInfo& t = tensors_[i];
    const std::vector<uint8_t> data = t.data();
    if (data.size() != t.bytes())
      throw Error("gguf tensor " + t.name + ": produced " + std::to_string(data.size()) + " bytes, expected " +
                  std::to_string(t.bytes()));
    out.bytes(data.data(), data.size());
    out.pad();
    if (progress) progress({"write", double(i + 1) / double(tensors_.size()), t.name});
  }
  out.close();
}

}  // namespace gguf
}  // namespace pareto
