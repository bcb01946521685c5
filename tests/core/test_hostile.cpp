// Files from strangers that are built to hurt rather than merely broken: JSON nested a million deep, config values
// that would size huge buffers, pickle checkpoints under every usual name, a tokenizer regex that backtracks
// catastrophically, safetensors images handed over in memory. Each must be refused with a message naming the
// file and the problem, quickly, without a crash. (Ordinary corruption is in test_safetensors and
// test_model_config; docs/reliability.md lists which test covers which input.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "InputErrors.h"
#include "SharedData.h"
#include "checkpoint/ModelConfig.h"
#include "checkpoint/Safetensors.h"
#include "tokenizer/Tokenizer.h"
#include "util/Error.h"
#include "util/InputFile.h"
#include "util/Json.h"

namespace pareto {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

void writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

std::string littleEndian64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

// `prefix` + depth '[' + depth ']' + `suffix`: valid JSON nested `depth` levels deep inside whatever prefix opens.
std::string nested(size_t depth, const std::string& prefix = "", const std::string& suffix = "") {
  return prefix + std::string(depth, '[') + std::string(depth, ']') + suffix;
}

using test::inputErrorOf;

json refConfig() {
  return json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 8192,
    "hidden_size": 192, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 6,
    "num_key_value_heads": 2, "max_position_embeddings": 2048, "rms_norm_eps": 1e-06, "bos_token_id": 0,
    "eos_token_id": 1, "hidden_act": "silu", "tie_word_embeddings": true})");
}

std::string configError(const json& j) {
  return inputErrorOf([&] { ModelConfig::fromJson(j, "config.json"); });
}

// --- JSON nesting --------------------------------------------------------------------------------------------

TEST(HostileJson, NestingIsLimitedForEveryJsonFile) {
  const std::string dir = test::scratchDir("hostile-json");
  // A million levels: far past any stack if anything walked it recursively.
  const std::string deep = nested(1'000'000, R"({"vocab_size": )", "}");
  writeText(dir + "/config.json", deep);
  EXPECT_THAT(inputErrorOf([&] { ModelConfig::fromFile(dir + "/config.json"); }),
              AllOf(HasSubstr(dir + "/config.json"), HasSubstr("nested deeper than 64")));

  writeText(dir + "/tokenizer.json", nested(1'000'000, R"({"model": )", "}"));
  EXPECT_THAT(inputErrorOf([&] { Tokenizer::fromPath(dir + "/tokenizer.json"); }),
              AllOf(HasSubstr(dir + "/tokenizer.json"), HasSubstr("nested deeper than 64")));

  writeText(dir + "/model.safetensors.index.json", nested(100'000, R"({"weight_map": )", "}"));
  EXPECT_THAT(inputErrorOf([&] { Checkpoint::open(dir); }),
              AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr("nested deeper than 64")));
}

TEST(HostileJson, DepthLimitIsExactAndObjectsCountToo) {
  // Depth 64 (the limit) parses; 65 does not, for arrays and objects alike.
  EXPECT_NO_THROW(parseJson(nested(64), "ok.json"));
  EXPECT_THAT(inputErrorOf([] { parseJson(nested(65), "deep.json"); }), HasSubstr("deep.json: JSON nested deeper"));
  std::string objects;
  for (int i = 0; i < 65; ++i) objects += "{\"a\":";
  objects += "1" + std::string(65, '}');
  EXPECT_THAT(inputErrorOf([&] { parseJson(objects, "obj.json"); }), HasSubstr("nested deeper than 64"));
  // Brackets inside strings are text, not nesting.
  EXPECT_NO_THROW(parseJson("{\"k\": \"" + std::string(1000, '[') + "\"}", "str.json"));
}

TEST(HostileJson, SyntaxErrorsNameTheFile) {
  EXPECT_THAT(inputErrorOf([] { parseJson("{\"a\": [1, 2", "broken.json"); }),
              AllOf(HasSubstr("broken.json: invalid JSON"), HasSubstr("parse error")));
  EXPECT_THAT(inputErrorOf([] { parseJson(std::string("\"\xff\""), "bytes.json"); }),
              HasSubstr("bytes.json: invalid JSON"));
}

// --- safetensors ---------------------------------------------------------------------------------------------

std::string image(const std::string& header, const std::string& data = {}) {
  return littleEndian64(header.size()) + header + data;
}

SafetensorsContents parseImage(const std::string& bytes) {
  return parseSafetensors(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), "mem.safetensors");
}

