// Calibration sources and the sequential pass on the reference model.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <gmock/gmock.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include "InputErrors.h"
#include "SharedData.h"
#include "TestRuntime.h"
#include "calib/DecodeCalibration.h"
#include "calib/SequentialPass.h"
#include "calib/TextCalibration.h"
#include "model/LoadedModel.h"
#include "util/Error.h"

namespace pareto {
namespace {

class Calibration : public ::testing::Test {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    m_ = std::make_unique<LoadedModel>(loadModel(test::sharedPath("models/ref-tiny"), test::testRuntime()));
  }
  DecodeCalibrationOptions decodeOptions(int64_t tokens, int64_t maxNew) const {
    DecodeCalibrationOptions o;
    o.tokens = tokens;
    o.maxNewTokens = maxNew;
    o.eosTokenIds = m_->eosTokenIds;
    o.bosTokenId = m_->config.bosTokenId;
    o.batch = 3;
    return o;
  }
  std::unique_ptr<LoadedModel> m_;
};

TEST_F(Calibration, TextWindowsCountExactlyAndAreSeeded) {
  TextCalibrationOptions o;
  o.window = 64;
  o.tokens = 300;   // 4 full windows and one of 44
  o.seed = 5;
  CalibrationSet a = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  EXPECT_EQ(a.source, "text");
  ASSERT_EQ(a.sequences.size(), 5u);
  EXPECT_EQ(a.countedTokens(), 300);
  EXPECT_EQ(a.totalTokens(), 300);
  EXPECT_EQ(a.sequences.back().ids.size(), 44u);
  CalibrationSet b = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  EXPECT_EQ(a.sequences[2].ids, b.sequences[2].ids);
  o.seed = 6;
  CalibrationSet c = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  EXPECT_NE(a.sequences[0].ids, c.sequences[0].ids);
  o.tokens = 100000000;
  EXPECT_THROW(textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o), InputError);
}

TEST_F(Calibration, DecodeSequencesWeightOnlyContinuations) {
  auto prompts = readPrompts(test::sharedPath("data/prompts-prose.txt"));
  CalibrationSet set = decodeCalibration(*m_->model, *m_->tokenizer, prompts, decodeOptions(50, 12));
  EXPECT_EQ(set.source, "decode");
  EXPECT_EQ(set.countedTokens(), 50);
  for (const auto& s : set.sequences) {
    ASSERT_EQ(s.ids.size(), s.weights.size());
    EXPECT_EQ(s.ids.front(), *m_->config.bosTokenId);
    // Weights: a run of zeros (BOS + prompt) then ones (the continuation).
    auto firstOne = std::find(s.weights.begin(), s.weights.end(), 1.0f);
    ASSERT_NE(firstOne, s.weights.end());
    EXPECT_TRUE(std::all_of(s.weights.begin(), firstOne, [](float w) { return w == 0.0f; }));
    EXPECT_TRUE(std::all_of(firstOne, s.weights.end(), [](float w) { return w == 1.0f; }));
    EXPECT_LE(s.weights.end() - firstOne, 12);
    // The continuation is the dense model's greedy continuation of the prompt.
    std::vector<TokenId> prompt(s.ids.begin(), s.ids.begin() + (firstOne - s.weights.begin()));
    std::vector<TokenId> cont(s.ids.begin() + (firstOne - s.weights.begin()), s.ids.end());
    GenerationOptions g;
    g.maxNewTokens = static_cast<int64_t>(cont.size());
    EXPECT_EQ(generate(*m_->model, prompt, g), cont);
  }
}

