// Compression spread over processes through c10d (gloo on the CPU): two processes give the model one gives (the
// Hessians equal up to summation order, the perplexity within 0.2%), decode calibration shared out gives the
// one-process set, and a rank that dies mid-run fails the whole job with an error naming it and nothing written.
//
// The collective-level checks run this test binary again as the ranks (kRankEnv selects what a rank does; the
// rank runs before GoogleTest starts and exits with its status), the job-level ones run pareto-cli --processes 2.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ChildProcess.h"
#include "CliRun.h"
#include "FolderContents.h"
#include "SharedData.h"
#include "calib/DecodeCalibration.h"
#include "calib/HessianAccumulator.h"
#include "dist/ProcessGroup.h"
#include "eval/Perplexity.h"
#include "export/DenseWeights.h"
#include "model/LoadedModel.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

// "MODE RANK WORLD PORT OUTFILE": this process is a rank of a test job.
constexpr const char* kRankEnv = "PARETO_TEST_DIST_RANK";

// The activations every rank can make alike: 7 batches [3, 17, 48], weights with zeros (padding, prompts).
std::vector<std::pair<at::Tensor, at::Tensor>> testActivations() {
  at::manual_seed(11);
  std::vector<std::pair<at::Tensor, at::Tensor>> batches;
  for (int k = 0; k < 7; ++k) {
    at::Tensor x = at::randn({3, 17, 48});
    at::Tensor w = at::rand({3, 17});
    batches.emplace_back(x, w.masked_fill(w < 0.25, 0.0));
  }
  return batches;
}

HessianAccumulator hessianOf(const std::vector<std::pair<at::Tensor, at::Tensor>>& batches, int rank, int ranks) {
  HessianAccumulator h(48, at::kCPU, "test.hessian");
  h.setChunkRows(16);   // crosses chunk boundaries inside a batch
  for (size_t k = static_cast<size_t>(rank); k < batches.size(); k += static_cast<size_t>(ranks))
    h.add(batches[k].first, batches[k].second);
  return h;
}

DecodeCalibrationOptions testDecodeOptions(const LoadedModel& m) {
  DecodeCalibrationOptions o;
  o.tokens = 150;
  o.maxNewTokens = 12;
  o.batch = 3;
  o.seed = 5;
  o.eosTokenIds = m.eosTokenIds;
  o.bosTokenId = m.config.bosTokenId;
  return o;
}

nlohmann::json sequencesJson(const CalibrationSet& set) {
  nlohmann::json out = nlohmann::json::array();
  for (const CalibrationSequence& s : set.sequences) out.push_back({{"ids", s.ids}, {"weights", s.weights}});
  return out;
}

// A rank of a test job: writes what it computed to OUTFILE as JSON.
int runRank(const std::string& spec) {
  std::istringstream in(spec);
  std::string mode, outFile;
  ProcessGroupOptions o;
  in >> mode >> o.rank >> o.worldSize >> o.masterPort >> outFile;
  o.timeout = std::chrono::seconds(60);
  try {
    ProcessGroup group(o);
    nlohmann::json result;
    if (mode == "hessian") {
      HessianAccumulator h = hessianOf(testActivations(), group.rank(), group.size());
      h.sumAcrossRanks(group);
      const at::Tensor sum = h.sum().contiguous();
      result["sum"] = std::vector<float>(sum.data_ptr<float>(), sum.data_ptr<float>() + sum.numel());
      result["weight_sum"] = h.weightSum();
      result["samples"] = h.samples();
      std::string bytes = group.rank() == 1 ? std::string("from rank 1\0with a zero byte", 27) : std::string();
      group.broadcastBytes(bytes, 1);
      result["bytes"] = bytes;
      at::Tensor mask = group.rank() == 0 ? at::tensor({1, 0, 1}, at::kByte).to(at::kBool) : at::zeros({3}, at::kBool);
      group.broadcast(mask, 0);
      result["mask"] = std::vector<int>{mask[0].item<bool>(), mask[1].item<bool>(), mask[2].item<bool>()};
      result["any"] = group.any(group.rank() == 1);
      result["none"] = group.any(false);
    } else if (mode == "decode") {
      const LoadedModel m = loadModel(test::sharedPath("models/ref-tiny"), makeRuntimeOptions("cpu", "float32"));
      const CalibrationSet share = decodeCalibrationShare(*m.model, *m.tokenizer,
                                                          readPrompts(test::sharedPath("data/prompts-prose.txt")),
                                                          testDecodeOptions(m), group);
      result["sequences"] = sequencesJson(share);
    }
    group.barrier();
    std::ofstream(outFile) << result.dump();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", o.rank, e.what());
    return 1;
  }
}

