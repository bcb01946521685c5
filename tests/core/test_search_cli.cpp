// pareto-cli search end to end on ref-tiny: the searched recipe compresses to the predicted bits, within the
// budget; refusals say why and what is reachable; the front's recipes are written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>

#include "ChildProcess.h"
#include "CliRun.h"
#include "SharedData.h"

namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using pareto::test::RunResult;
using pareto::test::runCli;

class SearchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    dir_ = pareto::test::scratchDir("search-cli");
    model_ = pareto::test::sharedPath("models/ref-tiny");
    // Small calibration; candidates whose groups fit ref-tiny's 192- and 512-column linears, plus one that
    // does not (groups of 100, which no power-of-two fraction of at least 32 makes fit), to be left out and listed.
    const json base = {
        {"calibration", {{"source", "text"}, {"text", pareto::test::sharedPath("data/wikitext2-test.txt")},
                         {"tokens", 2048}, {"window", 128}}},
        {"candidates", {{{"name", "dense"}},
                        {{"name", "int8"}, {"quantize", {{"method", "rtn"}, {"bits", 8}, {"granularity", "channel"}}}},
                        {{"name", "gptq4-g64"}, {"quantize", {{"method", "gptq"}, {"bits", 4}, {"group_size", 64}}}},
                        {{"name", "gptq3-g64"}, {"quantize", {{"method", "gptq"}, {"bits", 3}, {"group_size", 64}}}},
                        {{"name", "rtn4-g100"}, {"quantize", {{"method", "rtn"}, {"bits", 4}, {"group_size", 100}}}}}}};
    base_ = dir_ + "/base.json";
    std::ofstream(base_) << base.dump(2);
  }
  std::string dir_, model_, base_;
};

TEST_F(SearchCli, SearchedRecipeCompressesToThePredictedBitsWithinTheBudget) {
  const std::string out = dir_ + "/searched.json";
  RunResult s = runCli("search --no-record --quiet --json --model " + model_ + " --recipe " + base_ +
                       " --budget-bpw 5 --out " + out + " --frontier 4 --out-dir " + dir_ + "/front");
  ASSERT_EQ(s.exitCode, 0) << s.err;
  const json r = json::parse(s.out);
  const double predicted = r.at("chosen").at("linear_bits_per_weight").get<double>();
  EXPECT_LE(predicted, 5.0);
  EXPECT_GT(predicted, 4.0);   // the budget is used, not left idle
  EXPECT_THAT(r.at("skipped").dump(), HasSubstr("× rtn4-g100: model.layers.0.self_attn.q_proj"));
  EXPECT_EQ(r.at("front").size(), 4u);
  for (const auto& p : r.at("front")) EXPECT_TRUE(std::filesystem::exists(p.at("recipe").get<std::string>()));
  // A front point that spends more bits has a lower estimated loss.
  EXPECT_GT(r.at("front")[0].at("estimated_loss").get<double>(), r.at("front")[3].at("estimated_loss").get<double>());

  RunResult c = runCli("compress --no-record --quiet --json --model " + model_ + " --recipe " + out + " --out " +
                       dir_ + "/compressed");
  ASSERT_EQ(c.exitCode, 0) << c.err;
  const double stored = json::parse(c.out).at("linear_bits_per_weight").get<double>();
  EXPECT_NEAR(stored, predicted, 1e-9);
  EXPECT_LE(stored, 5.0);
}

// Predicted tokens/s come from the copy bandwidth `bench copy` stored (the workbench's figure too), named with its
// date, not from a new measurement at each search; `bench copy` again replaces it and shows the one it replaced.
TEST_F(SearchCli, PredictionsUseTheStoredCopyBandwidthWithItsDate) {
  const std::string db = " --db " + dir_ + "/runs.db";
  RunResult copy = runCli("bench copy --device cpu --json" + db);
  ASSERT_EQ(copy.exitCode, 0) << copy.err;
  const json stored = json::parse(copy.out);
  EXPECT_EQ(stored.at("device"), "cpu");
  EXPECT_TRUE(stored.at("stored").get<bool>());
  EXPECT_FALSE(stored.contains("previous_gb_per_second"));
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.1f", stored.at("gb_per_second").get<double>());

  RunResult s = runCli("search --quiet --json --model " + model_ + " --recipe " + base_ + " --budget-bpw 5 --out " +
                       dir_ + "/searched.json" + db);
  ASSERT_EQ(s.exitCode, 0) << s.err;
  const std::string source = json::parse(s.out).at("speed_source").get<std::string>();
  EXPECT_THAT(source, HasSubstr(std::string("cpu copy bandwidth ") + rate + " GB/s measured 20")) << source;

  RunResult text = runCli("bench copy --device cpu" + db);
  ASSERT_EQ(text.exitCode, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr(std::string("\nwas cpu copy bandwidth ") + rate + " GB/s measured 20"));
  EXPECT_THAT(text.out, HasSubstr("predictions on this device use it until it is measured again"));
}