// Continuations generated elsewhere and read from a file give the set decode calibration makes itself: the same
// prompts in the same seeded order, the same greedy tokens, the same trimming.
TEST_F(Calibration, ContinuationsFromAFileGiveTheDecodeCalibrationSet) {
  const auto prompts = readPrompts(test::sharedPath("data/prompts-prose.txt"));
  const DecodeCalibrationOptions o = decodeOptions(50, 12);
  const std::vector<PromptContinuation> generated = generateContinuations(*m_->model, *m_->tokenizer, prompts, o);
  ASSERT_EQ(generated.size(), prompts.size());
  const std::string file = test::scratchDir("continuations") + "/c.jsonl";
  writeContinuationsFile(file, generated, prompts);
  const std::vector<PromptContinuation> read = readContinuationsFile(file, m_->config.vocabSize);
  ASSERT_EQ(read.size(), generated.size());
  EXPECT_EQ(read[7].continuation, generated[7].continuation);
  const CalibrationSet fromFile = continuationCalibration(read, o, file);
  const CalibrationSet direct = decodeCalibration(*m_->model, *m_->tokenizer, prompts, o);
  ASSERT_EQ(fromFile.sequences.size(), direct.sequences.size());
  for (size_t i = 0; i < direct.sequences.size(); ++i) {
    EXPECT_EQ(fromFile.sequences[i].ids, direct.sequences[i].ids) << i;
    EXPECT_EQ(fromFile.sequences[i].weights, direct.sequences[i].weights) << i;
  }
  DecodeCalibrationOptions more = o;
  more.tokens = 1000000;
  try {
    continuationCalibration(read, more, file);
    FAIL() << "a budget beyond the file was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("c.jsonl: the " + std::to_string(read.size()) + " continuations hold only"));
  }
}

TEST(ContinuationsFile, LinesThatAreNotContinuationsOfThisModelAreRefusedByLine) {
  const std::string dir = test::scratchDir("continuations-bad");
  auto refused = [&](const std::string& text, const std::string& expected) {
    const std::string path = dir + "/bad.jsonl";
    std::ofstream(path) << text;
    try {
      readContinuationsFile(path, 100);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(expected)) << text;
    }
  };
  refused("{\"prompt\": [1, 2], \"continuation\": [3]}\n\n{\"prompt\": [1], \"continuation\": [100]}\n",
          "bad.jsonl:3: \"continuation\" holds 100, not a token id of this model (0..99)");
  refused("{\"prompt\": [1]}\n", "bad.jsonl:1: expected {\"prompt\": [ids], \"continuation\": [ids]}");
  refused("{\"prompt\": [], \"continuation\": [1]}\n", "bad.jsonl:1: the prompt is empty");
  refused("{\"prompt\": [1.5], \"continuation\": [1]}\n", "not a token id");
  refused("[1, 2]\n", "bad.jsonl:1: expected");
  refused("{nope\n", "bad.jsonl:1");
  refused("\n  \n", "holds no continuation");
  std::ofstream(dir + "/ok.jsonl") << "{\"prompt\": [0, 5], \"continuation\": [7, 1], \"text\": \"anything\"}\n";
  const auto ok = readContinuationsFile(dir + "/ok.jsonl", 100);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].continuation, (std::vector<TokenId>{7, 1}));
}