TEST(HostileSafetensors, HeaderNestingIsLimited) {
  const std::string deep = nested(200'000, R"({"__metadata__": )", "}");
  EXPECT_THAT(inputErrorOf([&] { parseImage(image(deep)); }),
              AllOf(HasSubstr("mem.safetensors"), HasSubstr("nested deeper than 64")));
}

TEST(HostileSafetensors, InMemoryImagesAreValidatedLikeFiles) {
  const std::string data(16, '\x01');
  SafetensorsContents ok = parseImage(
      image(R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},
                "a": {"dtype": "U8", "shape": [2, 4], "data_offsets": [0, 8]}, "__metadata__": {"k": "v"}})",
            data));
  ASSERT_EQ(ok.tensors.size(), 2u);
  EXPECT_EQ(ok.tensors[0].name, "a");   // data order
  EXPECT_EQ(ok.tensors[1].nbytes, 8u);
  EXPECT_EQ(ok.metadata.at("k"), "v");

  // A length prefix that promises more header than there is, and a cap-sized one.
  EXPECT_THAT(inputErrorOf([] { parseImage(littleEndian64(64) + "{}"); }), HasSubstr("larger than the file"));
  EXPECT_THAT(inputErrorOf([] { parseImage(littleEndian64(100ull * 1024 * 1024 + 1) + "{}"); }),
              HasSubstr("exceeds the 100 MB limit"));
  // Offsets near 2^64 must not wrap around the bounds check.
  EXPECT_THAT(inputErrorOf([&] {
                parseImage(image(R"({"w": {"dtype": "U8", "shape": [16],
                                    "data_offsets": [18446744073709551608, 8]}})",
                                 data));
              }),
              HasSubstr("begin after they end"));
  EXPECT_THAT(inputErrorOf([&] {
                parseImage(image(R"({"w": {"dtype": "U8", "shape": [16],
                                    "data_offsets": [18446744073709551600, 18446744073709551615]}})",
                                 data));
              }),
              HasSubstr("needs 16 bytes"));
  // Shape [2^32, 2^32] in F32 wraps a 64-bit count to 0, which would match an empty range.
  EXPECT_THAT(inputErrorOf([&] {
                parseImage(image(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296],
                                    "data_offsets": [0, 0]}})",
                                 data));
              }),
              HasSubstr("overflows a 64-bit byte count"));
}

// --- pickle checkpoints ---------------------------------------------------------------------------------------

TEST(HostileCheckpoint, EveryPickleNameIsRefusedWithTheConversionOneLiner) {
  for (const char* name : {"pytorch_model.bin", "model.pt", "weights.pth", "last.ckpt",
                           "pytorch_model-00001-of-00002.bin"}) {
    const std::string dir = test::scratchDir("hostile-pickle");
    // A pickle that would run a shell command if anything unpickled it.
    writeText(dir + "/" + name, "cos\nsystem\n(S'touch pwned'\ntR.");
    const std::string message = inputErrorOf([&] { Checkpoint::open(dir); });
    EXPECT_THAT(message, AllOf(HasSubstr(name), HasSubstr("does not load pickle files"),
                               HasSubstr("save_pretrained('" + dir + "', safe_serialization=True)")))
        << name;
    EXPECT_FALSE(std::ifstream(dir + "/pwned").good());
  }
}

// --- config.json values ---------------------------------------------------------------------------------------

