// Faults during long jobs, and model folders whose parts disagree: running out of memory in a stage, a full disk
// while the output folder is written, Ctrl-C in pareto-cli, a Hessian that will not factor. In every case the
// user gets an error naming what failed (stage, file, module), no half-written output appears, an existing
// result is left as it was, and the process can go on. docs/reliability.md lists which test covers which fault.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ChildProcess.h"
#include "FolderContents.h"
#include "InputErrors.h"
#include "SharedData.h"
#include "TestRuntime.h"
#include "compress/CompressJob.h"
#include "compress/CompressResume.h"
#include "compress/Gptq.h"
#include "compress/Recipe.h"
#include "compress/SparseGpt.h"
#include "compress/Spqr.h"
#include "model/Generation.h"
#include "model/LoadedModel.h"
#include "model/OutOfMemory.h"
#include "util/Error.h"
#include "util/Json.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using test::Child;
using test::entries;
using test::fileText;
using test::snapshot;
using test::readUntil;
using test::spawnCli;
using test::waitExit;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

void writeText(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << p;
}

// A model folder that reuses ref-tiny's weights (linked) with its own config.json and tokenizer.json.
std::string modelVariant(const std::string& name, const std::function<void(nlohmann::json&)>& editConfig) {
  const std::string dir = test::scratchDir(name);
  const std::string src = test::sharedPath("models/ref-tiny");
  fs::create_symlink(fs::absolute(src + "/model.safetensors"), dir + "/model.safetensors");
  fs::copy_file(src + "/tokenizer.json", dir + "/tokenizer.json");
  nlohmann::json cfg = readJsonFile(src + "/config.json");
  editConfig(cfg);
  std::ofstream(dir + "/config.json") << cfg.dump(1);
  return dir;
}

using test::inputErrorOf;

// --- inputs that disagree with each other ---------------------------------------------------------------------

TEST(FaultsModelFolder, VocabSizeMustMatchTheEmbeddingRows) {
  PARETO_REQUIRE_SHARED();
  const std::string dir = modelVariant("faults-vocab", [](nlohmann::json& c) { c["vocab_size"] = 9000; });
  EXPECT_THAT(inputErrorOf([&] { loadModel(dir, test::testRuntime()); }),
              AllOf(HasSubstr("model.embed_tokens.weight"), HasSubstr("[8192, 192]"), HasSubstr("[9000, 192]")));
}

TEST(FaultsModelFolder, TokenizerLargerThanTheVocabularyIsRefused) {
  PARETO_REQUIRE_SHARED();
  // 8000 rows are fewer than the 8192 tokens the tokenizer can produce.
  const std::string dir = modelVariant("faults-tokenizer", [](nlohmann::json& c) { c["vocab_size"] = 8000; });
  EXPECT_THAT(inputErrorOf([&] { loadModel(dir, test::testRuntime()); }),
              AllOf(HasSubstr(dir + "/tokenizer.json"), HasSubstr("8192 tokens"), HasSubstr("vocab_size 8000")));
}

TEST(FaultsRecipe, DeeplyNestedRecipeIsRefused) {
  const std::string dir = test::scratchDir("faults-recipe");
  writeText(dir + "/deep.json", R"({"prune": )" + std::string(100000, '[') + std::string(100000, ']') + "}");
  EXPECT_THAT(inputErrorOf([&] { Recipe::fromFile(dir + "/deep.json"); }),
              AllOf(HasSubstr(dir + "/deep.json"), HasSubstr("nested deeper than 64")));
}

// --- out of memory -----------------------------------------------------------------------------------------------

// What the CUDA caching allocator throws (the message of LibTorch 1.13; 2.x words the tail differently).
[[noreturn]] void throwCudaOutOfMemory() {
  TORCH_CHECK_WITH(OutOfMemoryError, false,
                   "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity; 75.02 GiB "
                   "already allocated; 1.50 GiB free; 76.00 GiB reserved in total by PyTorch)");
  std::abort();   // not reached: TORCH_CHECK_WITH(false) always throws
}