// A port nothing listens on now (the kernel's pick), for rank 0's store.
int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Runs `ranks` copies of this binary as the ranks of a `mode` job; their JSON results, in rank order.
std::vector<nlohmann::json> runRanks(const std::string& mode, int ranks) {
  const std::string dir = test::scratchDir("dist-" + mode);
  const int port = freePort();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    const std::string spec = std::string(kRankEnv) + "=" + mode + " " + std::to_string(r) + " " +
                             std::to_string(ranks) + " " + std::to_string(port) + " " + dir + "/rank" +
                             std::to_string(r) + ".json";
    std::vector<std::string> env = {spec};
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string self = fs::read_symlink("/proc/self/exe").string();
    char* argv[] = {self.data(), nullptr};
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execve(argv[0], argv, envp.data());
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<nlohmann::json> results;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(test::waitExit(pids[static_cast<size_t>(r)], 120), 0) << "rank " << r;
    results.push_back(readJsonFile(dir + "/rank" + std::to_string(r) + ".json"));
  }
  return results;
}

TEST(Distributed, HessianSummedAcrossRanksEqualsOneProcessUpToSummationOrder) {
  const auto batches = testActivations();
  const HessianAccumulator whole = hessianOf(batches, 0, 1);
  const std::vector<nlohmann::json> ranks = runRanks("hessian", 2);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::vector<float> sum = ranks[r].at("sum").get<std::vector<float>>();
    ASSERT_EQ(static_cast<int64_t>(sum.size()), whole.sum().numel());
    const at::Tensor got = at::tensor(sum).view({48, 48});
    EXPECT_TRUE(at::allclose(got, whole.sum(), 1e-5, 1e-4)) << "rank " << r << ": max difference "
                                                           << (got - whole.sum()).abs().max().item<float>();
    EXPECT_FALSE(at::equal(got, hessianOf(batches, static_cast<int>(r), 2).sum())) << "rank " << r << " only has its share";
    EXPECT_NEAR(ranks[r].at("weight_sum").get<double>(), whole.weightSum(), 1e-9 * whole.weightSum());
    EXPECT_EQ(ranks[r].at("samples").get<int64_t>(), whole.samples());
    EXPECT_EQ(ranks[r].at("bytes").get<std::string>(), std::string("from rank 1\0with a zero byte", 27));
    EXPECT_EQ(ranks[r].at("mask").get<std::vector<int>>(), (std::vector<int>{1, 0, 1}));
    EXPECT_TRUE(ranks[r].at("any").get<bool>());
    EXPECT_FALSE(ranks[r].at("none").get<bool>());
  }
}

TEST(Distributed, DecodeCalibrationSharesMakeTheOneProcessSet) {
  PARETO_REQUIRE_SHARED();
  const LoadedModel m = loadModel(test::sharedPath("models/ref-tiny"), makeRuntimeOptions("cpu", "float32"));
  const CalibrationSet whole = decodeCalibration(*m.model, *m.tokenizer,
                                                 readPrompts(test::sharedPath("data/prompts-prose.txt")),
                                                 testDecodeOptions(m));
  std::vector<nlohmann::json> expected = sequencesJson(whole);
  std::vector<nlohmann::json> got;
  const std::vector<nlohmann::json> ranks = runRanks("decode", 2);
  for (const nlohmann::json& r : ranks) {
    EXPECT_FALSE(r.at("sequences").empty()) << "every rank generates a share";
    for (const nlohmann::json& s : r.at("sequences")) got.push_back(s);
  }
  auto byText = [](const nlohmann::json& a, const nlohmann::json& b) { return a.dump() < b.dump(); };
  std::sort(expected.begin(), expected.end(), byText);
  std::sort(got.begin(), got.end(), byText);
  EXPECT_EQ(got, expected);
}

// --- pareto-cli compress --processes 2 ----------------------------------------------------------------------------

