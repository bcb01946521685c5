#include "util/FileSystem.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "util/Error.h"

#include <filesystem>

namespace pareto {
namespace {

int removeEntry(const char* path, const struct stat*, int, struct FTW*) { return std::remove(path) == 0 ? 0 : errno; }

}  // namespace

void removeTree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw Error(fileMessage(path, std::string("cannot remove: ") + std::strerror(errno)));
  }
  // Depth-first so that folders are empty when their turn comes; FTW_PHYS never follows links out of the tree.
  const int rc = ::nftw(path.c_str(), removeEntry, 16, FTW_DEPTH | FTW_PHYS);
  if (rc != 0) throw Error(fileMessage(path, std::string("cannot remove: ") + std::strerror(rc > 0 ? rc : errno)));
}

void replaceFolder(const std::string& staged, const std::string& target, const std::string& aside) {
  namespace fs = std::filesystem;
  const fs::path out(target);
  if (!fs::exists(out)) {
    fs::rename(staged, out);
    return;
  }
  const fs::path old(aside);
  removeTree(old.string());
  fs::rename(out, old);
  try {
    fs::rename(staged, out);
  } catch (...) {
    fs::rename(old, out);
    throw;
  }
  removeTree(old.string());
}

void writeFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string partial = path + ".partial-" + std::to_string(::getpid());
  auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    ::unlink(partial.c_str());
    throw Error(fileMessage(path, what + ": " + reason));
  };
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fileMessage(path, std::string("cannot be written: ") + std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      errno = err;
      fail("write failed");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    fail("write failed");
  }
  if (::close(fd) != 0) fail("write failed");
  if (::rename(partial.c_str(), path.c_str()) != 0) fail("cannot be renamed into place");
}

std::string absolutePath(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec);
  return ec ? std::filesystem::absolute(path).string() : p.string();
}

}  // namespace pareto
