// What pareto-cli does with the user's files and the user's signals, seen from outside as a child process:
// --overwrite never deletes what Pareto did not write, two runs to one output never mix, paths are normalised,
// SIGTERM and SIGHUP cancel like Ctrl-C, a lost write fails the command, NaN weights are refused and options
// are bounded by what the model can hold (docs/reliability.md).
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ChildProcess.h"
#include "FolderContents.h"
#include "SharedData.h"
#include "checkpoint/Safetensors.h"
#include "model/OutOfMemory.h"
#include "model/TensorIO.h"
#include "util/Error.h"
#include "util/OutputFolder.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using test::entries;
using test::fileText;
using test::snapshot;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

struct Outcome {
  int code = -1;
  std::string err;
};

// Runs pareto-cli to completion (at most `seconds`), stdout to `stdoutPath`, stderr captured.
Outcome cli(const std::vector<std::string>& args, const char* stdoutPath = "/dev/null",
            const std::function<void()>& inChild = {}, double seconds = 300, bool record = false) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  std::vector<std::string> all;
  if (!record) all.push_back("--no-record");
  all.insert(all.end(), args.begin(), args.end());
  test::Child c = test::spawnCli(all, fds[1], inChild ? inChild : [] {}, stdoutPath);
  ::close(fds[1]);
  Outcome o;
  o.err = test::readUntil(fds[0], "", seconds);
  ::close(fds[0]);
  o.code = test::waitExit(c.pid, 60);
  return o;
}

void copyModel(const fs::path& to) {
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(test::sharedPath("models/ref-tiny")))
    if (e.is_regular_file()) fs::copy_file(e.path(), to / e.path().filename());
}

class CliSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    dir_ = test::scratchDir("cli-safety");
    magnitude_ = (fs::path(dir_) / "magnitude.json").string();
    std::ofstream(magnitude_) << R"({"prune": {"method": "magnitude", "pattern": "2:4"}})";
  }
  std::string tiny() const { return test::sharedPath("models/ref-tiny"); }
  std::string decodeRecipe(int tokens) const {
    const std::string path = (fs::path(dir_) / "decode.json").string();
    std::ofstream(path) << R"({"calibration": {"source": "decode", "prompts": ")"
                        << test::sharedPath("data/prompts-prose.txt") << R"(", "tokens": )" << tokens
                        << R"(, "max_new_tokens": 128}, "prune": {"method": "sparsegpt", "pattern": "2:4"}})";
    return path;
  }
  std::string dir_, magnitude_;
};

TEST_F(CliSafety, OverwriteNeverDeletesTheUsersFiles) {
  const fs::path anc = fs::path(dir_) / "anc";
  copyModel(anc / "model");
  const auto model = snapshot(anc);
  // compress --model anc/model --out anc --overwrite: the output would hold its own source.
  Outcome o = cli({"compress", "--model", (anc / "model").string(), "--recipe", magnitude_, "--out", anc.string(),
                   "--overwrite"});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_THAT(o.err, AllOf(HasSubstr("holds"), HasSubstr("which this run reads")));
  EXPECT_EQ(snapshot(anc), model);
  // --out precious --overwrite: a folder of the user's own files.
  const fs::path precious = fs::path(dir_) / "precious";
  fs::create_directories(precious);
  std::ofstream(precious / "notes.txt") << "mine";
  o = cli({"compress", "--model", tiny(), "--recipe", magnitude_, "--out", precious.string(), "--overwrite"});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("is not a folder Pareto wrote"));
  EXPECT_EQ(fileText(precious / "notes.txt"), "mine");
  // export hf --model out/x --out out --overwrite: the export would wipe its own source.
  const fs::path out = fs::path(dir_) / "out";
  o = cli({"compress", "--model", tiny(), "--recipe", magnitude_, "--out", (out / "x").string()});
  ASSERT_EQ(o.code, 0) << o.err;
  const auto compressed = snapshot(out);
  o = cli({"export", "hf", "--model", (out / "x").string(), "--out", out.string(), "--overwrite"});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("which this run reads"));
  EXPECT_EQ(snapshot(out), compressed);
  // Pareto's own outputs are still replaced with --overwrite: the compressed folder, and an export.
  o = cli({"compress", "--model", tiny(), "--recipe", magnitude_, "--out", (out / "x").string(), "--overwrite"});
  EXPECT_EQ(o.code, 0) << o.err;
  const fs::path hf = fs::path(dir_) / "hf";
  for (int i = 0; i < 2; ++i) {
    o = cli({"export", "hf", "--model", (out / "x").string(), "--out", hf.string(), "--overwrite"});
    EXPECT_EQ(o.code, 0) << o.err;
  }
  EXPECT_TRUE(isParetoOutput(hf.string()));
}

