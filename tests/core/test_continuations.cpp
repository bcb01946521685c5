// Decode calibration from a continuations file, from the outside: `generate --prompts --out` writes one, a
// recipe's "continuations" reads it, and the compressed weights are the ones decode calibration from the prompts
// gives.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "CliRun.h"
#include "FolderContents.h"
#include "SharedData.h"
#include "compress/Recipe.h"
#include "util/Error.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

Recipe parse(const std::string& calibration) {
  return Recipe::fromJson(nlohmann::json::parse(R"({"calibration": )" + calibration +
                                                R"(, "prune": {"method": "wanda", "pattern": "2:4"}})"),
                          "/recipes", "r.json");
}

TEST(ContinuationsRecipe, DecodeReadsPromptsOrContinuationsNeverBoth) {
  const Recipe r = parse(R"({"source": "decode", "continuations": "c.jsonl", "tokens": 64})");
  EXPECT_TRUE(r.calibration->fromContinuations);
  EXPECT_EQ(r.calibration->file, "/recipes/c.jsonl");
  EXPECT_FALSE(parse(R"({"source": "decode", "prompts": "p.txt"})").calibration->fromContinuations);
  auto refused = [](const std::string& calibration, const std::string& expected) {
    try {
      parse(calibration);
      ADD_FAILURE() << "accepted: " << calibration;
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr(expected)) << calibration;
    }
  };
  refused(R"({"source": "decode", "prompts": "p.txt", "continuations": "c.jsonl"})", "calibration.prompts");
  refused(R"({"source": "decode"})", "(or \"continuations\": FILE)");
  refused(R"({"source": "text", "text": "t.txt", "continuations": "c.jsonl"})", "calibration.continuations");
  refused(R"({"source": "decode", "continuations": "c.jsonl", "max_new_tokens": 8})",
          "calibration.max_new_tokens: does not apply to continuations read from a file");
}

TEST(ContinuationsRecipe, GeneratedElsewhereCompressesAsGeneratedHere) {
  PARETO_REQUIRE_SHARED();
  const std::string dir = test::scratchDir("continuations-cli");
  const std::string model = test::sharedPath("models/ref-tiny");
  const std::string prompts = test::sharedPath("data/prompts-prose.txt");
  const test::RunResult g = test::runCli("--no-record generate --model " + model + " --prompts " + prompts +
                                         " --max-new-tokens 16 --batch 4 --out " + dir + "/c.jsonl --json");
  ASSERT_EQ(g.exitCode, 0) << g.err;
  const nlohmann::json j = nlohmann::json::parse(g.out);
  EXPECT_GT(j.at("tokens").get<int64_t>(), 256);
  const test::RunResult again =
      test::runCli("--no-record generate --model " + model + " --prompts " + prompts + " --out " + dir + "/c.jsonl");
  EXPECT_EQ(again.exitCode, 2);
  EXPECT_THAT(again.err, HasSubstr("already exists"));

  std::ofstream(dir + "/from-prompts.json") << R"({"calibration": {"source": "decode", "prompts": ")" << prompts
                                            << R"(", "tokens": 256, "max_new_tokens": 16, "seed": 3},
                                               "prune": {"method": "sparsegpt", "pattern": "2:4"}})";
  std::ofstream(dir + "/from-file.json") << R"({"calibration": {"source": "decode", "continuations": "c.jsonl",
                                               "tokens": 256, "seed": 3},
                                               "prune": {"method": "sparsegpt", "pattern": "2:4"}})";
  for (const char* name : {"from-prompts", "from-file"}) {
    const test::RunResult c = test::runCli("--no-record compress --model " + model + " --recipe " + dir + "/" + name +
                                           ".json --batch 4 --out " + dir + "/" + name);
    ASSERT_EQ(c.exitCode, 0) << name << ": " << c.err;
  }
  EXPECT_EQ(test::fileText(dir + "/from-prompts/model.safetensors"), test::fileText(dir + "/from-file/model.safetensors"));
}

}  // namespace
}  // namespace pareto