class DistributedCompress : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::sharedAvailable()) GTEST_SKIP() << "shared data not found at " << test::sharedDir();
    dir_ = test::scratchDir("dist-compress");
    // SparseGPT 2:4: masks and kept values both come from the Hessians. (GPTQ's rounding choices amplify the
    // last-bit differences of a float32 sum over the layers: docs/distributed.md.)
    recipe_ = dir_ + "/recipe.json";
    std::ofstream(recipe_) << nlohmann::json{
        {"calibration", {{"source", "text"}, {"text", test::sharedPath("data/heldout-prose.txt")}, {"tokens", 2048},
                         {"window", 128}, {"seed", 0}}},
        {"prune", {{"method", "sparsegpt"}, {"pattern", "2:4"}}}}
                                  .dump();
  }

  std::string compress(const std::string& out, const std::string& extra) const {
    return "compress --model " + test::sharedPath("models/ref-tiny") + " --recipe " + recipe_ + " --out " + dir_ +
           "/" + out + " --no-record --quiet --json " + extra;
  }

  double perplexity(const std::string& model) const {
    const LoadedModel m = loadModel(model, makeRuntimeOptions("cpu", "float32"));
    PerplexityOptions o;
    o.window = 128;
    o.maxWindows = 8;
    return computePerplexity(*m.model, m.tokenizer->encode(readTextFile(test::sharedPath("data/heldout-python.txt"))),
                             o)
        .ppl;
  }

  std::string dir_, recipe_;
};

TEST_F(DistributedCompress, TwoProcessesGiveTheModelOneGives) {
  const test::RunResult one = test::runCli(compress("one", ""));
  ASSERT_EQ(one.exitCode, 0) << one.err;
  const test::RunResult two = test::runCli(compress("two", "--processes 2"));
  ASSERT_EQ(two.exitCode, 0) << two.err;
  // Rank 0 alone prints the result and writes the folder.
  const nlohmann::json r1 = nlohmann::json::parse(one.out), r2 = nlohmann::json::parse(two.out);
  EXPECT_EQ(r2.at("calibration_tokens"), r1.at("calibration_tokens"));
  EXPECT_EQ(r2.at("bytes"), r1.at("bytes"));
  EXPECT_EQ(test::entries(dir_), (std::vector<std::string>{"one", "recipe.json", "two"}));
  const nlohmann::json m1 = readJsonFile(dir_ + "/one/pareto.json"), m2 = readJsonFile(dir_ + "/two/pareto.json");
  EXPECT_EQ(m2.at("processes"), 2);
  ASSERT_EQ(m2.at("modules").size(), m1.at("modules").size());
  for (const auto& [name, entry] : m1.at("modules").items()) {
    EXPECT_EQ(m2.at("modules").at(name).at("format"), entry.at("format")) << name;
    EXPECT_NEAR(m2.at("modules").at(name).at("sparsity").get<double>(), entry.at("sparsity").get<double>(), 1e-9)
        << name;
  }

  // The weights the two models run with. The first block's Hessians come from the same inputs in both runs and
  // differ only in the order of their float32 additions, so its weights may differ only where that order tips a
  // choice. Later blocks take the previous blocks' outputs, and a tipped choice there changes every later block's
  // inputs a little (docs/distributed.md, "How equal is the same model"): on an AMD EPYC with OpenBLAS 0.3.21 three
  // mask bytes of layer 0 tipped and a quarter of the later weights moved, where another machine tipped none. So
  // the block that shows whether the ranks' shares and sums make the one-process set is layer 0, and the rest is
  // held to the perplexity such a tip can cost.
  const DenseWeights a = readDenseWeights(dir_ + "/one", at::kFloat), b = readDenseWeights(dir_ + "/two", at::kFloat);
  ASSERT_EQ(a.densified, b.densified);
  ASSERT_FALSE(a.densified.empty());
  double differing = 0, total = 0;
  for (const std::string& module : a.densified) {
    const at::Tensor& wa = a.tensors.at(module + ".weight");
    const at::Tensor& wb = b.tensors.at(module + ".weight");
    ASSERT_EQ(wa.sizes(), wb.sizes()) << module;
    if (module.rfind("model.layers.0.", 0) != 0) continue;
    differing += (wa != wb).sum().item<double>();
    total += static_cast<double>(wa.numel());
  }
  ASSERT_GT(total, 0.0) << "no module of layer 0 was compressed";
  EXPECT_LT(differing / total, 0.001) << differing << " of " << total << " weights of layer 0 differ";
  const double p1 = perplexity(dir_ + "/one"), p2 = perplexity(dir_ + "/two");
  EXPECT_LT(std::abs(p2 - p1) / p1, 0.02) << "perplexity " << p1 << " with one process, " << p2 << " with two";
}

