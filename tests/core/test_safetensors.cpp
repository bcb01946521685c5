// safetensors reader: good files round-trip, and every kind of corruption is refused with its own message
// naming the file (and the tensor). Files are built here byte by byte, so each test states exactly what is
// wrong with its input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "InputErrors.h"
#include "SharedData.h"
#include "checkpoint/Safetensors.h"
#include "util/Error.h"
#include "util/MappedFile.h"

using nlohmann::json;
using ::testing::HasSubstr;

namespace pareto {
namespace {

std::string littleEndian64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A safetensors file from a header text (possibly invalid on purpose) and the data section.
void writeSafetensors(const std::string& path, const std::string& header, const std::string& data) {
  writeBytes(path, littleEndian64(header.size()) + header + data);
}

struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A valid file: tensors laid out back to back in the order given.
void writeTensors(const std::string& path, const std::vector<TensorSpec>& tensors,
                  const json& metadata = json()) {
  json header = json::object();
  std::string data;
  for (const auto& t : tensors) {
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  writeSafetensors(path, header.dump(), data);
}

template <typename T>
std::string bytesOf(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

TensorSpec f32TensorOf(const std::string& name, const std::vector<float>& values) {
  return {name, "F32", {int64_t(values.size())}, bytesOf(values)};
}

// The message of the InputError that opening `path` throws; fails the test if it does not throw one.
std::string openError(const std::string& path) {
  try {
    SafetensorsFile file(path);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InputError opening " << path;
  return {};
}

std::string checkpointError(const std::string& dir) {
  try {
    Checkpoint::open(dir);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected InputError opening checkpoint " << dir;
  return {};
}

class SafetensorsCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratchDir(std::string("safetensors-") +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    path_ = dir_ + "/model.safetensors";
  }
  // Writes a one-tensor file whose entry for "w" is `entry`, with `dataSize` data bytes, and returns the error.
  std::string errorForEntry(const json& entry, size_t dataSize = 16) {
    writeSafetensors(path_, json{{"w", entry}}.dump(), std::string(dataSize, '\0'));
    std::string message = openError(path_);
    EXPECT_THAT(message, HasSubstr(path_));
    EXPECT_THAT(message, HasSubstr("tensor 'w'"));
    return message;
  }
  std::string errorForHeader(const std::string& header, const std::string& data = {}) {
    writeSafetensors(path_, header, data);
    std::string message = openError(path_);
    EXPECT_THAT(message, HasSubstr(path_));
    return message;
  }
  std::string dir_, path_;
};

const json kGoodEntry = {{"dtype", "F32"}, {"shape", {2, 2}}, {"data_offsets", {0, 16}}};

json with(json entry, const std::string& key, const json& value) {
  entry[key] = value;
  return entry;
}

json without(json entry, const std::string& key) {
  entry.erase(key);
  return entry;
}

TEST_F(SafetensorsCorruption, FileShorterThanEightBytes) {
  writeBytes(path_, "abc");
  std::string message = openError(path_);
  EXPECT_THAT(message, HasSubstr(path_));
  EXPECT_THAT(message, HasSubstr("too short to be a safetensors file (3 bytes"));
}

TEST_F(SafetensorsCorruption, HeaderLengthZero) {
  writeBytes(path_, littleEndian64(0) + "{}");
  EXPECT_THAT(openError(path_), HasSubstr("header length is 0"));
}

TEST_F(SafetensorsCorruption, HeaderLongerThanFile) {
  writeBytes(path_, littleEndian64(1000) + "{\"w\": {}}");
  std::string message = openError(path_);
  EXPECT_THAT(message, HasSubstr(path_));
  EXPECT_THAT(message, HasSubstr("header length 1000 is larger than the file"));
}

TEST_F(SafetensorsCorruption, HeaderOverTheCap) {
  writeBytes(path_, littleEndian64(200ull * 1024 * 1024) + "{}");
  EXPECT_THAT(openError(path_), HasSubstr("exceeds the 100 MB limit"));
}

TEST_F(SafetensorsCorruption, HeaderLengthWithGarbageBytes) {
  // Random bytes read as a length are astronomically large; the cap catches it before anything is read.
  writeBytes(path_, std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8) + "{}");
  EXPECT_THAT(openError(path_), HasSubstr("exceeds the 100 MB limit"));
}

TEST_F(SafetensorsCorruption, HeaderNotJson) {
  EXPECT_THAT(errorForHeader("{\"w\": [1, 2"), HasSubstr("header is not valid JSON"));
}

TEST_F(SafetensorsCorruption, HeaderNotAnObject) {
  EXPECT_THAT(errorForHeader("[1, 2, 3]"), HasSubstr("header is an array, expected a JSON object"));
}

TEST_F(SafetensorsCorruption, DuplicateTensorName) {
  std::string entry = kGoodEntry.dump();
  EXPECT_THAT(errorForHeader("{\"w\": " + entry + ", \"w\": " + entry + "}", std::string(16, '\0')),
              HasSubstr("tensor 'w': defined twice in the header"));
}

TEST_F(SafetensorsCorruption, EntryNotAnObject) {
  EXPECT_THAT(errorForEntry(json::array({1, 2})), HasSubstr("entry must be an object, found an array"));
}

TEST_F(SafetensorsCorruption, MissingDtype) {
  EXPECT_THAT(errorForEntry(without(kGoodEntry, "dtype")), HasSubstr("missing \"dtype\""));
}

TEST_F(SafetensorsCorruption, MissingShape) {
  EXPECT_THAT(errorForEntry(without(kGoodEntry, "shape")), HasSubstr("missing \"shape\""));
}

TEST_F(SafetensorsCorruption, MissingDataOffsets) {
  EXPECT_THAT(errorForEntry(without(kGoodEntry, "data_offsets")), HasSubstr("missing \"data_offsets\""));
}

TEST_F(SafetensorsCorruption, DtypeNotAString) {
  EXPECT_THAT(errorForEntry(with(kGoodEntry, "dtype", 4)), HasSubstr("\"dtype\" must be a string"));
}

TEST_F(SafetensorsCorruption, ShapeNotAnArray) {
  EXPECT_THAT(errorForEntry(with(kGoodEntry, "shape", "2x2")),
              HasSubstr("\"shape\" must be an array of integers, found a string"));
}

TEST_F(SafetensorsCorruption, ShapeWithNonIntegers) {
  EXPECT_THAT(errorForEntry(with(kGoodEntry, "shape", {2, 2.5})),
              HasSubstr("\"shape\" must be an array of integers, found [2,2.5]"));
}

TEST_F(SafetensorsCorruption, DataOffsetsIllTyped) {
  EXPECT_THAT(errorForEntry(with(kGoodEntry, "data_offsets", {0})),
              HasSubstr("\"data_offsets\" must be two non-negative integers"));
  EXPECT_THAT(errorForEntry(with(kGoodEntry, "data_offsets", {-4, 12})),
              HasSubstr("\"data_offsets\" must be two non-negative integers"));
  EXPECT_THAT(errorForEntry(with(kGoodEntry, "data_offsets", "0-16")),
              HasSubstr("\"data_offsets\" must be two non-negative integers"));
}

TEST_F(SafetensorsCorruption, SupportedElsewhereButNotHere) {
  std::string message = errorForEntry(with(kGoodEntry, "dtype", "I64"), 32);
  EXPECT_THAT(message, HasSubstr("dtype I64 is unsupported"));
  EXPECT_THAT(message, HasSubstr("F32, F16, BF16"));
  EXPECT_THAT(errorForEntry(with(kGoodEntry, "dtype", "F8_E4M3"), 4),
              HasSubstr("dtype F8_E4M3 is unsupported"));
}

TEST_F(SafetensorsCorruption, UnknownDtype) {
  EXPECT_THAT(errorForEntry(with(kGoodEntry, "dtype", "float32")),
              HasSubstr("unknown dtype 'float32' (not a safetensors dtype"));
}

TEST_F(SafetensorsCorruption, NegativeDimension) {
  EXPECT_THAT(errorForEntry(with(kGoodEntry, "shape", {-2, -2})),
              HasSubstr("shape [-2,-2] has a negative dimension"));
}

TEST_F(SafetensorsCorruption, ShapeSizeOverflow) {
  // 2^62 * 2^3 elements * 4 bytes wraps to 0 in 64 bits: without the overflow check it would "match" [0, 0].
  json entry = {{"dtype", "F32"}, {"shape", {int64_t(1) << 62, 8}}, {"data_offsets", {0, 0}}};
  EXPECT_THAT(errorForEntry(entry), HasSubstr("overflows a 64-bit byte count"));
}

TEST_F(SafetensorsCorruption, ShapeDoesNotMatchByteRange) {
  EXPECT_THAT(errorForEntry(with(kGoodEntry, "data_offsets", {0, 12})),
              HasSubstr("shape [2, 2] in F32 needs 16 bytes but data_offsets [0, 12] span 12"));
}

TEST_F(SafetensorsCorruption, BeginAfterEnd) {
  EXPECT_THAT(errorForEntry(with(kGoodEntry, "data_offsets", {16, 0})),
              HasSubstr("data_offsets [16, 0] begin after they end"));
}

TEST_F(SafetensorsCorruption, RangePastEndOfData) {
  std::string message = errorForEntry(kGoodEntry, 10);
  EXPECT_THAT(message, HasSubstr("data_offsets [0, 16] run past the end of the data section (10 bytes)"));
  EXPECT_THAT(message, HasSubstr("model is corrupted or incomplete"));
}

TEST_F(SafetensorsCorruption, OverlappingTensors) {
  json header = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
                 {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {8, 16}}}}};
  std::string message = errorForHeader(header.dump(), std::string(16, '\0'));
  EXPECT_THAT(message, HasSubstr("tensor 'b': bytes overlap those of tensor 'a'"));
}

TEST_F(SafetensorsCorruption, MetadataNotAnObject) {
  json header = {{"__metadata__", {"format", "pt"}}};
  EXPECT_THAT(errorForHeader(header.dump()),
              HasSubstr("__metadata__ must be an object of strings, found an array"));
}

TEST_F(SafetensorsCorruption, MetadataValueNotAString) {
  json header = {{"__metadata__", {{"format", "pt"}, {"step", 3}}}};
  EXPECT_THAT(errorForHeader(header.dump()),
              HasSubstr("__metadata__ entry 'step' must be a string, found a number"));
}

TEST(Safetensors, DTypeNamesAndSizes) {
  EXPECT_STREQ(dtypeName(DType::F32), "F32");
  EXPECT_STREQ(dtypeName(DType::F16), "F16");
  EXPECT_STREQ(dtypeName(DType::BF16), "BF16");
  EXPECT_EQ(dtypeSize(DType::F32), 4u);
  EXPECT_EQ(dtypeSize(DType::F16), 2u);
  EXPECT_EQ(dtypeSize(DType::BF16), 2u);
}

TEST(Safetensors, RoundTripsValuesShapesAndDtypes) {
  std::string path = test::scratchDir("safetensors-roundtrip") + "/model.safetensors";
  std::vector<float> f32 = {0.f, 1.5f, -2.f, 3.25f, 4.f, -5.5f};
  std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0000, 0x7BFF};   // 1, -2, 0, 65504
  std::vector<uint16_t> bf16 = {0x3F80, 0xBF80, 0x4049, 0x0000};  // 1, -1, ~3.14, 0
  // Written "z" first so that file (offset) order differs from name order.
  writeTensors(path,
               {{"z.f32", "F32", {2, 3}, bytesOf(f32)},
                {"a.f16", "F16", {4}, bytesOf(f16)},
                {"m.bf16", "BF16", {2, 2}, bytesOf(bf16)},
                {"empty", "F32", {0, 3}, ""},
                {"scalar", "F32", {}, bytesOf(std::vector<float>{7.f})}},
               {{"format", "pt"}});