// A compress of `out` that is calibrating (a long decode calibration) once this returns; its stderr in `fd`.
// Without a terminal its progress comes as plain lines, which is how the test knows.
test::Child startCalibrating(const std::string& recipe, const std::string& model, const std::string& out, int& fd) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  test::Child c = test::spawnCli({"--no-record", "compress", "--model", model, "--recipe", recipe, "--out", out},
                                 fds[1], [] {});
  ::close(fds[1]);
  fd = fds[0];
  const std::string started = test::readUntil(fd, "decode calibration", 300);
  EXPECT_THAT(started, AllOf(HasSubstr("pareto-cli: ["), HasSubstr("decode calibration")))
      << "no plain progress lines without a terminal";
  return c;
}

// Sends `sig` and checks the run ends as a cancel: its exit code, the message, nothing left in the folder.
void expectCancelledBy(const test::Child& c, int fd, int sig, int code, const std::string& name,
                       const std::string& dir) {
  ::kill(c.pid, sig);
  const std::string after = test::readUntil(fd, "", 300);
  ::close(fd);
  EXPECT_EQ(test::waitExit(c.pid, 60), code) << after;
  EXPECT_THAT(after, HasSubstr("pareto-cli: cancelled (" + name + ")"));
  EXPECT_EQ(entries(dir), (std::vector<std::string>{"decode.json", "magnitude.json"}));
}

// Two runs with one --out: the second is refused at once, naming the first; SIGTERM then cancels the first
// like Ctrl-C (exit 143, nothing written, no lock or temporary folder left).
TEST_F(CliSafety, ASecondRunToTheSameOutputIsRefusedAndSigtermCancels) {
  const std::string out = (fs::path(dir_) / "out").string();
  int fd = -1;
  const test::Child first = startCalibrating(decodeRecipe(15000), tiny(), out, fd);
  ASSERT_GT(first.pid, 0);
  for (bool overwrite : {false, true}) {
    std::vector<std::string> args = {"compress", "--model", tiny(), "--recipe", magnitude_, "--out", out + "/"};
    if (overwrite) args.push_back("--overwrite");
    const auto t0 = std::chrono::steady_clock::now();
    Outcome second = cli(args);
    EXPECT_EQ(second.code, 2) << second.err;
    EXPECT_THAT(second.err, AllOf(HasSubstr("another Pareto run is writing this folder"), HasSubstr("compress"),
                                  HasSubstr("pid " + std::to_string(first.pid))));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0)
        << "refused at once, before any work";
  }
  expectCancelledBy(first, fd, SIGTERM, 143, "SIGTERM", dir_);
}

TEST_F(CliSafety, SighupCancelsLikeCtrlC) {
  int fd = -1;
  const test::Child c = startCalibrating(decodeRecipe(15000), tiny(), dir_ + "/out", fd);
  ASSERT_GT(c.pid, 0);
  expectCancelledBy(c, fd, SIGHUP, 129, "SIGHUP", dir_);
}