TEST(HostileConfig, ValuesThatWouldSizeHugeBuffersAreRefused) {
  struct Case {
    const char* key;
    json value;
    const char* expected;
  };
  const Case cases[] = {
      {"vocab_size", 1'000'000'000, "\"vocab_size\" 1000000000 is larger than any supported model"},
      {"hidden_size", 1 << 20, "\"hidden_size\" 1048576 is larger than any supported model"},
      {"intermediate_size", int64_t{1} << 40, "\"intermediate_size\" 1099511627776 is larger"},
      {"num_hidden_layers", 100000, "\"num_hidden_layers\" 100000 is larger"},
      {"num_attention_heads", 4096, "\"num_attention_heads\" 4096 is larger"},
      {"max_position_embeddings", int64_t{1} << 40, "\"max_position_embeddings\" 1099511627776 is larger"},
      {"head_dim", 1 << 16, "\"head_dim\" 65536 is larger"},
      {"vocab_size", 18446744073709551615ull, "\"vocab_size\" 18446744073709551615 is larger"},
      {"vocab_size", 0, "\"vocab_size\" must be a positive integer, got 0"},
      {"hidden_size", 192.5, "\"hidden_size\" must be a positive integer, got 192.5"},
      {"num_attention_heads", "6", "\"num_attention_heads\" must be a positive integer, got \"6\""},
      {"rms_norm_eps", 2.0, "\"rms_norm_eps\" 2.000000 must be below 1"},
      {"rms_norm_eps", -1e-6, "\"rms_norm_eps\" must be a positive finite number"},
      {"rope_theta", 0, "\"rope_theta\" must be a positive finite number"},
  };
  for (const Case& c : cases) {
    json j = refConfig();
    j[c.key] = c.value;
    EXPECT_THAT(configError(j), AllOf(HasSubstr("config.json"), HasSubstr(c.expected))) << c.key << "=" << c.value;
  }
}

TEST(HostileConfig, HeadsMustDivideAndNumbersMustBeFinite) {
  json j = refConfig();
  j["num_attention_heads"] = 5;   // 192 / 5
  EXPECT_THAT(configError(j), HasSubstr("hidden_size 192 is not divisible by num_attention_heads 5"));
  j["head_dim"] = 32;             // ... unless head_dim is given (Qwen3 style), but then kv heads must divide
  EXPECT_THAT(configError(j), HasSubstr("num_attention_heads 5 is not divisible by num_key_value_heads 2"));
  j = refConfig();
  j["num_key_value_heads"] = 12;  // more kv heads than heads
  EXPECT_THAT(configError(j), HasSubstr("not divisible by num_key_value_heads 12"));
  // A file cannot carry infinity (1e999 is refused as a number overflow when parsed), but fromJson also takes
  // documents built in memory.
  EXPECT_THAT(inputErrorOf([] { parseJson(R"({"rope_theta": 1e999})", "x.json"); }),
              AllOf(HasSubstr("x.json: invalid JSON"), HasSubstr("overflow")));
  const double inf = std::numeric_limits<double>::infinity();
  j = refConfig();
  j["rope_theta"] = inf;
  EXPECT_THAT(configError(j), HasSubstr("\"rope_theta\" must be a positive finite number"));
  j = refConfig();
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", inf}};
  EXPECT_THAT(configError(j), HasSubstr("\"factor\" must be a positive finite number"));
  j = refConfig();
  j["bos_token_id"] = 8192;
  EXPECT_THAT(configError(j), HasSubstr("bos_token_id 8192 is outside the vocabulary"));
  EXPECT_NO_THROW(ModelConfig::fromJson(refConfig(), "config.json"));
}

// --- tokenizer.json -------------------------------------------------------------------------------------------

json tinyTokenizer(const std::string& regex) {
  json vocab = json::object();
  for (int c = 0; c < 26; ++c) vocab[std::string(1, char('a' + c))] = c;
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
          {"pre_tokenizer",
           {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}}}};
}

