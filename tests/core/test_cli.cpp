// pareto-cli end to end: exit codes, JSON keys, and the one-line error for bad model folders.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "SharedData.h"

namespace {

using ::testing::HasSubstr;

using pareto::test::RunResult;
using pareto::test::runCli;

TEST(Cli, HelpListsCommands) {
  RunResult r = runCli("--help");
  EXPECT_EQ(r.exitCode, 0);
  for (const char* c : {"inspect", "perplexity", "score", "generate", "tokenize", "detokenize"})
    EXPECT_THAT(r.out, HasSubstr(c));
}

TEST(Cli, MissingModelFolderIsExit2WithOneLine) {
  RunResult r = runCli("inspect --model /nonexistent/folder");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/folder"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(Cli, InconsistentModelFolderIsExit2) {
  PARETO_REQUIRE_SHARED();
  // A real checkpoint whose config.json disagrees with it: the shape check must name the tensor.
  const std::string dir = pareto::test::scratchDir("cli-bad-model");
  namespace fs = std::filesystem;
  const std::string src = pareto::test::sharedPath("models/ref-tiny");
  fs::create_symlink(fs::absolute(src + "/model.safetensors"), dir + "/model.safetensors");
  fs::copy_file(src + "/tokenizer.json", dir + "/tokenizer.json");
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(src + "/config.json"));
  cfg["intermediate_size"] = 999;
  std::ofstream(dir + "/config.json") << cfg.dump();
  RunResult r = runCli("score --model " + dir + " --prompt hi");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("mlp.gate_proj.weight"));
  EXPECT_THAT(r.err, HasSubstr("999"));
}

TEST(Cli, NotJsonConfigIsExit2) {
  const std::string dir = pareto::test::scratchDir("cli-bad-config");
  std::ofstream(dir + "/config.json") << "{ this is not json";
  RunResult r = runCli("inspect --model " + dir);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("config.json"));
  EXPECT_THAT(r.err, HasSubstr("invalid JSON"));
}

