// Locating ../shared (reference models, golden outputs) for tests: $PARETO_SHARED, else ../shared beside the
// source tree. Tests that need it skip with a clear message where it is absent.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "util/FileSystem.h"

namespace pareto::test {

inline std::string sharedDir() {
  if (const char* env = std::getenv("PARETO_SHARED"); env != nullptr && *env != '\0') return env;
  return std::string(PARETO_SOURCE_DIR) + "/../shared";
}

inline bool sharedAvailable() { return std::filesystem::exists(sharedDir() + "/golden"); }

inline std::string sharedPath(const std::string& rel) { return sharedDir() + "/" + rel; }

// A fresh empty directory under the build tree, removed first if it exists. The process id keeps tests that
// ctest runs in parallel (one process per test) out of each other's way.
inline std::string scratchDir(const std::string& name) {
  std::filesystem::path p = std::filesystem::path(PARETO_BINARY_DIR) / "test-scratch" /
                            (name + "-" + std::to_string(::getpid()));
  pareto::removeTree(p.string());   // not std::filesystem::remove_all: see util/FileSystem.h
  std::filesystem::create_directories(p);
  return p.string();
}

}  // namespace pareto::test

#define PARETO_REQUIRE_SHARED()                                                                   \
  do {                                                                                             \
    if (!::pareto::test::sharedAvailable())                                                        \
      GTEST_SKIP() << "shared data not found at " << ::pareto::test::sharedDir()                   \
                   << " (set PARETO_SHARED to the folder with models/ and golden/)";              \
  } while (0)
