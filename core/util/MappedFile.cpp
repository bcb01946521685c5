#include "util/MappedFile.h"

#include <cstdint>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>

#include "util/Error.h"
#include "util/InputFile.h"

namespace pareto {

namespace {

// The jump target of the guarded copy running on this thread, or null when none is. Volatile: the compiler knows
// memcpy does not read it and would otherwise drop the store before the copy.
thread_local sigjmp_buf* volatile tGuardedCopy = nullptr;
struct sigaction gPreviousBusAction {};

void onSigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* target = tGuardedCopy) {
    tGuardedCopy = nullptr;
    siglongjmp(*target, 1);
  }
  // Not ours: whoever handled SIGBUS before us, else the default action (the process dies with SIGBUS as it
  // would without this handler; the signal is blocked here, so the raise lands when we return).
  if ((gPreviousBusAction.sa_flags & SA_SIGINFO) != 0 && gPreviousBusAction.sa_sigaction != nullptr) {
    gPreviousBusAction.sa_sigaction(sig, info, context);
    return;
  }
  if (gPreviousBusAction.sa_handler != SIG_DFL && gPreviousBusAction.sa_handler != SIG_IGN &&
      gPreviousBusAction.sa_handler != nullptr) {
    gPreviousBusAction.sa_handler(sig);
    return;
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

void installSigbusHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = onSigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &gPreviousBusAction);
  });
}

}  // namespace

void copyFromMapping(void* to, const void* from, size_t n, const std::string& path) {
  if (n == 0) return;
  installSigbusHandler();
  sigjmp_buf target;
  // savemask = 1: the jump out of the handler must unblock SIGBUS again for the next fault.
  if (sigsetjmp(target, 1) != 0)
    throw InputError(fileMessage(path, "changed size while it was read (truncated?): the file is shorter than "
                                       "its header says; another process may be rewriting the model"));
  tGuardedCopy = &target;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(to, from, n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  tGuardedCopy = nullptr;
}

void MappedFile::copy(void* to, const std::byte* from, size_t n) const { copyFromMapping(to, from, n, path_); }

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: a FIFO would otherwise block open() until a writer comes, and ignore Ctrl-C meanwhile.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw InputError(fileMessage(path, std::string("cannot open: ") + std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw InputError(fileMessage(path, std::string("cannot stat: ") + std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(fileMessage(path, S_ISDIR(st.st_mode)
                                           ? std::string("is a folder, expected a file")
                                           : "not a regular file (" + describeFileType(st.st_mode) + ")"));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw InputError(fileMessage(path, std::string("cannot map: ") + std::strerror(err)));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void MappedFile::dropPages(const std::byte* from, size_t n) const {
  if (data_ == nullptr || from < data_ || n > size_ || from > data_ + (size_ - n)) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(from) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(from) + n) / page * page;
  // A read-only private mapping of a file: dropping pages loses nothing (they were never written).
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void MappedFile::release() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace pareto
