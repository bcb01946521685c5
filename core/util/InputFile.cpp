#include "util/InputFile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/Error.h"

namespace pareto {

namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string formatBytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  // Caps are powers of two and read better without decimals.
  if (value == static_cast<double>(static_cast<uint64_t>(value)))
    std::snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(value), units[unit]);
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", value, units[unit]);
  return buf;
}

std::string describeFileType(unsigned mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a file";
}

std::string readInputFile(const std::string& path, uint64_t maxBytes, const std::string& kind) {
  // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, uninterruptibly by our Ctrl-C
  // handler. It changes nothing for the regular files we go on to read.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0)
    throw InputError(fileMessage(path, std::string("cannot open for reading: ") + std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw InputError(fileMessage(path, std::string("cannot stat: ") + std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw InputError(fileMessage(path, "is a folder, expected " + kind));
  if (!S_ISREG(st.st_mode))
    throw InputError(fileMessage(path, "not a regular file (" + describeFileType(st.st_mode) + "), expected " + kind));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > maxBytes)
    throw InputError(fileMessage(path, "is " + formatBytes(size) + ", more than the " + formatBytes(maxBytes) + " " +
                                           kind + " may be"));
  std::string bytes(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(fileMessage(path, std::string("read error: ") + std::strerror(errno)));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  // One byte more than fstat promised, or fewer: another process is writing or truncating the file.
  char extra;
  ssize_t more;
  do more = ::read(fd.get(), &extra, 1);
  while (more < 0 && errno == EINTR);
  if (done != bytes.size() || more > 0)
    throw InputError(fileMessage(path, "changed size while it was read (truncated or still being written?)"));
  return bytes;
}

}  // namespace pareto
