// safetensors checkpoints, memory-mapped. A file is an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the tensor bytes.
// Everything in the header is validated before any tensor is handed out: files come from strangers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pareto {

class MappedFile;

// Floating types hold weights; the integer types hold packed formats (bit masks, codes, CSR indices).
enum class DType { F32, F16, BF16, I32, I16, I8, U8 };

const char* dtypeName(DType dtype);   // "F32", "F16", "BF16", "I32", ... (safetensors spelling)
bool isFloating(DType dtype);
size_t dtypeSize(DType dtype);

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;   // inside the mapped file; valid while the owning file lives
  size_t nbytes = 0;
  std::string file;                  // the .safetensors file it lives in
  int64_t numel() const;
};

// The tensors and metadata of a safetensors image in memory (8-byte length, header, data), validated exactly as
// SafetensorsFile validates a file; `source` names it in messages. Entries point into `bytes`. SafetensorsFile
// maps a file and calls this; the fuzz target calls it directly.
struct SafetensorsContents {
  std::vector<TensorEntry> tensors;   // in data order
  std::map<std::string, std::string> metadata;
};
SafetensorsContents parseSafetensors(const std::byte* bytes, uint64_t size, const std::string& source);

// Copies the entry's nbytes bytes to `to`. For a mapped file the copy is guarded: a file truncated after it was
// opened throws InputError "<file>: changed size while it was read (truncated?) ..." instead of killing the
// process with SIGBUS. Every read of tensor bytes goes through here (readTensor in TensorIO).
void readTensorBytes(const TensorEntry& entry, void* to);

class SafetensorsFile {
 public:
  // Maps and validates the file; throws InputError "<file>: ..." (naming the tensor where there is one).
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;

  const std::string& path() const;
  const std::vector<TensorEntry>& tensors() const { return tensors_; }   // in file order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // MappedFile::dropPages over the entry's bytes, when the entry is one of this file's.
  void releasePages(const TensorEntry& entry) const;

 private:
  std::unique_ptr<MappedFile> file_;
  std::vector<TensorEntry> tensors_;
  std::map<std::string, std::string> metadata_;
  std::string path_;
};

// All tensors of a model folder: model.safetensors, or the shards named by model.safetensors.index.json.
class Checkpoint {
 public:
  // Throws InputError naming the folder/file when no checkpoint is there or it is inconsistent (a tensor
  // listed in the index but missing from its shard, a tensor present in two shards, ...).
  static Checkpoint open(const std::string& modelDir);

  const TensorEntry* find(const std::string& name) const;           // nullptr when absent
  const TensorEntry& at(const std::string& name) const;             // throws InputError naming the tensor
  const std::vector<const TensorEntry*>& tensors() const { return ordered_; }   // sorted by name
  const std::vector<std::string>& files() const { return fileNames_; }
  const std::string& directory() const { return dir_; }
  // Takes the pages of a tensor already copied out off the process's resident memory (MappedFile::dropPages),
  // so that reading a checkpoint layer by layer keeps one layer resident, not the whole mapping.
  void releasePages(const TensorEntry& entry) const;

 private:
  std::string dir_;
  std::vector<std::string> fileNames_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorEntry*> byName_;
  std::vector<const TensorEntry*> ordered_;
};

}  // namespace pareto