// The refined estimate is said and recorded; --table reuses the measured table for another budget, and a table of
// another estimate (--no-refine) is measured again.
TEST_F(SearchCli, TheEstimateIsRecordedAndATableIsReusedOnlyForTheSameInputs) {
  const std::string table = dir_ + "/table.json";
  std::filesystem::remove(table);
  auto search = [&](const std::string& extra) {
    RunResult s = runCli("search --no-record --quiet --json --model " + model_ + " --recipe " + base_ +
                         " --out " + dir_ + "/t.json --table " + table + " --refine-windows 2 " + extra);
    EXPECT_EQ(s.exitCode, 0) << s.err;
    return s.exitCode == 0 ? json::parse(s.out) : json::object();
  };
  const json first = search("--budget-bpw 5");
  ASSERT_TRUE(first.contains("refine"));
  EXPECT_THAT(first.at("estimate").get<std::string>(), HasSubstr("predicted KL"));
  EXPECT_EQ(first.at("refine").at("windows"), 2);
  EXPECT_FALSE(first.at("table").at("reused").get<bool>());
  for (const auto& m : first.at("modules")) EXPECT_GT(m.at("scale").get<double>(), 0) << m.at("module");
  std::ifstream written(dir_ + "/t.json");
  EXPECT_THAT(json::parse(written).at("description").get<std::string>(), HasSubstr("predicted KL"));
  const json second = search("--budget-bpw 6");
  EXPECT_TRUE(second.at("table").at("reused").get<bool>());
  EXPECT_EQ(second.at("modules")[3].at("candidates")[2], first.at("modules")[3].at("candidates")[2]);
  RunResult plain = runCli("search --no-record --quiet --json --no-refine --model " + model_ + " --recipe " + base_ +
                           " --out " + dir_ + "/t.json --table " + table + " --budget-bpw 5");
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  const json p = json::parse(plain.out);
  EXPECT_FALSE(p.at("table").at("reused").get<bool>());
  EXPECT_EQ(p.at("refine"), false);
  EXPECT_THAT(p.at("estimate").get<std::string>(), HasSubstr("output error"));
  RunResult both = runCli("search --no-record --no-refine --refine-windows 2 --model " + model_ + " --recipe " +
                          base_ + " --out " + dir_ + "/t.json --budget-bpw 5");
  EXPECT_EQ(both.exitCode, 2);
  EXPECT_THAT(both.err, HasSubstr("--no-refine"));
}

TEST_F(SearchCli, BudgetOutsideTheReachableRangeIsRefusedBeforeAnyWork) {
  const std::string out = dir_ + "/never.json";
  RunResult low = runCli("search --no-record --model " + model_ + " --recipe " + base_ + " --budget-bpw 1 --out " + out);
  EXPECT_EQ(low.exitCode, 2);
  EXPECT_THAT(low.err, HasSubstr("budget 1.000 bits per weight is outside what the candidates can reach: 3."));
  EXPECT_THAT(low.err, HasSubstr("to 16.000 bits per weight"));
  RunResult high = runCli("search --no-record --model " + model_ + " --recipe " + base_ + " --budget-bpw 20 --out " + out);
  EXPECT_EQ(high.exitCode, 2);
  EXPECT_THAT(high.err, HasSubstr("outside what the candidates can reach"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(SearchCli, UsageErrorsSayWhatIsMissing) {
  RunResult none = runCli("search --no-record --model " + model_ + " --recipe " + base_ + " --out " + dir_ + "/x.json");
  EXPECT_EQ(none.exitCode, 2);
  EXPECT_THAT(none.err, HasSubstr("give a budget"));
  RunResult two = runCli("search --no-record --model " + model_ + " --recipe " + base_ +
                         " --budget-bpw 4 --budget-bytes 100 --out " + dir_ + "/x.json");
  EXPECT_EQ(two.exitCode, 2);
  const std::string bad = dir_ + "/bad.json";
  std::ofstream(bad) << R"({"quantize": {"method": "rtn"}})";
  RunResult b = runCli("search --no-record --model " + model_ + " --recipe " + bad + " --budget-bpw 4 --out " +
                       dir_ + "/x.json");
  EXPECT_EQ(b.exitCode, 2);
  EXPECT_THAT(b.err, HasSubstr(bad + ": quantize: the search chooses"));
  RunResult help = runCli("search --help");
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_THAT(help.out, HasSubstr("--budget-tok-s"));
  EXPECT_THAT(help.out, HasSubstr("tr(ΔW H ΔWᵀ)"));
}

TEST_F(SearchCli, CtrlCDuringTheSensitivityPassLeavesNothingWritten) {
  const std::string out = dir_ + "/cancelled.json", front = dir_ + "/cancelled-front";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  // The progress line comes at the first module; the rest of the pass (seconds) is still ahead.
  const pareto::test::Child c = pareto::test::spawnCli(
      {"search", "--no-record", "--model", model_, "--recipe", base_, "--budget-bpw", "6", "--out", out,
       "--frontier", "3", "--out-dir", front},
      fds[1], [] {});
  ASSERT_GT(c.pid, 0);
  ::close(fds[1]);
  const std::string before = pareto::test::readUntil(fds[0], "sensitivity", 300);
  ASSERT_THAT(before, HasSubstr("sensitivity"));
  ::kill(c.pid, SIGINT);
  const std::string after = pareto::test::readUntil(fds[0], "", 120);
  ::close(fds[0]);
  EXPECT_EQ(pareto::test::waitExit(c.pid, 60), 130) << after;
  EXPECT_THAT(after, HasSubstr("cancelled"));
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(front));
}

}  // namespace