// The teacher-forced shortcut: block 0's Hessians from the decode calibration set equal those accumulated from
// the activations of real KV-cache decode steps (prefill excluded).
TEST_F(Calibration, DecodeHessianEqualsRecordedDecodeSteps) {
  auto prompts = readPrompts(test::sharedPath("data/prompts-python.txt"));
  CalibrationSet set = decodeCalibration(*m_->model, *m_->tokenizer, prompts, decodeOptions(40, 10));
  LlamaModel& model = *m_->model;

  std::map<LinearGroup, HessianAccumulator> recorded;
  for (const auto& [group, linear] : model.layerLinears(0))
    if (!recorded.count(group)) recorded.emplace(group, HessianAccumulator(linear->inFeatures(), model.options().device));
  for (const auto& s : set.sequences) {
    const int64_t promptLen = std::find(s.weights.begin(), s.weights.end(), 1.0f) - s.weights.begin();
    KVCache cache = model.makeCache(1, static_cast<int64_t>(s.ids.size()));
    auto run = [&](int64_t from, int64_t len, bool record) {
      at::Tensor ids = at::tensor(std::vector<TokenId>(s.ids.begin() + from, s.ids.begin() + from + len),
                                  at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
      LlamaModel::Context ctx = model.prepare(1, len, &cache, nullptr);
      model.block(0, model.embed(ids), ctx, &cache, [&](int64_t, LinearGroup g, const at::Tensor& x) {
        if (record) recorded.at(g).add(x);
      });
      cache.advance(len);
    };
    run(0, promptLen, false);   // prefill: discarded
    for (int64_t t = promptLen; t < static_cast<int64_t>(s.ids.size()); ++t) run(t, 1, true);   // decode steps
  }

  int checked = 0;
  observeHessians(model, {&set}, [&](int64_t layer, LinearGroup g, const std::vector<std::string>&,
                                     const std::vector<const HessianAccumulator*>& h) {
    if (layer != 0) return;
    const HessianAccumulator& want = recorded.at(g);
    EXPECT_EQ(h[0]->samples(), want.samples()) << linearGroupName(g);
    EXPECT_EQ(h[0]->samples(), 40);
    double rel = ((h[0]->sum() - want.sum()).norm() / want.sum().norm()).item<double>();
    EXPECT_LT(rel, 1e-5) << linearGroupName(g);
    ++checked;
  });
  EXPECT_EQ(checked, 4);
}

at::Tensor logitsOf(const LlamaModel& model, const std::vector<TokenId>& ids) {
  return model.forward(at::tensor(ids, at::TensorOptions().dtype(at::kLong)).unsqueeze(0));
}

TEST_F(Calibration, SequentialPassIdentityKeepsLogitsAndVisitsEveryModule) {
  TextCalibrationOptions o;
  o.window = 32;
  o.tokens = 96;
  CalibrationSet set = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  auto probe = m_->promptIds("The history of the United States");
  at::Tensor before = logitsOf(*m_->model, probe);
  std::vector<std::string> visited;
  int progressCalls = 0;
  SequentialPassOptions opts;
  opts.batch = 2;
  opts.progress = [&](const ProgressUpdate&) { ++progressCalls; };
  runSequentialPass(*m_->model, set,
                    [&](const std::string& name, const at::Tensor& w, const HessianAccumulator& h) {
                      visited.push_back(name);
                      EXPECT_EQ(h.columns(), w.size(1)) << name;
                      EXPECT_EQ(h.samples(), 96) << name;
                      return w.clone();   // identity, but installed: forces the recompute path
                    },
                    opts);
  EXPECT_EQ(visited.size(), static_cast<size_t>(7 * m_->config.numLayers));
  EXPECT_EQ(visited.front(), "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(visited.back(), "model.layers.3.mlp.down_proj");
  EXPECT_EQ(progressCalls, m_->config.numLayers);
  at::Tensor after = logitsOf(*m_->model, probe);
  EXPECT_LT(((after - before).norm() / before.norm()).item<double>(), 1e-6);
}

TEST_F(Calibration, SequentialPassInstallsWeightsAndFeedsLaterBlocks) {
  TextCalibrationOptions o;
  o.window = 32;
  o.tokens = 64;
  CalibrationSet set = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  auto probe = m_->promptIds("Once upon a time");
  at::Tensor before = logitsOf(*m_->model, probe);
  // Zero layer 0's down projection: later blocks must see the changed activations (their Hessians change).
  std::map<std::string, double> traces;
  runSequentialPass(*m_->model, set, [&](const std::string& name, const at::Tensor& w, const HessianAccumulator& h) {
    traces[name] = h.sum().trace().item<double>();
    return name == "model.layers.0.mlp.down_proj" ? at::zeros_like(w) : at::Tensor();
  });
  at::Tensor after = logitsOf(*m_->model, probe);
  EXPECT_GT(((after - before).norm() / before.norm()).item<double>(), 1e-3);

  LoadedModel fresh = loadModel(test::sharedPath("models/ref-tiny"), test::testRuntime());
  std::map<std::string, double> denseTraces;
  runSequentialPass(*fresh.model, set, [&](const std::string& name, const at::Tensor&, const HessianAccumulator& h) {
    denseTraces[name] = h.sum().trace().item<double>();
    return at::Tensor();
  });
  EXPECT_DOUBLE_EQ(traces["model.layers.0.self_attn.q_proj"], denseTraces["model.layers.0.self_attn.q_proj"]);
  EXPECT_NE(traces["model.layers.1.self_attn.q_proj"], denseTraces["model.layers.1.self_attn.q_proj"]);
}

// Solving a block's linears on several threads (on CUDA: each on its own stream) installs exactly what solving
// them one after the other installs, and an error in one module stops the pass with that module's error.
TEST_F(Calibration, SequentialPassSolvesABlocksModulesConcurrentlyWithTheSameResult) {
  TextCalibrationOptions o;
  o.window = 32;
  o.tokens = 64;
  CalibrationSet set = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  auto probe = m_->promptIds("Once upon a time");
  // A result that depends on the module's Hessian, so that a block's installed weights change what the next
  // block observes.
  auto solver = [](const std::string&, const at::Tensor& w, const HessianAccumulator& h) {
    const at::Tensor hs = h.sum().to(w.scalar_type());
    return w - 0.05 * at::matmul(w, hs / hs.diagonal().mean());
  };
  SequentialPassOptions serial;
  serial.batch = 2;
  runSequentialPass(*m_->model, set, solver, serial);
  const at::Tensor expected = logitsOf(*m_->model, probe);

  LoadedModel fresh = loadModel(test::sharedPath("models/ref-tiny"), test::testRuntime());
  SequentialPassOptions concurrent = serial;
  concurrent.solverThreads = 4;
  std::mutex mutex;
  std::set<std::string> visited;
  runSequentialPass(*fresh.model, set,
                    [&](const std::string& name, const at::Tensor& w, const HessianAccumulator& h) {
                      {
                        const std::lock_guard<std::mutex> lock(mutex);
                        visited.insert(name);
                      }
                      return solver(name, w, h);
                    },
                    concurrent);
  EXPECT_EQ(visited.size(), static_cast<size_t>(7 * m_->config.numLayers));
  const at::Tensor got = logitsOf(*fresh.model, probe);
  EXPECT_LT(((got - expected).norm() / expected.norm()).item<double>(), 1e-6);

  LoadedModel third = loadModel(test::sharedPath("models/ref-tiny"), test::testRuntime());
  try {
    runSequentialPass(*third.model, set,
                      [&](const std::string& name, const at::Tensor& w, const HessianAccumulator& h) {
                        if (name == "model.layers.1.self_attn.k_proj") throw InputError(name + ": refused");
                        return solver(name, w, h);
                      },
                      concurrent);
    FAIL() << "the module's error was not rethrown";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "model.layers.1.self_attn.k_proj: refused");
  }
}

TEST_F(Calibration, SequentialPassStopsWhenCancelled) {
  TextCalibrationOptions o;
  o.window = 32;
  o.tokens = 32;
  CalibrationSet set = textCalibration(*m_->tokenizer, test::sharedPath("data/heldout-prose.txt"), o);
  CancelToken cancel;
  SequentialPassOptions opts;
  opts.cancel = &cancel;
  int layersDone = 0;
  opts.progress = [&](const ProgressUpdate&) {
    if (++layersDone == 2) cancel.cancel();
  };
  EXPECT_THROW(runSequentialPass(*m_->model, set, [](auto&&...) { return at::Tensor(); }, opts), Cancelled);
  EXPECT_EQ(layersDone, 2);
}

TEST(CalibrationPrompts, ReadPromptsSkipsBlankLinesAndRefusesEmptyFiles) {
  const std::string dir = test::scratchDir("prompts");
  std::ofstream(dir + "/p.txt") << "first\n\n  \nsecond\r\n";
  EXPECT_EQ(readPrompts(dir + "/p.txt"), (std::vector<std::string>{"first", "second"}));
  std::ofstream(dir + "/empty.txt") << "\n\n";
  EXPECT_THROW(readPrompts(dir + "/empty.txt"), InputError);
  auto p = seededPermutation(10, 3);
  EXPECT_EQ(p, seededPermutation(10, 3));
  EXPECT_NE(p, seededPermutation(10, 4));
  std::sort(p.begin(), p.end());
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i], i);
}

