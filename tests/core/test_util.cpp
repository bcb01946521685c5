// util: removing folder trees without std::filesystem::remove_all (see util/FileSystem.h); reading inputs
// bounded (util/InputFile.h); copying out of a mapping that shrinks (util/MappedFile.h).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "InputErrors.h"
#include "SharedData.h"
#include "util/FileSystem.h"
#include "util/InputFile.h"
#include "util/Json.h"

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

using ::testing::AllOf;
using ::testing::HasSubstr;
using test::inputErrorOf;

// Runs `f` on another thread and returns its InputError message; if it has not returned after 20 s (a FIFO open
// that blocks), `unblock` is called so the test ends instead of hanging, and the result says so.
template <class F, class U>
std::string errorWithin20s(F f, U unblock) {
  auto result = std::async(std::launch::async, [f] { return inputErrorOf(f); });
  if (result.wait_for(std::chrono::seconds(20)) == std::future_status::timeout) {
    unblock();
    result.wait();
    return "(blocked)";
  }
  return result.get();
}

TEST(InputFile, ReadsARegularFileWhole) {
  const std::string dir = test::scratchDir("input-file");
  std::ofstream(dir + "/a.txt", std::ios::binary) << std::string("hello\0world", 11);
  EXPECT_EQ(readInputFile(dir + "/a.txt", 11, "a text file"), std::string("hello\0world", 11));
  std::ofstream(dir + "/empty.txt").flush();
  EXPECT_EQ(readInputFile(dir + "/empty.txt", 0, "a text file"), "");
  EXPECT_THAT(inputErrorOf([&] { readInputFile(dir + "/missing.txt", 10, "a text file"); }),
              AllOf(HasSubstr(dir + "/missing.txt"), HasSubstr("No such file")));
}

TEST(InputFile, DevicesFifosFoldersAndOversizedFilesAreRefusedNamingTheFile) {
  const std::string dir = test::scratchDir("input-file-hostile");
  // /dev/zero used to be read until allocation failed ("std::bad_alloc", naming nothing).
  EXPECT_EQ(inputErrorOf([] { readTextFile("/dev/zero"); }),
            "/dev/zero: not a regular file (a character device), expected a text file");
  EXPECT_EQ(inputErrorOf([&] { readJsonFile(dir); }), dir + ": is a folder, expected a JSON file");
  // A FIFO with no writer: a blocking open() would wait forever.
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string message = errorWithin20s([&] { readTextFile(fifo); },
                                             [&] { ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK)); });
  EXPECT_EQ(message, fifo + ": not a regular file (a FIFO), expected a text file");
  // Over the cap: refused from the size alone (a sparse 5 GiB file costs no disk and is never read).
  const std::string big = dir + "/big.txt";
  std::ofstream(big).flush();
  std::filesystem::resize_file(big, (5ull << 30) + (1ull << 29));
  EXPECT_EQ(inputErrorOf([&] { readTextFile(big); }), big + ": is 5.50 GiB, more than the 2 GiB a text file may be");
  std::filesystem::resize_file(big, 17ull << 20);
  EXPECT_EQ(inputErrorOf([&] { readJsonFile(big, kMaxJsonConfigBytes, "a config.json"); }),
            big + ": is 17 MiB, more than the 16 MiB a config.json may be");
}

TEST(InputFile, SizesReadAsPeopleWriteThem) {
  EXPECT_EQ(formatBytes(0), "0 bytes");
  EXPECT_EQ(formatBytes(1), "1 byte");
  EXPECT_EQ(formatBytes(1023), "1023 bytes");
  EXPECT_EQ(formatBytes(1536), "1.50 KiB");
  EXPECT_EQ(formatBytes(2ull << 30), "2 GiB");
}

}  // namespace
}  // namespace pareto