  SafetensorsFile file(path);
  EXPECT_EQ(file.path(), path);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  const auto& t = file.tensors();
  ASSERT_EQ(t.size(), 5u);
  // "empty" has no bytes and sits at the same offset as "scalar"; ties put the empty one first.
  std::vector<std::string> order;
  for (const auto& e : t) order.push_back(e.name);
  EXPECT_EQ(order, (std::vector<std::string>{"z.f32", "a.f16", "m.bf16", "empty", "scalar"}));

  EXPECT_EQ(t[0].dtype, DType::F32);
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t[0].numel(), 6);
  EXPECT_EQ(t[0].nbytes, 24u);
  EXPECT_EQ(t[0].file, path);
  std::vector<float> readF32(6);
  std::memcpy(readF32.data(), t[0].data, t[0].nbytes);
  EXPECT_EQ(readF32, f32);

  EXPECT_EQ(t[1].dtype, DType::F16);
  EXPECT_EQ(t[1].shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(std::memcmp(t[1].data, f16.data(), 8), 0);

  EXPECT_EQ(t[2].dtype, DType::BF16);
  EXPECT_EQ(t[2].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t[2].nbytes, 8u);
  EXPECT_EQ(std::memcmp(t[2].data, bf16.data(), 8), 0);

  EXPECT_EQ(t[3].numel(), 0);
  EXPECT_EQ(t[3].nbytes, 0u);
  EXPECT_EQ(t[4].numel(), 1);
  EXPECT_TRUE(t[4].shape.empty());

  // Moving keeps the mapping (and so every data pointer) alive.
  const std::byte* data = t[0].data;
  SafetensorsFile moved(std::move(file));
  EXPECT_EQ(moved.tensors()[0].data, data);
  EXPECT_EQ(moved.path(), path);
}