TEST(FaultsOutOfMemory, RealAllocationFailureNamesStageAndSizeAndTheProcessGoesOn) {
  // 2^48 floats = 1 PiB: beyond any machine and beyond the 128 TiB user address space, so it fails whatever
  // the kernel's overcommit policy.
  try {
    guardMemory("calibration", "lower --batch", [] { return at::empty({int64_t{1} << 48}, at::kFloat); });
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.stage(), "calibration");
    EXPECT_EQ(e.requested(), "1.00 PiB");
    EXPECT_THAT(e.what(), AllOf(HasSubstr("calibration: out of memory asking for 1.00 PiB; lower --batch"),
                                HasSubstr("can't allocate memory")));
  }
  // Nothing of the failed stage is held: ordinary work continues.
  EXPECT_EQ(at::ones({1000}).sum().item<double>(), 1000.0);
  EXPECT_EQ(guardMemory("calibration", "", [] { return 7; }), 7);
}

TEST(FaultsOutOfMemory, CudaMessagesNestedStagesAndOtherErrors) {
  try {
    guardMemory("compression (sequential pass)", "", throwCudaOutOfMemory);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.requested(), "2.00 GiB");
    EXPECT_THAT(e.what(), AllOf(HasSubstr("compression (sequential pass): out of memory asking for 2.00 GiB"),
                                HasSubstr("GPU 0")));
  }
  // Generation inside decode calibration: both stages are named.
  try {
    guardMemory("calibration", "", [] { guardMemory("generation", "fewer prompts", throwCudaOutOfMemory); });
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.stage(), "calibration / generation");
    EXPECT_THAT(e.what(), HasSubstr("calibration / generation: out of memory asking for 2.00 GiB; fewer prompts"));
  }
  try {
    guardMemory("writing", "", [] { throw std::bad_alloc(); });
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(e.what(), HasSubstr("writing: out of memory (the allocator did not say how much"));
  }
  // Anything else passes through untouched, type included.
  EXPECT_THROW(guardMemory("calibration", "", [] { TORCH_CHECK(false, "expected a 2-D weight"); }), c10::Error);
  EXPECT_THROW(guardMemory("calibration", "", [] { return at::ones({2}).view({3}); }), std::runtime_error);
  EXPECT_THROW(guardMemory("calibration", "", [] { throw InputError("bad"); }), InputError);
  EXPECT_THROW(guardMemory("calibration", "", [] { throw Cancelled(); }), Cancelled);
}

class FaultsCompress : public ::testing::Test {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    dir_ = test::scratchDir("faults-compress");
  }
  std::string recipe(const std::string& name, const std::string& json) {
    writeText(dir_ + "/" + name, json);
    return dir_ + "/" + name;
  }
  std::string decodeRecipe(int tokens, int maxNewTokens) {
    return recipe("decode.json", R"({"calibration": {"source": "decode", "prompts": ")" +
                                     test::sharedPath("data/prompts-prose.txt") + R"(", "tokens": )" +
                                     std::to_string(tokens) + R"(, "max_new_tokens": )" +
                                     std::to_string(maxNewTokens) + R"(},
                                     "prune": {"method": "sparsegpt", "pattern": "2:4"}})");
  }
  CompressOptions options(const std::string& recipePath, const std::string& out) {
    CompressOptions o;
    o.modelDir = test::sharedPath("models/ref-tiny");
    o.recipePath = recipePath;
    o.outDir = dir_ + "/" + out;
    o.runtime = test::testRuntime();
    return o;
  }
  std::string dir_;
};

