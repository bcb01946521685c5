// File-system helpers that must not go through std::filesystem::remove_all: the PyTorch wheels' libtorch.so
// exports its own copies of std::filesystem functions, the dynamic linker binds ours to them, and their
// remove_all crashed (SIGSEGV) on any non-empty folder on the GPU machine.
#pragma once

#include <string>

namespace pareto {

// Removes a file or a folder tree (symbolic links are removed, never followed); a missing path is not an
// error. Throws Error naming the path when something cannot be removed.
void removeTree(const std::string& path);

// Makes the finished folder `staged` become `target`: renamed into place when `target` does not exist; else the
// old `target` is moved to `aside` first, put back if the rename fails (a failed run must not lose the previous
// result), and removed once the new one is in place. All three must be on one file system.
void replaceFolder(const std::string& staged, const std::string& target, const std::string& aside);

// Writes `bytes` to `path` through a temporary file beside it (checked, flushed to disk, renamed): a full disk or
// a crash leaves the previous file or none, never a short one. Throws Error naming the file and the reason.
void writeFileAtomically(const std::string& path, const std::string& bytes);

// `path` made absolute (and normalized where it exists) for what is recorded or shown later: a relative path
// means nothing once the run is looked at from elsewhere. "" stays "".
std::string absolutePath(const std::string& path);

}  // namespace pareto