TEST(Safetensors, HeaderPaddedWithSpacesIsAccepted) {
  // Writers pad the header with spaces so that the data section is 8-byte aligned.
  std::string path = test::scratchDir("safetensors-padded") + "/model.safetensors";
  json header = {{"w", {{"dtype", "BF16"}, {"shape", {2}}, {"data_offsets", {0, 4}}}}};
  std::string text = header.dump();
  text.append((8 - (text.size() % 8)) % 8 + 8, ' ');
  writeSafetensors(path, text, std::string("\x80\x3f\x80\xbf", 4));
  SafetensorsFile file(path);
  ASSERT_EQ(file.tensors().size(), 1u);
  EXPECT_EQ(file.tensors()[0].nbytes, 4u);
}

TEST(Safetensors, MissingFileIsAnInputError) {
  std::string path = test::scratchDir("safetensors-missing") + "/nothing.safetensors";
  EXPECT_THAT(openError(path), HasSubstr(path));
}

TEST(Safetensors, DevicesFifosAndFoldersAreRefusedWithoutBlocking) {
  EXPECT_EQ(openError("/dev/zero"), "/dev/zero: not a regular file (a character device)");
  const std::string dir = test::scratchDir("safetensors-fifo");
  EXPECT_EQ(openError(dir), dir + ": is a folder, expected a file");
  const std::string fifo = dir + "/model.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // open() of a FIFO without O_NONBLOCK waits for a writer; if it does, a writer releases it after 20 s.
  auto result = std::async(std::launch::async, [&] { return openError(fifo); });
  if (result.wait_for(std::chrono::seconds(20)) == std::future_status::timeout) {
    ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
    ADD_FAILURE() << "opening a FIFO blocked";
  }
  EXPECT_EQ(result.get(), fifo + ": not a regular file (a FIFO)");
}