// An allocation failure raised inside a stage (through its progress report, the one hook into its inner loop)
// is named by that stage and leaves no output. Calibration fails before any layer is done and leaves nothing;
// the pass reports after its first finished layer, which is kept for --resume, and the next run in the same
// process resumes from it and succeeds.
TEST_F(FaultsCompress, OutOfMemoryInEachStageNamesItAndLeavesNothing) {
  const std::string r = decodeRecipe(256, 32);
  struct Case {
    const char* progressStage;  // the stage whose progress report "allocates"
    const char* named;          // how the error names it
  };
  for (const Case& c : {Case{"decode calibration", "calibration: out of memory asking for 2.00 GiB"},
                        Case{"sequential pass", "compression (sequential pass): out of memory asking for 2.00 GiB"}}) {
    auto progress = [&](const ProgressUpdate& u) {
      if (u.stage == c.progressStage) throwCudaOutOfMemory();
    };
    try {
      runCompress(options(r, "out"), progress);
      FAIL() << "expected OutOfMemory in " << c.progressStage;
    } catch (const OutOfMemory& e) {
      EXPECT_THAT(e.what(), HasSubstr(c.named));
    }
    EXPECT_FALSE(fs::exists(dir_ + "/out")) << c.progressStage;
    EXPECT_EQ(interruptedCompress(dir_ + "/out").layersDone, std::string(c.progressStage) == "sequential pass" ? 1 : 0)
        << c.progressStage;
  }
  CompressOptions resume = options(r, "out");
  resume.resume = true;
  CompressReport ok = runCompress(resume);
  EXPECT_EQ(entries(dir_), (std::vector<std::string>{"decode.json", "out"}));
  EXPECT_TRUE(fs::exists(dir_ + "/out/pareto.json"));
  EXPECT_FALSE(ok.modules.empty());
}

TEST(FaultsOutOfMemory, GenerationThatCannotAllocateItsCacheNamesTheStage) {
  PARETO_REQUIRE_SHARED();
  // The batch needs a padding mask of 2^16 x 2^24 bytes (1 TiB) and a KV cache of 256 TiB. With overcommit
  // mode 1 the kernel would hand out the 1 TiB and the zero fill would invoke the OOM killer instead.
  if (fileText("/proc/sys/vm/overcommit_memory").rfind('1', 0) == 0)
    GTEST_SKIP() << "vm.overcommit_memory=1: allocations never fail here, the OOM killer acts instead";
  const std::string dir = modelVariant("faults-generation", [](nlohmann::json& c) {
    c["max_position_embeddings"] = int64_t{1} << 24;
  });
  LoadedModel m = loadModel(dir, test::testRuntime());
  const std::vector<std::vector<TokenId>> prompts(size_t{1} << 16, std::vector<TokenId>{0});
  GenerationOptions o;
  o.maxNewTokens = (int64_t{1} << 24) - 1;
  try {
    generateBatch(*m.model, prompts, o);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.stage(), "generation");
    EXPECT_THAT(e.what(), AllOf(HasSubstr("generation: out of memory asking for"), HasSubstr("TiB"),
                                HasSubstr("lower the batch")));
  }
  // The model still generates.
  EXPECT_EQ(generate(*m.model, m.promptIds("The"), GenerationOptions{4, {}, {}}).size(), 4u);
}

// --- a Hessian that will not factor ------------------------------------------------------------------------------

TEST(FaultsHessian, EverySolverNamesTheModuleInsteadOfWritingNaN) {
  const std::string module = "model.layers.3.mlp.down_proj";
  const at::Tensor w = at::randn({16, 64}, at::kFloat);
  const at::Tensor nan = at::full({64, 64}, std::nan(""), at::kFloat);
  const at::Tensor negative = -at::eye(64, at::kFloat);   // negative definite: no damping makes it factor
  auto sparsegpt = [&](const at::Tensor& h) { sparseGptPrune(w, h, SparsityPattern::nm(2, 4), {}, module); };
  auto gptq = [&](const at::Tensor& h) { gptqQuantize(w, h, QuantSpec::group(4, 16), {}, module); };
  auto spqr = [&](const at::Tensor& h) {
    SpqrOptions o;
    o.groupSize = 16;
    o.outlierRatio = 0.01;
    spqrQuantize(w, h, o, module);
  };
  const std::vector<std::pair<const char*, std::function<void(const at::Tensor&)>>> solvers = {
      {"sparsegpt", sparsegpt}, {"gptq", gptq}, {"spqr", spqr}};
  for (const auto& [name, solve] : solvers) {
    try {
      solve(nan);
      ADD_FAILURE() << name << ": expected an error for a NaN Hessian";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr(module), HasSubstr("NaN"))) << name;
    }
    try {
      solve(negative);
      ADD_FAILURE() << name << ": expected an error for a negative definite Hessian";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr(module), HasSubstr("not positive definite"))) << name;
    }
  }
}

