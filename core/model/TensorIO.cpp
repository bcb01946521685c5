#include "model/TensorIO.h"

#include <ATen/ATen.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "util/Error.h"

namespace pareto {

c10::ScalarType scalarType(DType dtype) {
  switch (dtype) {
    case DType::F32: return at::kFloat;
    case DType::F16: return at::kHalf;
    case DType::BF16: return at::kBFloat16;
    case DType::I32: return at::kInt;
    case DType::I16: return at::kShort;
    case DType::I8: return at::kChar;
    case DType::U8: return at::kByte;
  }
  return at::kFloat;
}

DType safetensorsDtype(c10::ScalarType type, const std::string& tensorName) {
  switch (type) {
    case at::kFloat: return DType::F32;
    case at::kHalf: return DType::F16;
    case at::kBFloat16: return DType::BF16;
    case at::kInt: return DType::I32;
    case at::kShort: return DType::I16;
    case at::kChar: return DType::I8;
    case at::kByte: return DType::U8;
    default:
      throw Error("tensor " + tensorName + ": dtype " + std::string(c10::toString(type)) +
                  " cannot be written to safetensors by Pareto");
  }
}

at::Tensor readTensor(const TensorEntry& e) {
  at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(scalarType(e.dtype)));
  if (e.nbytes > 0) readTensorBytes(e, t.data_ptr());
  return t;
}

at::Tensor readTensorFor(const TensorEntry& e, const c10::Device& device) {
  if (!device.is_cuda()) return readTensor(e);
  at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(scalarType(e.dtype)).pinned_memory(true));
  if (e.nbytes > 0) readTensorBytes(e, t.data_ptr());
  return t;
}

namespace {

class File {
 public:
  explicit File(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
    if (f_ == nullptr) throw Error(fileMessage(path, std::string("cannot create: ") + std::strerror(errno)));
  }
  ~File() {
    if (f_ != nullptr) std::fclose(f_);
  }
  void write(const void* data, size_t n) {
    if (n > 0 && std::fwrite(data, 1, n, f_) != n)
      throw Error(fileMessage(path_, std::string("write failed: ") + std::strerror(errno)));
  }
  // Data must be on disk before the rename makes the file visible under its final name.
  void close() {
    bool ok = std::fflush(f_) == 0 && ::fsync(fileno(f_)) == 0;
    int err = errno;
    ok = (std::fclose(f_) == 0) && ok;
    f_ = nullptr;
    if (!ok) throw Error(fileMessage(path_, std::string("write failed: ") + std::strerror(err)));
  }

 private:
  std::string path_;
  FILE* f_;
};

}  // namespace

uint64_t PlannedTensor::bytes() const {
  uint64_t n = c10::elementSize(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

void writeSafetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<PlannedTensor> planned;
  planned.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    at::Tensor t = tensor.detach();
    planned.push_back({name, t.scalar_type(), t.sizes().vec(), [t] { return t; }});
  }
  writeSafetensorsStreamed(path, planned, metadata);
}

void writeSafetensorsStreamed(const std::string& path, const std::vector<PlannedTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const PlannedTensor& t : tensors) {
    if (header.contains(t.name)) throw Error(fileMessage(path, "tensor " + t.name + " written twice"));
    header[t.name] = {{"dtype", dtypeName(safetensorsDtype(t.dtype, t.name))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes()}}};
    offset += t.bytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');   // aligned data lets readers map tensors without copying
  const std::string partial = path + ".partial";
  try {
    File f(partial);
    uint64_t len = text.size();
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(len >> (8 * i));
    f.write(le, 8);
    f.write(text.data(), text.size());
    for (const PlannedTensor& planned : tensors) {
      const at::Tensor t = planned.produce().detach().to(at::kCPU).contiguous();
      if (t.scalar_type() != planned.dtype || t.sizes() != at::IntArrayRef(planned.shape))
        throw Error(fileMessage(path, "tensor " + planned.name + " is not the dtype and shape its header announced"));
      f.write(t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
    }
    f.close();
    std::filesystem::rename(partial, path);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(partial, ec);
    throw;
  }
}

}  // namespace pareto
