// Files from strangers that are built to hurt rather than merely broken: JSON nested a million deep, config values
// that would size huge buffers, pickle checkpoints under every usual name, a tokenizer regex that backtracks
// catastrophically, safetensors images handed over in memory. Each must be refused with a message naming the
// file and the problem, quickly, without a crash. (Ordinary corruption is in test_safetensors and
// test_model_config; docs/reliability.md lists which test covers which input.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "InputErrors.h"
#include "SharedData.h"
#include "model/ModelConfig.h"
#include "model/Safetensors.h"
#include "tokenizer/Tokenizer.h"
#include "util/Error.h"
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

}  // namespace
}  // namespace pareto
