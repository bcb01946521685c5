// util: removing folder trees without std::filesystem::remove_all (see util/FileSystem.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "SharedData.h"
#include "util/FileSystem.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;

TEST(RemoveTree, RemovesNestedFoldersAndNeverFollowsLinks) {
  const std::string dir = test::scratchDir("remove-tree");
  fs::create_directories(dir + "/tree/a/b");
  std::ofstream(dir + "/tree/a/b/file.txt") << "x";
  std::ofstream(dir + "/tree/top.txt") << "y";
  fs::create_directories(dir + "/keep");
  std::ofstream(dir + "/keep/precious.txt") << "z";
  fs::create_directory_symlink(dir + "/keep", dir + "/tree/link-to-keep");
  removeTree(dir + "/tree");
  EXPECT_FALSE(fs::exists(dir + "/tree"));
  EXPECT_TRUE(fs::exists(dir + "/keep/precious.txt"));   // the link went, not what it pointed to
  EXPECT_NO_THROW(removeTree(dir + "/does-not-exist"));
  removeTree(dir + "/keep/precious.txt");                 // a plain file
  EXPECT_FALSE(fs::exists(dir + "/keep/precious.txt"));
}

}  // namespace
}  // namespace pareto
