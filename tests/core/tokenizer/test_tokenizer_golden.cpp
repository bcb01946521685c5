// The tokenizer against Hugging Face `tokenizers` outputs stored in shared/golden: every case must give the
// same ids and decode to the same text.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "SharedData.h"
#include "tokenizer/Tokenizer.h"
#include "util/Json.h"

namespace {

using pareto::TokenId;
using pareto::Tokenizer;
using pareto::test::sharedPath;

std::string idList(const std::vector<TokenId>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? "," : "") << ids[i];
  return s.str();
}

// Checks every case of golden/tokenizer-<name>.json against the tokenizer at tokenizerPath.
void checkGoldenFile(const std::string& name, const std::string& tokenizerPath) {
  const nlohmann::json golden = pareto::readJsonFile(sharedPath("golden/tokenizer-" + name + ".json"));
  const Tokenizer tok = Tokenizer::fromPath(tokenizerPath);
  size_t passed = 0;
  const auto& cases = golden.at("cases");
  for (const auto& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const auto expected = c.at("ids").get<std::vector<TokenId>>();
    const std::string expectedText = c.at("decoded").get<std::string>();
    const auto ids = tok.encode(text);
    const std::string decoded = tok.decode(expected);
    EXPECT_EQ(idList(ids), idList(expected)) << name << ": encode of " << nlohmann::json(text).dump();
    EXPECT_EQ(decoded, expectedText) << name << ": decode of the ids of " << nlohmann::json(text).dump();
    if (ids == expected && decoded == expectedText) ++passed;
  }
  std::cout << "[ golden   ] " << name << ": " << passed << "/" << cases.size() << " cases match\n";
  EXPECT_GT(cases.size(), 0u);
}

TEST(TokenizerGolden, Llama3) {
  PARETO_REQUIRE_SHARED();
  checkGoldenFile("llama3", sharedPath("tokenizers/llama3/tokenizer.json"));
}

TEST(TokenizerGolden, Qwen3) {
  PARETO_REQUIRE_SHARED();
  checkGoldenFile("qwen3", sharedPath("tokenizers/qwen3/tokenizer.json"));
}

TEST(TokenizerGolden, SpmBpe32k) {
  PARETO_REQUIRE_SHARED();
  checkGoldenFile("spm-bpe-32k", sharedPath("tokenizers/spm-bpe-32k/tokenizer.json"));
}

TEST(TokenizerGolden, Ref) {
  PARETO_REQUIRE_SHARED();
  // A model folder, the way the runtime passes it.
  checkGoldenFile("ref", sharedPath("models/ref-small"));
}

// The reference model's golden prompts carry ids with BOS first (the runtime adds it); the rest must be
// the tokenizer's encoding of the prompt text.
TEST(TokenizerGolden, RefSmallPrompts) {
  PARETO_REQUIRE_SHARED();
  const nlohmann::json golden = pareto::readJsonFile(sharedPath("golden/ref-small.json"));
  const Tokenizer tok = Tokenizer::fromPath(sharedPath("models/ref-small"));
  const auto bos = tok.tokenToId("<|begin_of_text|>");
  ASSERT_TRUE(bos.has_value());
  size_t n = 0;
  for (const auto& p : golden.at("prompts")) {
    const std::string text = p.at("text").get<std::string>();
    auto expected = p.at("ids").get<std::vector<TokenId>>();
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(expected.front(), *bos);
    expected.erase(expected.begin());
    EXPECT_EQ(idList(tok.encode(text)), idList(expected)) << "prompt " << nlohmann::json(text).dump();
    EXPECT_EQ(tok.decode(expected), text);
    ++n;
  }
  EXPECT_GT(n, 0u);
}

TEST(TokenizerGolden, SpecialTokensInText) {
  PARETO_REQUIRE_SHARED();
  const Tokenizer llama = Tokenizer::fromPath(sharedPath("tokenizers/llama3/tokenizer.json"));
  EXPECT_EQ(idList(llama.encode("<|begin_of_text|>Hello")), "128000,9906");
  EXPECT_EQ(llama.decode({128000, 9906}), "<|begin_of_text|>Hello");
  EXPECT_EQ(llama.decode({128000, 9906}, /*skipSpecialTokens=*/true), "Hello");
  EXPECT_EQ(llama.vocabSize(), 128256u);

  const Tokenizer spm = Tokenizer::fromPath(sharedPath("tokenizers/spm-bpe-32k/tokenizer.json"));
  // TemplateProcessing puts <s> (id 1) first.
  EXPECT_EQ(idList(spm.encode("Hello", /*addSpecialTokens=*/true)), "1,22557");
  EXPECT_EQ(idList(spm.encode("Hello")), "22557");
  EXPECT_EQ(spm.decode({1, 22557}, true), "Hello");
  EXPECT_EQ(idList(spm.encode("", true)), "1");

  const Tokenizer qwen = Tokenizer::fromPath(sharedPath("tokenizers/qwen3/tokenizer.json"));
  const auto imStart = qwen.tokenToId("<|im_start|>");
  ASSERT_TRUE(imStart.has_value());
  EXPECT_EQ(*imStart, 151644);
  const auto ids = qwen.encode("<|im_start|>user\nHi<|im_end|>");
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 151644);
  EXPECT_EQ(ids.back(), 151645);
  EXPECT_EQ(qwen.decode(ids), "<|im_start|>user\nHi<|im_end|>");
}

// The golden perplexity of golden/ref-small.json was computed on 158549 tokens of heldout-prose.txt.
TEST(TokenizerGolden, HeldoutProseTokenCount) {
  PARETO_REQUIRE_SHARED();
  const Tokenizer tok = Tokenizer::fromPath(sharedPath("models/ref-small"));
  const std::string text = pareto::readTextFile(sharedPath("data/heldout-prose.txt"));
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = tok.encode(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ timing   ] heldout-prose.txt (" << text.size() << " bytes) -> " << ids.size() << " tokens in "
            << seconds << " s\n";
  RecordProperty("encode_seconds", std::to_string(seconds));
  EXPECT_EQ(ids.size(), 158549u);
  EXPECT_EQ(tok.decode(ids), text);
#ifdef NDEBUG
  // The brief's bound for an optimized build; a regression to per-word quadratic merging would blow it.
  EXPECT_LT(seconds, 5.0);
#endif
}

TEST(TokenizerGolden, ConcurrentEncodeAgrees) {
  PARETO_REQUIRE_SHARED();
  const Tokenizer tok = Tokenizer::fromPath(sharedPath("models/ref-small"));
  const std::string text = pareto::readTextFile(sharedPath("data/heldout-prose.txt")).substr(0, 100000);
  const auto expected = tok.encode(text);
  // A second instance with a cold word cache, so the threads race on filling it.
  const Tokenizer cold = Tokenizer::fromPath(sharedPath("models/ref-small"));
  std::vector<std::vector<TokenId>> results(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) threads.emplace_back([&, i] { results[i] = cold.encode(text); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, expected);
}

}  // namespace
