#include "calib/ActivationStore.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/Error.h"
#include "util/InputFile.h"

namespace pareto {

const char* activationPlacementName(ActivationPlacement placement) {
  switch (placement) {
    case ActivationPlacement::Device: return "device";
    case ActivationPlacement::Host: return "host";
    case ActivationPlacement::Scratch: return "scratch file";
  }
  return "?";
}

// The file is unlinked as soon as it is mapped: nothing is left on disk whatever way the process ends.
struct ActivationStore::Scratch {
  std::byte* data = nullptr;
  uint64_t size = 0;
  ~Scratch() {
    if (data != nullptr) ::munmap(data, size);
  }
  // The pages of one slot leave the resident set; the data stays in the file (a shared mapping is written back).
  void drop(uint64_t offset, uint64_t n) const {
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t begin = offset / page * page;
    const uint64_t end = std::min(size, (offset + n + page - 1) / page * page);
    if (end > begin) ::madvise(data + begin, end - begin, MADV_DONTNEED);
  }
};

uint64_t ActivationStore::bytesOf(const std::vector<std::vector<int64_t>>& shapes, c10::ScalarType dtype) {
  uint64_t total = 0;
  for (const auto& shape : shapes) {
    uint64_t n = c10::elementSize(dtype);
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    total += n;
  }
  return total;
}

ActivationStore::ActivationStore(ActivationPlacement placement, const std::vector<std::vector<int64_t>>& shapes,
                                 c10::ScalarType dtype, c10::Device device, const std::string& scratchDir)
    : placement_(placement), shapes_(shapes), dtype_(dtype), device_(device) {
  for (const auto& shape : shapes_) {
    offsets_.push_back(total_);
    total_ += bytesOf({shape}, dtype_);
  }
  if (placement_ != ActivationPlacement::Scratch) {
    resident_.resize(shapes_.size());
    return;
  }
  namespace fs = std::filesystem;
  const fs::path dir = scratchDir.empty() ? fs::temp_directory_path() : fs::path(scratchDir);
  std::string templ = (dir / "pareto-activations-XXXXXX").string();
  const int fd = ::mkstemp(templ.data());
  if (fd < 0)
    throw InputError(fileMessage(dir.string(), std::string("cannot create the activations' scratch file: ") +
                                                   std::strerror(errno)));
  ::unlink(templ.c_str());
  scratch_ = std::make_unique<Scratch>();
  scratch_->size = std::max<uint64_t>(total_, 1);
  // posix_fallocate reserves the blocks now: a disk too small fails here, naming the folder, not as SIGBUS later.
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(scratch_->size));
  if (err != 0) {
    ::close(fd);
    throw InputError(fileMessage(dir.string(), "cannot reserve " + formatBytes(scratch_->size) +
                                                   " for the activations' scratch file: " + std::strerror(err)));
  }
  void* p = ::mmap(nullptr, scratch_->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    throw InputError(fileMessage(dir.string(), std::string("cannot map the activations' scratch file: ") +
                                                   std::strerror(errno)));
  scratch_->data = static_cast<std::byte*>(p);
}

ActivationStore::~ActivationStore() = default;

void ActivationStore::put(size_t slot, const at::Tensor& value) {
  TORCH_CHECK(slot < shapes_.size() && value.sizes() == at::IntArrayRef(shapes_[slot]),
              "activation slot ", slot, " expects ", at::IntArrayRef(shapes_.at(slot)), ", got ", value.sizes());
  switch (placement_) {
    case ActivationPlacement::Device:
      resident_[slot] = value.to(device_, dtype_);
      return;
    case ActivationPlacement::Host:
      resident_[slot] = value.to(at::kCPU, dtype_).contiguous();
      return;
    case ActivationPlacement::Scratch: {
      at::Tensor view = at::from_blob(scratch_->data + offsets_[slot], shapes_[slot], at::TensorOptions().dtype(dtype_));
      view.copy_(value);
      scratch_->drop(offsets_[slot], bytesOf({shapes_[slot]}, dtype_));
      return;
    }
  }
}

at::Tensor ActivationStore::get(size_t slot) const {
  TORCH_CHECK(slot < shapes_.size(), "no activation slot ", slot);
  if (placement_ != ActivationPlacement::Scratch) {
    TORCH_CHECK(resident_[slot].defined(), "activation slot ", slot, " was never written");
    return resident_[slot].to(device_);
  }
  const at::Tensor view =
      at::from_blob(scratch_->data + offsets_[slot], shapes_[slot], at::TensorOptions().dtype(dtype_));
  at::Tensor out = at::empty(shapes_[slot], at::TensorOptions().dtype(dtype_).device(device_));
  out.copy_(view);
  scratch_->drop(offsets_[slot], bytesOf({shapes_[slot]}, dtype_));
  return out;
}

}  // namespace pareto