// The InputError of `f`; a FIFO open that blocks is released after 20 s (by opening `fifo` for writing) and the
// result says so, so the test ends either way.
std::string refusal(const std::function<void()>& f, const std::string& fifo = "") {
  auto result = std::async(std::launch::async, [f] { return test::inputErrorOf(f); });
  if (result.wait_for(std::chrono::seconds(20)) == std::future_status::timeout) {
    if (!fifo.empty()) ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));
    result.wait();
    return "(blocked for 20 s)";
  }
  return result.get();
}

// Calibration text, prompt lists and generation_config.json used to be read whole whatever they were: /dev/zero
// until bad_alloc, a FIFO forever, a folder as empty.
TEST(BoundedInputs, TextPromptsAndGenerationConfigMustBeRegularFilesNamedInErrors) {
  PARETO_REQUIRE_SHARED();
  using ::testing::AllOf;
  using ::testing::HasSubstr;
  namespace fs = std::filesystem;
  const Tokenizer tok = Tokenizer::fromPath(test::sharedPath("models/ref-tiny"));
  const std::string dir = test::scratchDir("bounded-inputs");
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string big = dir + "/big.txt";
  std::ofstream(big).flush();
  fs::resize_file(big, (2ull << 30) + 1);   // sparse: refused from its size, never read
  std::ofstream(dir + "/latin1.txt", std::ios::binary) << "caf\xe9\n";
  std::ofstream(dir + "/prompts.txt", std::ios::binary) << "fine\ncaf\xe9\n";

  auto text = [&](const std::string& path) {
    return refusal([&] { textCalibration(tok, path, TextCalibrationOptions{}); }, fifo);
  };
  EXPECT_EQ(text("/dev/zero"), "/dev/zero: not a regular file (a character device), expected a text file");
  EXPECT_EQ(text(fifo), fifo + ": not a regular file (a FIFO), expected a text file");
  EXPECT_EQ(text(dir), dir + ": is a folder, expected a text file");
  EXPECT_EQ(text(big), big + ": is 2.00 GiB, more than the 2 GiB a text file may be");
  EXPECT_THAT(text(dir + "/latin1.txt"), AllOf(HasSubstr(dir + "/latin1.txt: "), HasSubstr("not valid UTF-8")));

  auto prompts = [&](const std::string& path) { return refusal([&] { readPrompts(path); }, fifo); };
  EXPECT_EQ(prompts("/dev/zero"), "/dev/zero: not a regular file (a character device), expected a prompts file");
  EXPECT_EQ(prompts(fifo), fifo + ": not a regular file (a FIFO), expected a prompts file");
  EXPECT_EQ(prompts(dir), dir + ": is a folder, expected a prompts file");
  EXPECT_THAT(prompts(big), HasSubstr("more than the 2 GiB a prompts file may be"));
  EXPECT_EQ(prompts(dir + "/prompts.txt"), dir + "/prompts.txt: line 2 is not valid UTF-8 (byte 3 of the line)");

  // A model folder whose generation_config.json is a link to /dev/zero, then a FIFO.
  const std::string model = dir + "/model";
  fs::create_directory(model);
  for (const auto& item : fs::directory_iterator(test::sharedPath("models/ref-tiny")))
    if (item.path().filename() != "generation_config.json")
      fs::create_symlink(fs::absolute(item.path()), model + "/" + item.path().filename().string());
  fs::create_symlink("/dev/zero", model + "/generation_config.json");
  EXPECT_THAT(refusal([&] { loadModel(model, test::testRuntime()); }),
              AllOf(HasSubstr(model + "/generation_config.json"),
                    HasSubstr("not a regular file (a character device)")));
  fs::remove(model + "/generation_config.json");
  ASSERT_EQ(::mkfifo((model + "/generation_config.json").c_str(), 0600), 0);
  EXPECT_THAT(refusal([&] { loadModel(model, test::testRuntime()); }, model + "/generation_config.json"),
              AllOf(HasSubstr(model + "/generation_config.json"), HasSubstr("not a regular file (a FIFO)")));
}

}  // namespace
}  // namespace pareto