TEST(Cli, InspectJson) {
  PARETO_REQUIRE_SHARED();
  RunResult r = runCli("inspect --model " + pareto::test::sharedPath("models/ref-tiny") + " --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "LlamaForCausalLM");
  EXPECT_EQ(j["num_layers"], 4);
  EXPECT_FALSE(j["tensors"].empty());
}

TEST(Cli, ScoreAndGenerateJson) {
  PARETO_REQUIRE_SHARED();
  const std::string model = pareto::test::sharedPath("models/ref-tiny");
  auto golden = nlohmann::json::parse(std::ifstream(pareto::test::sharedPath("golden/ref-tiny.json")));
  const auto& p = golden["prompts"][0];
  RunResult s = runCli("score --model " + model + " --prompt '" + p["text"].get<std::string>() + "' --json");
  ASSERT_EQ(s.exitCode, 0) << s.err;
  auto sj = nlohmann::json::parse(s.out);
  EXPECT_EQ(sj["ids"], p["ids"]);
  EXPECT_NEAR(sj["nll_sum"].get<double>(), p["nll_sum"].get<double>(), 1e-3 * p["nll_sum"].get<double>());
  EXPECT_EQ(sj["last_top10"].size(), 10u);

  RunResult g = runCli("generate --model " + model + " --prompt '" + p["text"].get<std::string>() +
                       "' --max-new-tokens 32 --greedy --json");
  ASSERT_EQ(g.exitCode, 0) << g.err;
  auto gj = nlohmann::json::parse(g.out);
  EXPECT_EQ(gj["ids"], p["greedy32"]);
  EXPECT_EQ(gj["text"], p["greedy32_text"]);

  // The decode runtime (here its CPU references, in bfloat16) continues the prompt, greedily or by sampling on
  // its device: the same seed gives the same tokens, and bad sampling options are refused before loading.
  RunResult d = runCli("generate --model " + model + " --prompt '" + p["text"].get<std::string>() +
                       "' --max-new-tokens 8 --runtime graph --dtype bfloat16 --json");
  ASSERT_EQ(d.exitCode, 0) << d.err;
  EXPECT_EQ(nlohmann::json::parse(d.out)["ids"].size(), 8u);
  const std::string sample = "generate --model " + model + " --prompt x --max-new-tokens 6 --runtime graph "
                             "--dtype bfloat16 --json --temperature 0.9 --top-k 20 --top-p 0.9 --seed ";
  RunResult s1 = runCli(sample + "3"), s2 = runCli(sample + "3");
  ASSERT_EQ(s1.exitCode, 0) << s1.err;
  ASSERT_EQ(s2.exitCode, 0) << s2.err;
  EXPECT_EQ(nlohmann::json::parse(s1.out)["ids"], nlohmann::json::parse(s2.out)["ids"]);
  EXPECT_EQ(nlohmann::json::parse(s1.out)["ids"].size(), 6u);
  RunResult bad = runCli("generate --model " + model + " --prompt x --runtime graph --dtype bfloat16 --top-p 1.5");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_THAT(bad.err, HasSubstr("top-p must be in (0, 1]"));
}

TEST(Cli, PerplexityJsonKeys) {
  PARETO_REQUIRE_SHARED();
  RunResult r = runCli("perplexity --model " + pareto::test::sharedPath("models/ref-tiny") + " --text " +
                       pareto::test::sharedPath("data/heldout-python.txt") + " --window 128 --max-windows 3 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"ppl", "windows", "tokens", "window"}) EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["windows"], 3);
  EXPECT_EQ(j["window"], 128);
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
}

// Text inputs used to be read whatever they were: a folder as empty text, /dev/zero until bad_alloc; a file that
// is not UTF-8 was reported without its name.
TEST(Cli, TextInputsMustBeRegularUtf8FilesAndErrorsNameThem) {
  PARETO_REQUIRE_SHARED();
  const std::string model = pareto::test::sharedPath("models/ref-tiny");
  RunResult folder = runCli("perplexity --model " + model + " --text /tmp");
  EXPECT_EQ(folder.exitCode, 2);
  EXPECT_THAT(folder.err, HasSubstr("/tmp: is a folder, expected a text file"));
  RunResult zero = runCli("perplexity --model " + model + " --text /dev/zero");
  EXPECT_EQ(zero.exitCode, 2);
  EXPECT_THAT(zero.err, HasSubstr("/dev/zero: not a regular file (a character device)"));
  const std::string latin1 = pareto::test::scratchDir("cli-latin1") + "/latin1.txt";
  std::ofstream(latin1, std::ios::binary) << "caf\xe9";
  RunResult bytes = runCli("tokenize --tokenizer " + model + " --file " + latin1);
  EXPECT_EQ(bytes.exitCode, 2);
  EXPECT_THAT(bytes.err, HasSubstr(latin1 + ": text to encode is not valid UTF-8"));
}

TEST(Cli, BadOptionsAreExit2) {
  PARETO_REQUIRE_SHARED();
  const std::string model = pareto::test::sharedPath("models/ref-tiny");
  EXPECT_EQ(runCli("perplexity --model " + model + " --text /nonexistent.txt").exitCode, 2);
  EXPECT_EQ(runCli("score --model " + model + " --prompt x --device tpu").exitCode, 2);
  EXPECT_EQ(runCli("generate --model " + model + " --prompt x --temperature 0").exitCode, 2);
  EXPECT_EQ(runCli("generate --model " + model + " --prompt x --greedy --top-k 3").exitCode, 2);
  EXPECT_EQ(runCli("inspect").exitCode, 2);
}

}  // namespace

namespace {

TEST(Cli, CompressThenEvaluateTheOutputFolder) {
  PARETO_REQUIRE_SHARED();
  const std::string dir = pareto::test::scratchDir("cli-compress");
  const std::string model = pareto::test::sharedPath("models/ref-tiny");
  std::ofstream(dir + "/r.json") << R"({"prune": {"method": "magnitude", "pattern": "2:4"}})";
  RunResult c = runCli("compress --model " + model + " --recipe " + dir + "/r.json --out " + dir + "/out --json");
  ASSERT_EQ(c.exitCode, 0) << c.err;
  auto cj = nlohmann::json::parse(c.out);
  EXPECT_DOUBLE_EQ(cj["linear_bits_per_weight"].get<double>(), 9.0);
  RunResult i = runCli("inspect --model " + dir + "/out --json");
  ASSERT_EQ(i.exitCode, 0) << i.err;
  EXPECT_TRUE(nlohmann::json::parse(i.out)["compressed"].get<bool>());
  RunResult f = runCli("fidelity --dense " + model + " --model " + dir + "/out --prompts " +
                       pareto::test::sharedPath("data/prompts-prose.txt") + " --max-prompts 3 --max-new-tokens 8 --json");
  ASSERT_EQ(f.exitCode, 0) << f.err;
  auto fj = nlohmann::json::parse(f.out);
  EXPECT_LT(fj["top1_agreement"].get<double>(), 1.0);
  RunResult again = runCli("compress --model " + model + " --recipe " + dir + "/r.json --out " + dir + "/out");
  EXPECT_EQ(again.exitCode, 2);
  EXPECT_THAT(again.err, HasSubstr("already exists"));
  std::ofstream(dir + "/bad.json") << R"({"prune": {"method": "magnitude", "patern": "2:4"}})";
  RunResult bad = runCli("compress --model " + model + " --recipe " + dir + "/bad.json --out " + dir + "/out2");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_THAT(bad.err, HasSubstr("prune.patern: unknown key"));
}

}  // namespace