// A rank that dies (SIGKILL at layer 2 of 4, as a crashed host stops) fails the whole job: the error names the
// rank, the other rank stops at its next collective instead of waiting, and no output folder is left.
TEST_F(DistributedCompress, KilledRankFailsTheJobCleanly) {
  ::setenv("PARETO_TEST_KILL_RANK", "1:2", 1);
  const auto start = std::chrono::steady_clock::now();
  const test::RunResult r = test::runCli(compress("out", "--processes 2"));
  ::unsetenv("PARETO_TEST_KILL_RANK");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_THAT(r.err, AllOf(HasSubstr("rank 1 of 2 stopped (killed by signal 9"),
                           HasSubstr("distributed"), HasSubstr("failed on rank 0 of 2")));
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_LT(seconds, 60.0) << "the surviving rank must not wait for the dead one";
  EXPECT_EQ(test::entries(dir_), (std::vector<std::string>{"recipe.json"}));
}

// SIGTERM to the launcher alone (a scheduler's kill) goes on to every rank; the ranks agree on the cancel before
// the next batch of generation, stop together with exit 143 and leave nothing.
TEST_F(DistributedCompress, SigtermToTheLauncherCancelsEveryRank) {
  const std::string decode = dir_ + "/decode.json";
  std::ofstream(decode) << nlohmann::json{
      {"calibration", {{"source", "decode"}, {"prompts", test::sharedPath("data/prompts-prose.txt")},
                       {"tokens", 15000}, {"max_new_tokens", 128}, {"seed", 0}}},
      {"prune", {{"method", "sparsegpt"}, {"pattern", "2:4"}}}}
                               .dump();
  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  test::Child c = test::spawnCli({"compress", "--model", test::sharedPath("models/ref-tiny"), "--recipe", decode,
                                  "--out", dir_ + "/out", "--processes", "2", "--no-record"},
                                 pipeFds[1], [] {});
  ASSERT_GT(c.pid, 0);
  ::close(pipeFds[1]);
  const std::string before = test::readUntil(pipeFds[0], "decode calibration", 120);
  ASSERT_THAT(before, HasSubstr("decode calibration")) << "the job never reported calibration progress";
  ::kill(c.pid, SIGTERM);
  const std::string after = test::readUntil(pipeFds[0], "", 120);
  ::close(pipeFds[0]);
  EXPECT_EQ(test::waitExit(c.pid, 60), 143) << after;
  EXPECT_THAT(after, HasSubstr("pareto-cli: cancelled (SIGTERM)"));
  EXPECT_EQ(test::entries(dir_), (std::vector<std::string>{"decode.json", "recipe.json"}));
}

TEST_F(DistributedCompress, BadDistributedOptionsAreRefusedUpFront) {
  const test::RunResult both = test::runCli(compress("out", "--processes 2 --rank 0 --world-size 2"));
  EXPECT_EQ(both.exitCode, 2) << both.err;
  const test::RunResult noMaster = test::runCli(compress("out", "--rank 1 --world-size 2"));
  EXPECT_EQ(noMaster.exitCode, 2) << noMaster.err;
  const test::RunResult badRank = test::runCli(compress("out", "--rank 2 --world-size 2 --master 127.0.0.1:1"));
  EXPECT_EQ(badRank.exitCode, 2) << badRank.err;
  EXPECT_THAT(badRank.err, HasSubstr("--rank 2 is outside 0..1"));
  const test::RunResult badMaster = test::runCli(compress("out", "--rank 0 --world-size 2 --master nowhere"));
  EXPECT_EQ(badMaster.exitCode, 2) << badMaster.err;
  EXPECT_THAT(badMaster.err, HasSubstr("expected HOST:PORT"));
  EXPECT_EQ(test::entries(dir_), (std::vector<std::string>{"recipe.json"}));
}

}  // namespace
}  // namespace pareto

// A rank process (kRankEnv set) does its part and exits with its status; otherwise the tests run.
int main(int argc, char** argv) {
  if (const char* spec = std::getenv(pareto::kRankEnv)) return pareto::runRank(spec);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