// --- pareto-cli as a child process: full disk, Ctrl-C -------------------------------------------------------------

// A full disk while the output folder is written: the child's file size limit (RLIMIT_FSIZE, with SIGXFSZ
// ignored so write() fails with EFBIG) stops the first finished layer's file part way. The previous output must
// survive byte for byte and no temporary folder may remain (no layer was finished).
TEST_F(FaultsCompress, FullDiskWhileWritingKeepsThePreviousOutput) {
  const std::string r = recipe("m.json", R"({"prune": {"method": "magnitude", "pattern": "2:4"}})");
  runCompress(options(r, "out"));
  const auto before = snapshot(dir_ + "/out");
  ASSERT_TRUE(before.count("model.safetensors"));

  int pipeFds[2];
  ASSERT_EQ(::pipe(pipeFds), 0);
  Child c = spawnCli({"compress", "--model", test::sharedPath("models/ref-tiny"), "--recipe", r, "--out",
                      dir_ + "/out", "--overwrite"},
                     pipeFds[1], [] {
                       rlimit limit{1 << 17, 1 << 17};   // 128 KiB per file; a layer takes ~0.5 MiB packed
                       ::setrlimit(RLIMIT_FSIZE, &limit);
                       ::signal(SIGXFSZ, SIG_IGN);
                     });
  ASSERT_GT(c.pid, 0);
  ::close(pipeFds[1]);
  const std::string err = readUntil(pipeFds[0], "", 300);
  ::close(pipeFds[0]);
  EXPECT_EQ(waitExit(c.pid, 60), 1) << err;
  EXPECT_THAT(err, AllOf(HasSubstr("resume/layer-00000.safetensors.partial"), HasSubstr("File too large")));
  EXPECT_EQ(snapshot(dir_ + "/out"), before);
  EXPECT_EQ(entries(dir_), (std::vector<std::string>{"m.json", "out"}));
}

// Ctrl-C during a pareto-cli compress: the child runs on a pseudo-terminal (so it draws progress, which tells
// us when calibration is under way), gets SIGINT, and must stop at the next batch with exit 130 and no output.
TEST_F(FaultsCompress, CtrlCCancelsCompressWithExit130AndNothingWritten) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const std::string slaveName = ::ptsname(master);
  const int slave = ::open(slaveName.c_str(), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  // 15000 decode tokens (118 prompts x 128) take many batches, so the job is still calibrating when SIGINT comes.
  Child c = spawnCli({"compress", "--model", test::sharedPath("models/ref-tiny"), "--recipe", decodeRecipe(15000, 128),
                      "--out", dir_ + "/out"},
                     slave, [] { ::setsid(); });
  ASSERT_GT(c.pid, 0);
  ::close(slave);
  const std::string before = readUntil(master, "decode calibration", 300);
  ASSERT_THAT(before, HasSubstr("decode calibration")) << "the job never reported calibration progress";
  const auto sent = std::chrono::steady_clock::now();
  ::kill(c.pid, SIGINT);
  const std::string after = readUntil(master, "", 300);
  ::close(master);
  const int code = waitExit(c.pid, 60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  EXPECT_EQ(code, 130) << after;
  EXPECT_THAT(after, HasSubstr("pareto-cli: cancelled"));
  EXPECT_LT(seconds, 120.0) << "cancellation is checked between batches";
  EXPECT_EQ(entries(dir_), (std::vector<std::string>{"decode.json"}));
}

}  // namespace
}  // namespace pareto
