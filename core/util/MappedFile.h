// Read-only memory map of a whole file (RAII). Checkpoints are mapped, not read, so opening a multi-GB model
// costs nothing until tensors are touched. Bytes are copied out with copyFromMapping: a file truncated under
// the mapping (another process rewriting the model) turns the read into an InputError instead of a SIGBUS.
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
  // Copies n bytes at `from` (inside this mapping) to `to`, as copyFromMapping does.
  void copy(void* to, const std::byte* from, size_t n) const;
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Gives back the pages of [from, from + n) that lie wholly inside this mapping: they leave the process's
  // resident set (the data stays in the file and the page cache; a later read faults them in again). A model
  // streamed layer by layer calls this once a layer is copied out, so its resident memory stays one layer,
  // not the file. Ranges outside the mapping are ignored.
  void dropPages(const std::byte* from, size_t n) const;

 private:
  void release();
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Copies n bytes from a memory-mapped file to `to`. A page the file no longer has (it was truncated after it
// was mapped) raises SIGBUS; while this copy runs on this thread the signal ends the copy, which then throws
// InputError "<path>: changed size while it was read (truncated?)". SIGBUS anywhere else keeps its default
// action.
void copyFromMapping(void* to, const void* from, size_t n, const std::string& path);

}  // namespace pareto
