// Read-only memory map of a whole file (RAII). Checkpoints are mapped, not read, so opening a multi-GB model
// costs nothing until tensors are touched.
#pragma once

#include <cstddef>
#include <string>

namespace pareto {

class MappedFile {
 public:
  // Throws InputError naming the file if it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace pareto