TEST(HostileTokenizer, CatastrophicRegexStopsWithAnErrorNamingThePattern) {
  const std::string dir = test::scratchDir("hostile-regex");
  writeText(dir + "/tokenizer.json", tinyTokenizer("(a|aa)+$").dump());
  Tokenizer t = Tokenizer::fromPath(dir);
  EXPECT_EQ(t.encode("ab").size(), 2u);   // harmless text goes through
  // 2^n ways to split n a's before the final mismatch: without a match limit this runs for ages.
  const auto start = std::chrono::steady_clock::now();
  const std::string message = inputErrorOf([&] { t.encode(std::string(5000, 'a') + "b"); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_THAT(message, AllOf(HasSubstr(dir + "/tokenizer.json"), HasSubstr("(a|aa)+$"),
                             HasSubstr("backtracks catastrophically")));
  EXPECT_LT(seconds, 30.0);   // generous for sanitizer builds; without the limit it would not finish
  // The limit stops one encode, not the tokenizer: the next call works.
  EXPECT_EQ(t.encode("abc").size(), 3u);
}

TEST(HostileTokenizer, InvalidRegexAndNonUtf8AreRefused) {
  const std::string dir = test::scratchDir("hostile-regex-bad");
  writeText(dir + "/tokenizer.json", tinyTokenizer("(unclosed").dump());
  EXPECT_THAT(inputErrorOf([&] { Tokenizer::fromPath(dir); }),
              AllOf(HasSubstr(dir + "/tokenizer.json"), HasSubstr("invalid regex '(unclosed'")));
  writeText(dir + "/tokenizer.json", tinyTokenizer("\\p{L}+").dump());
  Tokenizer t = Tokenizer::fromPath(dir);
  EXPECT_THAT(inputErrorOf([&] { t.encode(std::string("ab\xc3", 3)); }), HasSubstr("not valid UTF-8"));
}

// Found by or against fuzz_tokenizer: fields whose values size tables or end up as token ids.
TEST(HostileTokenizer, IdsAndLengthsFromTheFileAreBounded) {
  const std::string dir = test::scratchDir("hostile-tokenizer-ids");
  auto errorFor = [&](const json& j) {
    writeText(dir + "/tokenizer.json", j.dump());
    return inputErrorOf([&] { Tokenizer::fromPath(dir); });
  };
  // One vocabulary entry with id 2^31 - 1 used to allocate a table of two billion strings.
  json big = tinyTokenizer("\\p{L}+");
  big["model"]["vocab"]["z"] = 2147483647;
  EXPECT_THAT(errorFor(big), AllOf(HasSubstr(dir + "/tokenizer.json"), HasSubstr("vocab entry 'z' has id 2147483647"),
                                   HasSubstr("beyond the largest supported vocabulary")));
  // A BOS id past the vocabulary would index past the embedding on every encode with special tokens.
  json bos = tinyTokenizer("\\p{L}+");
  bos["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [99999], "tokens": ["<s>"]}}})");
  EXPECT_THAT(errorFor(bos), HasSubstr("post_processor or padding adds token id 99999, outside the vocabulary of 26"));
  bos["post_processor"]["special_tokens"]["<s>"]["ids"] = {25};
  EXPECT_EQ(errorFor(bos), "(no InputError)");
  // Padding to 2^40 would allocate terabytes on every encode.
  json pad = tinyTokenizer("\\p{L}+");
  pad["padding"] = json::parse(R"({"strategy": {"Fixed": 1099511627776}, "direction": "Right", "pad_id": 0})");
  EXPECT_THAT(errorFor(pad), HasSubstr("padding length 1099511627776 is beyond any model's context"));
  pad["padding"]["strategy"] = "BatchLongest";
  pad["padding"]["pad_id"] = 26;
  EXPECT_THAT(errorFor(pad), HasSubstr("adds token id 26, outside the vocabulary of 26"));
}


double secondsFor(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// nlohmann's callback parser (which the depth limit used to need) is quadratic in the number of elements: a
// header of 100k tensors took 13 minutes, `[{}]` x 100k 1.7 s and so x 1M about 3 minutes. Parsed linearly
// these take a second or two; the bounds below leave room for sanitizer builds on a busy machine and are still
// far below what a quadratic parse needs.
TEST(HostileJson, MillionsOfObjectsParseInLinearTime) {
  std::string objects = "[";
  for (int i = 0; i < 1'000'000; ++i) objects += i ? ",{}" : "{}";
  objects += "]";
  const std::string hundredThousand = "[" + objects.substr(1, 299'999) + "]";
  const double tenth = secondsFor([&] { parseJson(hundredThousand, "c.json"); });
  json parsed;
  const double whole = secondsFor([&] { parsed = parseJson(objects, "config.json"); });
  EXPECT_EQ(parsed.size(), 1'000'000u);
  EXPECT_LT(whole, 30.0);
  // Ten times the elements: linear takes ~10x, quadratic ~100x.
  EXPECT_LT(whole, 40 * tenth + 1.0) << "100k: " << tenth << " s, 1M: " << whole << " s";
  // Depth is still checked on documents that large.
  const std::string deepAtTheEnd = objects.substr(0, objects.size() - 1) + "," + nested(65) + "]";
  EXPECT_THAT(inputErrorOf([&] { parseJson(deepAtTheEnd, "c.json"); }),
              HasSubstr("c.json: JSON nested deeper than 64"));

  // A safetensors header of 500k tensors (29 MB, under the 100 MB cap), with a duplicate name at the end.
  std::string header = "{";
  for (int i = 0; i < 500'000; ++i)
    header += (i ? ",\"t" : "\"t") + std::to_string(i) + R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  size_t tensors = 0;
  const double st = secondsFor([&] { tensors = parseImage(image(header + "}")).tensors.size(); });
  EXPECT_EQ(tensors, 500'000u);
  EXPECT_LT(st, 60.0);
  const std::string twice = header + R"(,"t7":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})";
  EXPECT_THAT(inputErrorOf([&] { parseImage(image(twice)); }),
              HasSubstr("tensor 't7': defined twice"));

  // A tokenizer.json whose template lists a million pieces: parsed, then refused by the template's bound.
  json tok = tinyTokenizer("\\p{L}+");
  tok["post_processor"] = json::parse(R"({"type": "TemplateProcessing", "pair": [],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}})");
  tok["post_processor"]["single"] = json::array();
  const json piece = {{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}};
  for (int i = 0; i < 1'000'000; ++i) tok["post_processor"]["single"].push_back(piece);
  const std::string dir = test::scratchDir("hostile-json-template");
  writeText(dir + "/tokenizer.json", tok.dump());
  std::string message;
  const double t = secondsFor([&] { message = inputErrorOf([&] { Tokenizer::fromPath(dir); }); });
  EXPECT_THAT(message, AllOf(HasSubstr(dir + "/tokenizer.json"),
                             HasSubstr("'single' has 1000000 pieces, more than the 256")));
  EXPECT_LT(t, 60.0);
}

// --- every input is a regular file of bounded size ---------------------------------------------------------------

// The message of `f`, which must refuse quickly: a FIFO that blocks open() is released after 20 s and reported.
std::string refusal(const std::function<void()>& f, const std::string& fifo = "") {
  auto result = std::async(std::launch::async, [f] { return inputErrorOf(f); });
  if (result.wait_for(std::chrono::seconds(20)) == std::future_status::timeout) {
    if (!fifo.empty()) ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
    result.wait();
    return "(blocked for 20 s)";
  }
  return result.get();
}

TEST(HostileInputs, ConfigTokenizerAndIndexMustBeRegularFilesUnderTheirCaps) {
  struct Kind {
    const char* name;
    std::function<void(const std::string& dir)> load;
    uint64_t cap;
    const char* capText;
  };
  const Kind kinds[] = {
      {"config.json", [](const std::string& d) { ModelConfig::fromFile(d + "/config.json"); }, kMaxJsonConfigBytes,
       "more than the 16 MiB a config.json may be"},
      {"tokenizer.json", [](const std::string& d) { Tokenizer::fromPath(d); }, kMaxTokenizerJsonBytes,
       "more than the 128 MiB a tokenizer.json may be"},
      {"model.safetensors.index.json", [](const std::string& d) { Checkpoint::open(d); }, kMaxIndexJsonBytes,
       "more than the 64 MiB a safetensors index may be"},
  };
  for (const Kind& k : kinds) {
    const std::string dir = test::scratchDir("hostile-inputs");
    const std::string file = dir + "/" + k.name;
    // /dev/zero (a link to it, as a downloaded folder could hold) used to be read until bad_alloc.
    std::filesystem::create_symlink("/dev/zero", file);
    EXPECT_THAT(refusal([&] { k.load(dir); }),
                AllOf(HasSubstr(file), HasSubstr("not a regular file (a character device)")))
        << k.name;
    std::filesystem::remove(file);
    ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
    EXPECT_THAT(refusal([&] { k.load(dir); }, file), AllOf(HasSubstr(file), HasSubstr("not a regular file (a FIFO)")))
        << k.name;
    std::filesystem::remove(file);
    std::filesystem::create_directory(file);
    if (std::string(k.name) != "tokenizer.json")   // a folder there is taken as the model folder and has none
      EXPECT_THAT(refusal([&] { k.load(dir); }), AllOf(HasSubstr(file), HasSubstr("is a folder"))) << k.name;
    std::filesystem::remove(file);
    std::ofstream(file).flush();
    std::filesystem::resize_file(file, k.cap + 1);   // sparse: refused from its size, never read
    EXPECT_THAT(refusal([&] { k.load(dir); }), AllOf(HasSubstr(file), HasSubstr(k.capText))) << k.name;
  }
}

// --- tokenizer.json that amplifies ----------------------------------------------------------------------------

TEST(HostileTokenizer, TokenLengthsAndAddedTokenBytesAreBounded) {
  const std::string dir = test::scratchDir("hostile-tokenizer-lengths");
  auto errorFor = [&](const json& j) {
    writeText(dir + "/tokenizer.json", j.dump());
    return inputErrorOf([&] { Tokenizer::fromPath(dir); });
  };
  // One 30 MB added token used to build a 6.4 GB match trie.
  json added = tinyTokenizer("\\p{L}+");
  added["added_tokens"] = {{{"id", 26}, {"content", std::string(30 << 20, 'x')}, {"special", true}}};
  EXPECT_THAT(errorFor(added), AllOf(HasSubstr(dir + "/tokenizer.json"),
                                     HasSubstr("added_tokens[0]: 'content' is 31457280 bytes long"),
                                     HasSubstr("more than the 1024 bytes a token may be")));
  // Many tokens each under the bound, together over it.
  added["added_tokens"] = json::array();
  for (int i = 0; i < 1100; ++i)
    added["added_tokens"].push_back({{"id", 26 + i}, {"content", std::to_string(i) + std::string(1000, 'x')}});
  EXPECT_THAT(errorFor(added), HasSubstr("'added_tokens' hold more than 1048576 bytes of text"));
  json vocab = tinyTokenizer("\\p{L}+");
  vocab["model"]["vocab"][std::string(2000, 'q')] = 26;
  EXPECT_THAT(errorFor(vocab), HasSubstr("model BPE: a vocab entry is 2000 bytes long"));
  json merges = tinyTokenizer("\\p{L}+");
  merges["model"]["merges"] = json::array({json::array({std::string(1500, 'a'), "b"})});
  EXPECT_THAT(errorFor(merges), HasSubstr("merges[0]: the first token is 1500 bytes long"));
  // Real lengths pass: a 256-byte vocab entry, as Llama 3 has.
  json ok = tinyTokenizer("\\p{L}+");
  ok["model"]["vocab"][std::string(256, 'a')] = 26;
  EXPECT_EQ(errorFor(ok), "(no InputError)");
}

TEST(HostileTokenizer, NormalizersAndDecodersCannotGrowTextWithoutLimit) {
  const std::string dir = test::scratchDir("hostile-tokenizer-growth");
  auto load = [&](const json& j) {
    writeText(dir + "/tokenizer.json", j.dump());
    return Tokenizer::fromPath(dir);
  };
  // Thirty steps that each double every 'a': 2^30 times the text.
  json doubling = tinyTokenizer("\\p{L}+");
  json steps = json::array();
  const json doubleEveryA = {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aa"}};
  for (int i = 0; i < 30; ++i) steps.push_back(doubleEveryA);
  doubling["normalizer"] = {{"type", "Sequence"}, {"normalizers", steps}};
  Tokenizer t = load(doubling);
  std::string message;
  const double seconds = secondsFor([&] { message = inputErrorOf([&] { t.encode(std::string(10000, 'a')); }); });
  EXPECT_THAT(message, AllOf(HasSubstr(dir + "/tokenizer.json"), HasSubstr("normalizer Sequence grows 10000 bytes"),
                             HasSubstr("refusing a normalizer that amplifies text")));
  EXPECT_LT(seconds, 10.0);
  EXPECT_EQ(t.encode("b").size(), 1u);   // short texts stay within the slack and still encode

  // One Replace of every character by 1 KiB: stopped while it is built, not after.
  json wide = tinyTokenizer("\\p{L}+");
  wide["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "."}}}, {"content", std::string(1000, 'a')}};
  EXPECT_THAT(inputErrorOf([&] { load(wide).encode(std::string(100000, 'b')); }),
              HasSubstr("normalizer Replace grows 100000 bytes of text to"));
  // Inserted text is bounded at load: a 20 MB Prepend.
  json prepend = tinyTokenizer("\\p{L}+");
  prepend["normalizer"] = {{"type", "Prepend"}, {"prepend", std::string(20 << 20, 'a')}};
  EXPECT_THAT(inputErrorOf([&] { load(prepend); }),
              AllOf(HasSubstr("normalizer Prepend: 'prepend' is 20971520 bytes, more than the 1024")));
  // A small Prepend before each of many added tokens adds up: bounded over the whole text.
  prepend["normalizer"]["prepend"] = std::string(1000, 'a');
  prepend["added_tokens"] = {{{"id", 26}, {"content", "<s>"}, {"special", true}, {"normalized", false}}};
  std::string text;
  for (int i = 0; i < 10000; ++i) text += "<s>b";
  EXPECT_THAT(inputErrorOf([&] { load(prepend).encode(text); }), HasSubstr("the normalizer grows"));
  // The real SentencePiece chain (Prepend "\u2581", spaces to "\u2581") on a text of spaces: 3x, accepted.
  json spm = tinyTokenizer("\\p{L}+");
  spm["model"]["vocab"]["\u2581"] = 26;
  spm["normalizer"] = json::parse(R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})");
  EXPECT_EQ(load(spm).encode(std::string(100000, ' ')).size(), 100001u);

  // Decoders: the same doubling chain on decoded text.
  json decoding = tinyTokenizer("\\p{L}+");
  decoding["decoder"] = {{"type", "Sequence"}, {"decoders", steps}};
  Tokenizer d = load(decoding);
  EXPECT_THAT(inputErrorOf([&] { d.decode(std::vector<TokenId>(5000, 0)); }),
              AllOf(HasSubstr("decoder Sequence grows 5000 bytes of decoded text"), HasSubstr("refusing a decoder")));
}

TEST(HostileTokenizer, TemplatesAreBounded) {
  const std::string dir = test::scratchDir("hostile-tokenizer-template");
  auto errorFor = [&](const json& j) {
    writeText(dir + "/tokenizer.json", j.dump());
    return inputErrorOf([&] { Tokenizer::fromPath(dir); });
  };
  json tok = tinyTokenizer("\\p{L}+");
  tok["post_processor"] = json::parse(R"({"type": "TemplateProcessing", "pair": [],
      "single": ["$A", "$A", "$A"], "special_tokens": {}})");
  EXPECT_THAT(errorFor(tok), HasSubstr("single[1]: sequence A appears more than once"));
  tok["post_processor"]["single"] = {"<s>", "$A"};
  tok["post_processor"]["special_tokens"]["<s>"] = {
      {"id", "<s>"}, {"ids", std::vector<int>(5000, 1)}, {"tokens", {"<s>"}}};
  EXPECT_THAT(errorFor(tok), HasSubstr("special_tokens['<s>']: 5000 ids, more than the 1024"));
}

}  // namespace
}  // namespace pareto