TEST_F(CliSafety, ATrailingSlashIsTheSameFolder) {
  Outcome o = cli({"compress", "--model", tiny(), "--recipe", magnitude_, "--out", dir_ + "/x/", "--quiet"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.err, "") << "--quiet prints no progress";
  EXPECT_TRUE(fs::exists(dir_ + "/x/pareto.json"));
  EXPECT_EQ(entries(dir_), (std::vector<std::string>{"magnitude.json", "x"}));
  o = cli({"compress", "--model", tiny(), "--recipe", magnitude_, "--out", dir_ + "/x//", "--overwrite", "--quiet"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(entries(dir_), (std::vector<std::string>{"magnitude.json", "x"}));
}

// A rerun of one recipe writes byte-identical weights (the run id lives only in the manifest).
TEST_F(CliSafety, TheManifestNamesTheRunAndTheWeightsStayReproducible) {
  for (const char* name : {"a", "b"}) {
    Outcome o = cli({"compress", "--model", tiny(), "--recipe", magnitude_, "--out", dir_ + "/" + name});
    ASSERT_EQ(o.code, 0) << o.err;
  }
  const nlohmann::json a = nlohmann::json::parse(std::ifstream(dir_ + "/a/pareto.json"));
  const nlohmann::json b = nlohmann::json::parse(std::ifstream(dir_ + "/b/pareto.json"));
  EXPECT_NE(a.at(kOutputRunKey), b.at(kOutputRunKey));
  EXPECT_THAT(a.at("producer").get<std::string>(), HasSubstr("pareto 0.1.0"));
  EXPECT_EQ(fileText(dir_ + "/a/model.safetensors"), fileText(dir_ + "/b/model.safetensors"));
}

// A result that cannot be written is a failure: stdout on a full device, and a result file on a full disk
// (no short file left under its name).
TEST_F(CliSafety, LostWritesFailTheCommand) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"inspect", "--model", tiny(), "--json"},
        std::vector<std::string>{"tokenize", "--tokenizer", tiny(), "--text", "Hello", "--json"},
        std::vector<std::string>{"generate", "--model", tiny(), "--prompt", "The", "--max-new-tokens", "2"},
        std::vector<std::string>{"runs", "list", "--db", dir_ + "/runs.db"}}) {
    Outcome o = cli(args, "/dev/full");
    EXPECT_EQ(o.code, 1) << args[0] << ": " << o.err;
    EXPECT_THAT(o.err, HasSubstr("standard output: write failed (No space left on device)")) << args[0];
  }
  const std::string output = dir_ + "/bench.json";
  std::ofstream(output) << "{\"previous\": true}\n";
  Outcome o = cli({"bench", "decode", "--synthetic", "tiny-llama", "--format", "dense", "--device", "cpu",
                   "--context", "4", "--new-tokens", "2", "--runs", "1", "--output", output},
                  "/dev/null", [] {
                    rlimit limit{64, 64};   // smaller than any result
                    ::setrlimit(RLIMIT_FSIZE, &limit);
                    ::signal(SIGXFSZ, SIG_IGN);
                  });
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_THAT(o.err, AllOf(HasSubstr("bench.json: write failed"), HasSubstr("File too large")));
  EXPECT_EQ(fileText(output), "{\"previous\": true}\n");
  // runs export --csv on a full disk: no short CSV under the name.
  const std::string db = dir_ + "/export.db";
  o = cli({"--db", db, "perplexity", "--model", tiny(), "--text", test::sharedPath("data/heldout-prose.txt"),
           "--max-windows", "1"},
          "/dev/null", {}, 300, /*record=*/true);
  ASSERT_EQ(o.code, 0) << o.err;
  // The same run 400 times makes a CSV far above the limit, which still lets SQLite map its 32 KiB -shm file.
  std::vector<std::string> exportArgs = {"--db", db, "runs", "export", "--csv", dir_ + "/runs.csv"};
  for (int i = 0; i < 400; ++i) exportArgs.push_back("1");
  o = cli(exportArgs, "/dev/null", [] {
    rlimit limit{64 << 10, 64 << 10};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    ::signal(SIGXFSZ, SIG_IGN);
  });
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_THAT(o.err, AllOf(HasSubstr("runs.csv: write failed"), HasSubstr("File too large")));
  EXPECT_FALSE(fs::exists(dir_ + "/runs.csv"));
  o = cli({"--db", db, "runs", "export", "1", "--csv", dir_ + "/runs.csv"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(fileText(dir_ + "/runs.csv"), HasSubstr("metric"));
}

// A model folder whose weights hold a NaN is refused by every command that loads it, naming the tensor;
// a compressed folder with a NaN scale is refused by export hf.
TEST_F(CliSafety, NonFiniteWeightsAreRefusedAtLoad) {
  const fs::path bad = fs::path(dir_) / "nan-model";
  copyModel(bad);
  const std::string poisoned = "model.layers.1.mlp.down_proj.weight";
  auto poison = [](const fs::path& file, const std::string& name) {
    Checkpoint ckpt = Checkpoint::open(file.parent_path().string());
    NamedTensors tensors;
    std::map<std::string, std::string> metadata;
    SafetensorsFile original(file.string());
    metadata = original.metadata();
    for (const TensorEntry* e : ckpt.tensors()) {
      at::Tensor t = readTensor(*e).clone();
      if (e->name == name) t.view(-1)[3] = std::numeric_limits<float>::quiet_NaN();
      tensors.emplace_back(e->name, t);
    }
    writeSafetensors(file.string() + ".new", tensors, metadata);
    fs::rename(file.string() + ".new", file);
  };
  poison(bad / "model.safetensors", poisoned);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"perplexity", "--model", bad.string(), "--text",
                                 test::sharedPath("data/heldout-prose.txt"), "--max-windows", "1"},
        std::vector<std::string>{"generate", "--model", bad.string(), "--prompt", "The", "--max-new-tokens", "4"}}) {
    Outcome o = cli(args);
    EXPECT_EQ(o.code, 2) << args[0] << ": " << o.err;
    EXPECT_THAT(o.err, AllOf(HasSubstr("tensor " + poisoned), HasSubstr("1 NaN or infinite value")));
  }
  const std::string recipe = (fs::path(dir_) / "int4.json").string();
  std::ofstream(recipe) << R"({"quantize": {"method": "rtn", "bits": 4, "granularity": "group", "group_size": 32}})";
  Outcome o = cli({"compress", "--model", tiny(), "--recipe", recipe, "--out", dir_ + "/q4"});
  ASSERT_EQ(o.code, 0) << o.err;
  poison(fs::path(dir_) / "q4" / "model.safetensors", "model.layers.0.self_attn.q_proj.weight.qscales");
  o = cli({"export", "hf", "--model", dir_ + "/q4", "--out", dir_ + "/q4-hf"});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_THAT(o.err, AllOf(HasSubstr("q_proj.weight.qscales"), HasSubstr("NaN or infinite")));
  EXPECT_FALSE(fs::exists(dir_ + "/q4-hf"));
}