// A model rewritten by another process while it is loaded: the pages past the new end of the file are gone and
// touching them raises SIGBUS, which used to kill the process.
TEST(Safetensors, FileTruncatedAfterItsHeaderWasCheckedIsAnInputErrorNotSigbus) {
  const std::string dir = test::scratchDir("safetensors-truncated");
  const std::string path = dir + "/model.safetensors";
  std::vector<float> values(1 << 16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i);
  writeTensors(path, {f32TensorOf("w", values)});
  SafetensorsFile file(path);
  const TensorEntry& w = file.tensors().at(0);
  std::vector<float> copy(values.size());
  readTensorBytes(w, copy.data());
  EXPECT_EQ(copy, values);

  ASSERT_EQ(::truncate(path.c_str(), 64), 0);
  for (int attempt = 0; attempt < 2; ++attempt)   // the guard works again after it caught one fault
    EXPECT_EQ(test::inputErrorOf([&] { readTensorBytes(w, copy.data()); }),
              path + ": changed size while it was read (truncated?): the file is shorter than its header says; "
                     "another process may be rewriting the model")
        << attempt;

  // A fault outside a guarded copy still kills the process with SIGBUS, as without the handler.
  EXPECT_EXIT(
      {
        volatile const std::byte* p = w.data + w.nbytes - 1;
        (void)*p;
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

// --- Checkpoint: folders, shards, indexes --------------------------------------------------------------

TensorSpec f32Tensor(const std::string& name, std::vector<float> values) {
  return {name, "F32", {int64_t(values.size())}, bytesOf(values)};
}

void writeIndex(const std::string& dir, const json& weightMap) {
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weightMap}};
  writeBytes(dir + "/model.safetensors.index.json", index.dump(2));
}

TEST(Checkpoint, SingleFile) {
  std::string dir = test::scratchDir("checkpoint-single");
  writeTensors(dir + "/model.safetensors", {f32Tensor("b", {1, 2}), f32Tensor("a", {3})});
  Checkpoint ckpt = Checkpoint::open(dir);
  EXPECT_EQ(ckpt.directory(), dir);
  ASSERT_EQ(ckpt.files().size(), 1u);
  EXPECT_EQ(ckpt.files()[0], dir + "/model.safetensors");
  ASSERT_EQ(ckpt.tensors().size(), 2u);
  EXPECT_EQ(ckpt.tensors()[0]->name, "a");  // sorted by name, not file order
  EXPECT_EQ(ckpt.tensors()[1]->name, "b");
  ASSERT_NE(ckpt.find("b"), nullptr);
  EXPECT_EQ(ckpt.find("b")->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(ckpt.find("nope"), nullptr);
  EXPECT_EQ(&ckpt.at("a"), ckpt.find("a"));
  try {
    ckpt.at("lm_head.weight");
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no tensor 'lm_head.weight'"));
    EXPECT_THAT(e.what(), HasSubstr(dir));
  }
}

TEST(Checkpoint, ShardedWithIndex) {
  std::string dir = test::scratchDir("checkpoint-sharded");
  writeTensors(dir + "/model-00001-of-00002.safetensors",
               {f32Tensor("layer.0", {1}), f32Tensor("embed", {2, 3})});
  writeTensors(dir + "/model-00002-of-00002.safetensors", {f32Tensor("layer.1", {4, 5, 6})});
  writeIndex(dir, {{"embed", "model-00001-of-00002.safetensors"},
                   {"layer.0", "model-00001-of-00002.safetensors"},
                   {"layer.1", "model-00002-of-00002.safetensors"}});
  // A stray model.safetensors beside an index must not be read: the index wins.
  writeBytes(dir + "/model.safetensors", "junk");

  Checkpoint ckpt = Checkpoint::open(dir);
  ASSERT_EQ(ckpt.files().size(), 2u);
  EXPECT_EQ(ckpt.files()[0], dir + "/model-00001-of-00002.safetensors");
  EXPECT_EQ(ckpt.files()[1], dir + "/model-00002-of-00002.safetensors");
  ASSERT_EQ(ckpt.tensors().size(), 3u);
  EXPECT_EQ(ckpt.tensors()[0]->name, "embed");
  EXPECT_EQ(ckpt.at("layer.1").file, dir + "/model-00002-of-00002.safetensors");
  EXPECT_EQ(ckpt.at("layer.1").numel(), 3);
  float last = 0;
  std::memcpy(&last, ckpt.at("layer.1").data + 8, sizeof(float));
  EXPECT_EQ(last, 6.f);
}

TEST(Checkpoint, IndexNamesMissingShard) {
  std::string dir = test::scratchDir("checkpoint-missing-shard");
  writeTensors(dir + "/model-00001-of-00002.safetensors", {f32Tensor("a", {1})});
  writeIndex(dir, {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}});
  std::string message = checkpointError(dir);
  EXPECT_THAT(message, HasSubstr("model.safetensors.index.json"));
  EXPECT_THAT(message, HasSubstr("tensor 'b': its shard 'model-00002-of-00002.safetensors' is missing"));
}

TEST(Checkpoint, IndexNamesTensorNotInItsShard) {
  std::string dir = test::scratchDir("checkpoint-tensor-not-in-shard");
  writeTensors(dir + "/s1.safetensors", {f32Tensor("a", {1})});
  writeTensors(dir + "/s2.safetensors", {f32Tensor("b", {1})});
  writeIndex(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}, {"c", "s2.safetensors"}});
  EXPECT_THAT(checkpointError(dir),
              HasSubstr("tensor 'c': listed in shard 's2.safetensors', but that shard has no such tensor"));
}

