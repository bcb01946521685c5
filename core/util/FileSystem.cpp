#include "util/FileSystem.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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

void replaceFolder(const std::string& staged, const std::string& target) {
  namespace fs = std::filesystem;
  const fs::path out(target);
  if (!fs::exists(out)) {
    fs::rename(staged, out);
    return;
  }
  const fs::path old = out.parent_path() / ("." + out.filename().string() + ".old");
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

}  // namespace pareto