// Options past what the model or the machine can hold are refused before any allocation, naming the stage.
TEST_F(CliSafety, OptionsAreBoundedByWhatTheModelHolds) {
  Outcome o = cli({"generate", "--model", tiny(), "--prompt", "The", "--max-new-tokens", "9223372036854775807"});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_THAT(o.err, AllOf(HasSubstr("max_position_embeddings"), HasSubstr("lower --max-new-tokens")));
  o = cli({"bench", "decode", "--synthetic", "tiny-llama", "--device", "cpu", "--layers", "1000000"});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("--layers 1000000"));
  o = cli({"bench", "decode", "--synthetic", "tiny-llama", "--device", "cpu", "--context", "1000000000"});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("positions"));
  o = cli({"analyze", "drift", "--dense", tiny(), "--model", tiny(), "--prompts",
           test::sharedPath("data/prompts-prose.txt"), "--steps", "1000000000"});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_THAT(o.err, AllOf(HasSubstr("activation drift"), HasSubstr("lower steps")));
  o = cli({"fidelity", "--dense", tiny(), "--model", tiny(), "--prompts", test::sharedPath("data/prompts-prose.txt"),
           "--max-new-tokens", "1000000000"});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("decode fidelity"));
  // Work larger than the machine's memory is refused by its estimate, with the stage and what to lower.
  try {
    requireHostMemory("perplexity", 1e18, "lower --batch");
    FAIL() << "an exabyte fitted";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.stage(), "perplexity");
    EXPECT_THAT(e.what(), AllOf(HasSubstr("perplexity: needs about"), HasSubstr("lower --batch")));
  }
  EXPECT_NO_THROW(requireHostMemory("perplexity", 1e6, ""));
}

// Values from a stranger's config.json reach the terminal with their control characters escaped.
TEST_F(CliSafety, EscapeSequencesFromFilesNeverReachTheTerminal) {
  const fs::path model = fs::path(dir_) / "escapes";
  copyModel(model);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(model / "config.json"));
  config["architectures"] = {"Evil\u001b[2J\u001b[31mForCausalLM\r\u009b"};
  std::ofstream(model / "config.json") << config.dump();
  Outcome o = cli({"inspect", "--model", model.string()});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_THAT(o.err, AllOf(HasSubstr("Evil\\x1b[2J\\x1b[31mForCausalLM\\x0d\\x9b"), Not(HasSubstr("\x1b")),
                           Not(HasSubstr("\r")), Not(HasSubstr("\xc2\x9b"))));
}

}  // namespace
}  // namespace pareto

