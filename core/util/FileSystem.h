// File-system helpers that must not go through std::filesystem::remove_all: the PyTorch wheels' libtorch.so
// exports its own copies of std::filesystem functions, the dynamic linker binds ours to them, and their
// remove_all crashed (SIGSEGV) on any non-empty folder on the GPU machine.
#pragma once

#include <string>

namespace pareto {

// Removes a file or a folder tree (symbolic links are removed, never followed); a missing path is not an
// error. Throws Error naming the path when something cannot be removed.
void removeTree(const std::string& path);

}  // namespace pareto