TEST(Checkpoint, IndexPointsAtTheWrongShard) {
  std::string dir = test::scratchDir("checkpoint-wrong-shard");
  writeTensors(dir + "/s1.safetensors", {f32Tensor("a", {1}), f32Tensor("b", {1})});
  writeTensors(dir + "/s2.safetensors", {f32Tensor("c", {1})});
  writeIndex(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}, {"c", "s2.safetensors"}});
  EXPECT_THAT(checkpointError(dir),
              HasSubstr("tensor 'b': listed in shard 's2.safetensors', but it is in 's1.safetensors'"));
}

TEST(Checkpoint, TensorInTwoShards) {
  std::string dir = test::scratchDir("checkpoint-duplicate");
  writeTensors(dir + "/s1.safetensors", {f32Tensor("a", {1})});
  writeTensors(dir + "/s2.safetensors", {f32Tensor("a", {2}), f32Tensor("b", {1})});
  writeIndex(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
  EXPECT_THAT(checkpointError(dir),
              HasSubstr("tensor 'a' is present in both 's1.safetensors' and 's2.safetensors'"));
}

TEST(Checkpoint, ShardTensorMissingFromIndex) {
  std::string dir = test::scratchDir("checkpoint-unlisted");
  writeTensors(dir + "/s1.safetensors", {f32Tensor("a", {1}), f32Tensor("extra", {1})});
  writeIndex(dir, {{"a", "s1.safetensors"}});
  std::string message = checkpointError(dir);
  EXPECT_THAT(message, HasSubstr(dir + "/s1.safetensors: tensor 'extra': not listed in"));
  EXPECT_THAT(message, HasSubstr("model.safetensors.index.json"));
}

TEST(Checkpoint, ShardNamesMayNotEscapeTheFolder) {
  std::string dir = test::scratchDir("checkpoint-escape");
  writeTensors(dir + "/s1.safetensors", {f32Tensor("a", {1})});
  writeIndex(dir, {{"a", "../s1.safetensors"}});
  EXPECT_THAT(checkpointError(dir),
              HasSubstr("shard file name '../s1.safetensors' is not a plain name inside the model folder"));
  writeIndex(dir, {{"a", "/etc/passwd"}});
  EXPECT_THAT(checkpointError(dir), HasSubstr("shard file name '/etc/passwd' is not a plain name"));
}

TEST(Checkpoint, MalformedIndex) {
  std::string dir = test::scratchDir("checkpoint-bad-index");
  writeBytes(dir + "/model.safetensors.index.json", "{\"metadata\": {}}");
  EXPECT_THAT(checkpointError(dir), HasSubstr("missing \"weight_map\""));
  writeBytes(dir + "/model.safetensors.index.json", "{\"weight_map\": {\"a\": 3}}");
  EXPECT_THAT(checkpointError(dir), HasSubstr("tensor 'a': shard must be a file name"));
  writeBytes(dir + "/model.safetensors.index.json", "{\"weight_map\": ");
  EXPECT_THAT(checkpointError(dir), HasSubstr("model.safetensors.index.json: invalid JSON"));
}

TEST(Checkpoint, CorruptShardNamesItsFile) {
  std::string dir = test::scratchDir("checkpoint-corrupt");
  writeBytes(dir + "/model.safetensors", "abc");
  EXPECT_THAT(checkpointError(dir), HasSubstr(dir + "/model.safetensors: too short"));
}

TEST(Checkpoint, PickleOnlyFolderIsRefusedWithAConversionHint) {
  std::string dir = test::scratchDir("checkpoint-pickle");
  writeBytes(dir + "/pytorch_model.bin", "PK\x03\x04");
  writeBytes(dir + "/config.json", "{}");
  std::string message = checkpointError(dir);
  EXPECT_THAT(message, HasSubstr(dir));
  EXPECT_THAT(message, HasSubstr("pytorch_model.bin"));
  EXPECT_THAT(message, HasSubstr("does not load pickle files"));
  EXPECT_THAT(message, HasSubstr("safe_serialization=True"));
}

TEST(Checkpoint, EmptyFolder) {
  std::string dir = test::scratchDir("checkpoint-empty");
  EXPECT_THAT(checkpointError(dir), HasSubstr(dir + ": no model.safetensors or model.safetensors.index.json"));
}

TEST(Checkpoint, MissingFolder) {
  std::string dir = test::scratchDir("checkpoint-missing") + "/not-here";
  EXPECT_THAT(checkpointError(dir), HasSubstr(dir + ": model folder does not exist"));
}

TEST(Checkpoint, FileInsteadOfFolder) {
  std::string file = test::scratchDir("checkpoint-file") + "/model.safetensors";
  writeTensors(file, {f32Tensor("a", {1})});
  EXPECT_THAT(checkpointError(file), HasSubstr(file + ": not a folder"));
}

TEST(Checkpoint, ReferenceModel) {
  PARETO_REQUIRE_SHARED();
  Checkpoint ckpt = Checkpoint::open(test::sharedPath("models/ref-small"));
  const TensorEntry& embed = ckpt.at("model.embed_tokens.weight");
  EXPECT_EQ(embed.dtype, DType::BF16);
  EXPECT_EQ(embed.shape, (std::vector<int64_t>{8192, 384}));
  EXPECT_EQ(embed.nbytes, 8192u * 384u * 2u);
  EXPECT_EQ(ckpt.find("lm_head.weight"), nullptr);  // tied to the embedding
  EXPECT_NE(ckpt.find("model.norm.weight"), nullptr);

  std::set<std::string> layers;
  for (const TensorEntry* t : ckpt.tensors()) {
    const std::string prefix = "model.layers.";
    if (t->name.rfind(prefix, 0) == 0)
      layers.insert(t->name.substr(prefix.size(), t->name.find('.', prefix.size()) - prefix.size()));
  }
  EXPECT_EQ(layers.size(), 8u);
  // 8 layers × 9 tensors + embedding + final norm.
  EXPECT_EQ(ckpt.tensors().size(), 74u);
  for (size_t i = 1; i < ckpt.tensors().size(); ++i)
    EXPECT_LT(ckpt.tensors()[i - 1]->name, ckpt.tensors()[i]->name);
}

}  // namespace
}  // namespace pareto