namespace pareto {
namespace {

// The layers an interrupted compress to `out` has finished (0 while none).
int64_t layersDone(const fs::path& out) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("." + out.filename().string() + ".partial-", 0) != 0) continue;
    std::ifstream state(entry.path() / kResumeStateFile);
    if (!state) continue;
    try {
      return nlohmann::json::parse(state).at("layers_done").get<int64_t>();
    } catch (const std::exception&) {
      return 0;   // caught between the write and the rename of a fresh state file cannot happen; a torn read can
    }
  }
  return 0;
}

// SIGKILL in the middle of a compress leaves its finished layers; a run without --resume is refused rather than
// throwing them away, and --resume finishes with the weights an uninterrupted run writes, byte for byte.
TEST_F(CliSafety, AKilledCompressResumesToTheSameWeights) {
  const std::string model = test::sharedPath("models/ref-small");
  const std::string recipe = (fs::path(dir_) / "gptq.json").string();
  std::ofstream(recipe) << R"({"calibration": {"source": "text", "text": ")" +
                               test::sharedPath("data/heldout-prose.txt") + R"(", "tokens": 2048, "window": 256},
                              "prune": {"method": "sparsegpt", "pattern": "2:4"},
                              "quantize": {"method": "gptq", "bits": 4, "group_size": 64}})";
  Outcome whole = cli({"compress", "--model", model, "--recipe", recipe, "--out", dir_ + "/whole"});
  ASSERT_EQ(whole.code, 0) << whole.err;

  const fs::path out = fs::path(dir_) / "resumed";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  test::Child c = test::spawnCli({"--no-record", "compress", "--model", model, "--recipe", recipe, "--out", out.string()},
                                 fds[1], [] {});
  ::close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  int64_t done = 0;
  while ((done = layersDone(out)) < 3 && std::chrono::steady_clock::now() < deadline) ::usleep(5 * 1000);
  ::kill(c.pid, SIGKILL);
  EXPECT_EQ(test::waitExit(c.pid, 60), 1000 + SIGKILL);
  ::close(fds[0]);
  ASSERT_GE(done, 3) << "the run ended before three layers were done";
  ASSERT_LT(layersDone(out), 8) << "the run finished before it was killed: nothing to resume";
  EXPECT_FALSE(fs::exists(out));

  Outcome fresh = cli({"compress", "--model", model, "--recipe", recipe, "--out", out.string()});
  EXPECT_EQ(fresh.code, 2) << fresh.err;
  EXPECT_THAT(fresh.err, AllOf(HasSubstr("finished part of an interrupted run"), HasSubstr("--resume")));
  Outcome other = cli({"compress", "--model", model, "--recipe", magnitude_, "--out", out.string(), "--resume"});
  EXPECT_EQ(other.code, 2) << other.err;
  EXPECT_THAT(other.err, HasSubstr("another recipe"));

  Outcome resumed = cli({"compress", "--model", model, "--recipe", recipe, "--out", out.string(), "--resume"});
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(fileText(out / "model.safetensors"), fileText(dir_ + "/whole/model.safetensors"));
  const nlohmann::json a = nlohmann::json::parse(std::ifstream(dir_ + "/whole/pareto.json"));
  const nlohmann::json b = nlohmann::json::parse(std::ifstream(out / "pareto.json"));
  EXPECT_EQ(a.at("modules").size(), b.at("modules").size());
  EXPECT_EQ(a.at("bytes"), b.at("bytes"));
  EXPECT_EQ(entries(dir_), (std::vector<std::string>{"gptq.json", "magnitude.json", "resumed", "whole"}));

  Outcome nothing = cli({"compress", "--model", model, "--recipe", recipe, "--out", dir_ + "/none", "--resume"});
  EXPECT_EQ(nothing.code, 2) << nothing.err;
  EXPECT_THAT(nothing.err, HasSubstr("no interrupted run to resume"));
}

}  // namespace
}  // namespace pareto
