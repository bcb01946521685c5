// pareto-cli and the experiment store end to end: jobs record themselves (finished, failed, cancelled,
// interrupted when killed), two CLI processes share one database, and the `runs` commands list, show, compare,
// export and delete; a recipe printed by `runs show --recipe` re-runs to the same weights.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "SharedData.h"
#include "store/ExperimentStore.h"
#include "store/Sqlite.h"

extern char** environ;

namespace pareto {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using json = nlohmann::json;

struct RunResult {
  int exitCode = -1;
  std::string out, err;
};

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int exitCodeOf(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

class StoreCli : public ::testing::Test {
 protected:
  void SetUp() override {
    PARETO_REQUIRE_SHARED();
    dir_ = test::scratchDir("store-cli");
    db_ = dir_ + "/runs.db";
    model_ = test::sharedPath("models/ref-tiny");
    text_ = test::sharedPath("data/heldout-python.txt");
  }

  RunResult cli(const std::string& args) {
    const std::string err = dir_ + "/stderr.txt";
    RunResult r;
    FILE* pipe = ::popen((std::string(PARETO_CLI_PATH) + " " + args + " 2>" + err).c_str(), "r");
    if (pipe == nullptr) return r;
    std::array<char, 4096> buf{};
    size_t n = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
    r.exitCode = exitCodeOf(::pclose(pipe));
    r.err = readFile(err);
    return r;
  }

  json runsJson(const std::string& filters = "") {
    RunResult r = cli("runs list --db " + db_ + " --json " + filters);
    EXPECT_EQ(r.exitCode, 0) << r.err;
    return json::parse(r.out)["runs"];
  }

  // Starts the CLI without waiting; stdout and stderr go to files under the scratch folder.
  pid_t spawn(const std::vector<std::string>& args, const std::string& name) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, (dir_ + "/" + name + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, (dir_ + "/" + name + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> all = {PARETO_CLI_PATH};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, PARETO_CLI_PATH, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0);
    return pid;
  }

  static int wait(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return exitCodeOf(status);
  }

  // Polls the database until a run is recorded as running (the spawned job began); its id, or 0 on timeout.
  int64_t waitForRunningRun() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      if (fs::exists(db_)) {
        try {
          ExperimentStore store(db_);
          for (const auto& r : store.listRuns())
            if (r.status == RunStatus::Running) return r.id;
        } catch (const std::exception&) {
          // The job may be creating the file this very moment.
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  }

  std::vector<std::string> longPerplexity() const {
    // Every window of the file: seconds of work on ref-tiny, long enough to be interrupted.
    return {"perplexity", "--model", model_, "--text", text_, "--window", "128", "--db", db_};
  }

  std::string perplexity(int window) const {
    return "perplexity --model " + model_ + " --text " + text_ + " --window " + std::to_string(window) +
           " --max-windows 2";
  }

  std::string dir_, db_, model_, text_;
};

TEST_F(StoreCli, JobsRecordThemselvesAndRunsReadsThem) {
  // --db before and after the subcommand name.
  RunResult a = cli("--db " + db_ + " " + perplexity(64) + " --json");
  ASSERT_EQ(a.exitCode, 0) << a.err;
  RunResult b = cli(perplexity(32) + " --json --db " + db_);
  ASSERT_EQ(b.exitCode, 0) << b.err;
  ASSERT_EQ(cli(perplexity(16) + " --no-record --db " + db_).exitCode, 0);
  RunResult bad = cli("perplexity --model " + model_ + " --text /nonexistent/text.txt --db " + db_);
  EXPECT_EQ(bad.exitCode, 2);

  json runs = runsJson();
  ASSERT_EQ(runs.size(), 3u) << runs.dump(1);   // --no-record left no trace
  const json& failed = runs[0];
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_THAT(failed["error"].get<std::string>(), HasSubstr("/nonexistent/text.txt"));
  const json& first = runs[2];
  EXPECT_EQ(first["kind"], "perplexity");
  EXPECT_EQ(first["status"], "finished");
  EXPECT_EQ(first["model"]["path"], fs::canonical(model_).string());
  EXPECT_EQ(first["model"]["architecture"], "LlamaForCausalLM");
  EXPECT_EQ(first["model"]["content_hash"].get<std::string>().size(), 16u);
  EXPECT_DOUBLE_EQ(first["metrics"]["ppl"].get<double>(), json::parse(a.out)["ppl"].get<double>());
  EXPECT_DOUBLE_EQ(runs[1]["metrics"]["ppl"].get<double>(), json::parse(b.out)["ppl"].get<double>());
  const int64_t id1 = first["id"], id2 = runs[1]["id"];

  EXPECT_EQ(runsJson("--kind perplexity --model ref-tiny").size(), 3u);
  EXPECT_EQ(runsJson("--kind compress").size(), 0u);
  EXPECT_EQ(runsJson("--model no-such-model").size(), 0u);
  RunResult text = cli("runs list --db " + db_);
  EXPECT_EQ(text.exitCode, 0);
  EXPECT_THAT(text.out, HasSubstr("ppl "));

  RunResult show = cli("runs show " + std::to_string(id1) + " --json --db " + db_);
  ASSERT_EQ(show.exitCode, 0) << show.err;
  json details = json::parse(show.out);
  EXPECT_EQ(details["recipe"]["window"], 64);
  EXPECT_EQ(details["recipe"]["text"], fs::canonical(text_).string());
  EXPECT_FALSE(details["versions"]["pareto"].get<std::string>().empty());
  RunResult recipe = cli("runs show " + std::to_string(id1) + " --recipe --db " + db_);
  EXPECT_EQ(recipe.exitCode, 2);
  EXPECT_THAT(recipe.err, HasSubstr("only compress runs have a recipe"));

  const std::string ids = std::to_string(id1) + " " + std::to_string(id2);
  RunResult cmp = cli("runs compare " + ids + " --diff-only --json --db " + db_);
  ASSERT_EQ(cmp.exitCode, 0) << cmp.err;
  std::set<std::string> rows;
  const json compared = json::parse(cmp.out);
  for (const auto& r : compared["rows"]) rows.insert(r["name"].get<std::string>());
  EXPECT_TRUE(rows.count("settings.window")) << cmp.out;
  EXPECT_TRUE(rows.count("ppl"));
  EXPECT_FALSE(rows.count("model"));
  EXPECT_FALSE(rows.count("kind"));
  EXPECT_EQ(cli("runs compare " + std::to_string(id1) + " --db " + db_).exitCode, 2);

  const std::string csv = dir_ + "/runs.csv", exported = dir_ + "/runs.json";
  RunResult exp = cli("runs export " + std::to_string(id1) + " " + std::to_string(id2) + " --csv " + csv + " --json " +
                      exported + " --db " + db_);
  ASSERT_EQ(exp.exitCode, 0) << exp.err;
  const std::string table = readFile(csv);
  EXPECT_EQ(table.substr(0, table.find('\n')), "run,kind,model,device,table,module,name,x,value");
  EXPECT_THAT(table,
              HasSubstr(std::to_string(id1) + ",perplexity," + fs::canonical(model_).string() + ",cpu,metric,,ppl,,"));
  EXPECT_EQ(json::parse(readFile(exported)).size(), 2u);
  EXPECT_EQ(cli("runs export " + std::to_string(id1) + " --db " + db_).exitCode, 2);   // neither --csv nor --json

  RunResult del = cli("runs delete " + std::to_string(id2) + " --db " + db_);
  ASSERT_EQ(del.exitCode, 0) << del.err;
  EXPECT_EQ(runsJson().size(), 2u);
  RunResult gone = cli("runs show " + std::to_string(id2) + " --db " + db_);
  EXPECT_EQ(gone.exitCode, 2);
  EXPECT_THAT(gone.err, HasSubstr("no run " + std::to_string(id2)));
}

TEST_F(StoreCli, UnusableNamedDatabaseStopsTheJob) {
  std::ofstream(dir_ + "/notes.db") << "plain text, not a database at all; long enough to fill a header page\n";
  RunResult r = cli(perplexity(16) + " --db " + dir_ + "/notes.db");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_THAT(r.err, HasSubstr("notes.db"));
}

TEST_F(StoreCli, RecipeFromRunsShowRerunsToTheSameWeights) {
  // The recipe lives in its own folder and names its calibration text relative to it.
  fs::create_directories(dir_ + "/recipes");
  fs::copy_file(test::sharedPath("data/heldout-prose.txt"), dir_ + "/recipes/calib.txt");
  std::ofstream(dir_ + "/recipes/r.json") << R"({
    "calibration": {"source": "text", "text": "calib.txt", "tokens": 256, "window": 64},
    "prune": {"method": "wanda", "pattern": "2:4"},
    "quantize": {"method": "rtn", "bits": 4, "group_size": 32},
    "overrides": [{"match": "model.layers.0.*", "prune": null}]})";
  RunResult c = cli("compress --model " + model_ + " --recipe " + dir_ + "/recipes/r.json --out " + dir_ +
                    "/out1 --json --db " + db_);
  ASSERT_EQ(c.exitCode, 0) << c.err;
  json runs = runsJson("--kind compress");
  ASSERT_EQ(runs.size(), 1u);
  const std::string id = std::to_string(runs[0]["id"].get<int64_t>());
  EXPECT_EQ(runs[0]["output"], dir_ + "/out1");
  EXPECT_DOUBLE_EQ(runs[0]["metrics"]["linear_bits_per_weight"].get<double>(),
                   json::parse(c.out)["linear_bits_per_weight"].get<double>());

  RunResult recipe = cli("runs show " + id + " --recipe --db " + db_);
  ASSERT_EQ(recipe.exitCode, 0) << recipe.err;
  fs::create_directories(dir_ + "/elsewhere");
  std::ofstream(dir_ + "/elsewhere/again.json") << recipe.out;
  EXPECT_EQ(json::parse(recipe.out)["calibration"]["text"], dir_ + "/recipes/calib.txt");
  RunResult again = cli("compress --model " + model_ + " --recipe " + dir_ + "/elsewhere/again.json --out " + dir_ +
                        "/out2 --db " + db_);
  ASSERT_EQ(again.exitCode, 0) << again.err;
  EXPECT_EQ(readFile(dir_ + "/out1/model.safetensors"), readFile(dir_ + "/out2/model.safetensors"));

  RunResult show = cli("runs show " + id + " --json --db " + db_);
  ASSERT_EQ(show.exitCode, 0) << show.err;
  json modules = json::parse(show.out)["module_stats"];
  EXPECT_EQ(modules.size(), 28u);   // 4 layers × 7 linears
  EXPECT_DOUBLE_EQ(modules["model.layers.1.mlp.up_proj"]["sparsity"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(modules["model.layers.0.mlp.up_proj"]["bits_per_weight"].get<double>(), 4.5);

  // A compress that fails (the output exists) is recorded with its reason.
  EXPECT_EQ(cli("compress --model " + model_ + " --recipe " + dir_ + "/elsewhere/again.json --out " + dir_ +
                "/out2 --db " + db_).exitCode, 2);
  json all = runsJson("--kind compress");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]["status"], "failed");
  EXPECT_THAT(all[0]["error"].get<std::string>(), HasSubstr("already exists"));
}

// Two CLI processes create the same new database at once and record into it; both runs are there.
TEST_F(StoreCli, TwoCliProcessesShareOneDatabase) {
  auto args = [&](const char* window) {
    return std::vector<std::string>{"perplexity", "--model", model_, "--text", text_, "--window", window,
                                    "--max-windows", "3", "--db", db_};
  };
  const pid_t a = spawn(args("32"), "a"), b = spawn(args("48"), "b");
  EXPECT_EQ(wait(a), 0) << readFile(dir_ + "/a.err");
  EXPECT_EQ(wait(b), 0) << readFile(dir_ + "/b.err");
  json runs = runsJson();
  ASSERT_EQ(runs.size(), 2u);
  std::set<int> windows;
  for (const auto& r : runs) {
    EXPECT_EQ(r["status"], "finished");
    windows.insert(static_cast<int>(r["metrics"]["window"].get<double>()));
  }
  EXPECT_EQ(windows, (std::set<int>{32, 48}));
}

TEST_F(StoreCli, KilledJobShowsInterruptedAndCtrlCShowsCancelled) {
  const pid_t killed = spawn(longPerplexity(), "killed");
  const int64_t id = waitForRunningRun();
  ASSERT_GT(id, 0) << readFile(dir_ + "/killed.err");
  ::kill(killed, SIGKILL);
  EXPECT_EQ(wait(killed), 128 + SIGKILL);
  json runs = runsJson();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["status"], "interrupted");
  EXPECT_TRUE(runs[0]["ended_at"].is_null());
  // Not running any more, so it can go without --force.
  EXPECT_EQ(cli("runs delete " + std::to_string(id) + " --db " + db_).exitCode, 0);

  const pid_t interrupted = spawn(longPerplexity(), "interrupted");
  ASSERT_GT(waitForRunningRun(), 0) << readFile(dir_ + "/interrupted.err");
  ::kill(interrupted, SIGINT);
  EXPECT_EQ(wait(interrupted), 130) << readFile(dir_ + "/interrupted.err");
  runs = runsJson();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["status"], "cancelled");
  EXPECT_FALSE(runs[0]["ended_at"].is_null());
  EXPECT_TRUE(runs[0]["metrics"].empty());
}

}  // namespace
}  // namespace pareto

namespace pareto {
namespace {

// bench kernels (here on the CPU references, with a tiny shape file) prints its table and records one bench run
// whose benchmark rows are one per available (format, batch).
// The final write of a run meets another process's write lock for longer than it waits
// (PARETO_DB_LOCK_TIMEOUT): the command prints its result and still fails, saying the run was not recorded.
// The lock is taken as soon as the run shows as running (milliseconds); 128 of the file's 930 windows keep the
// job computing for seconds after that (about 3 s alone on ref-tiny), not the whole file's 20+ s.
TEST_F(StoreCli, AFinalWriteThatCannotGetTheLockFailsTheCommand) {
  std::vector<std::string> args = longPerplexity();
  args.insert(args.end(), {"--max-windows", "128", "--json"});
  ::setenv("PARETO_DB_LOCK_TIMEOUT", "1", 1);
  const pid_t pid = spawn(args, "locked");
  ::unsetenv("PARETO_DB_LOCK_TIMEOUT");
  ASSERT_GT(waitForRunningRun(), 0) << readFile(dir_ + "/locked.err");
  {
    sqlite::Database holder(db_, 5000);
    holder.exec("BEGIN IMMEDIATE");   // held until the job has given up
    EXPECT_EQ(wait(pid), 1) << readFile(dir_ + "/locked.err");
    holder.exec("ROLLBACK");
  }
  EXPECT_THAT(readFile(dir_ + "/locked.err"), HasSubstr("the result was not recorded"));
  EXPECT_TRUE(json::parse(readFile(dir_ + "/locked.out")).contains("ppl")) << "the result is still printed";
  const json runs = runsJson();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_NE(runs[0]["status"], "finished");
}

// A run's tag and note (issue 25, point 9): set by `runs label` (or the workbench), shown by `runs list` and
// `runs show`, in their JSON too; a store written before tags existed gets them on the first write.
TEST_F(StoreCli, RunsLabelSetsATagAndANoteThatRunsShows) {
  int64_t id = 0;
  {
    ExperimentStore old(db_, 3);   // written by a Pareto without tags
    RunStart s;
    s.kind = "perplexity";
    s.device = "cpu";
    id = old.beginRun(s);
    old.finishRun(id, {{{"ppl", 11.5}}, {}, {}, {}, std::nullopt});
  }
  RunResult listed = cli("runs list --db " + db_);
  ASSERT_EQ(listed.exitCode, 0) << listed.err;
  RunResult label = cli("runs label " + std::to_string(id) + " --tag baseline --note 'window 128, as the paper' --db " + db_);
  ASSERT_EQ(label.exitCode, 0) << label.err;
  EXPECT_THAT(label.out, HasSubstr("tag       baseline"));
  RunResult list = cli("runs list --db " + db_);
  EXPECT_THAT(list.out, HasSubstr("baseline"));
  EXPECT_THAT(list.out, HasSubstr("note: window 128, as the paper"));
  RunResult json1 = cli("runs list --json --db " + db_);
  const json run = json::parse(json1.out)["runs"][0];
  EXPECT_EQ(run["tag"], "baseline");
  EXPECT_EQ(run["note"], "window 128, as the paper");
  // Only the note changes; the tag stays.
  ASSERT_EQ(cli("runs label " + std::to_string(id) + " --note '' --db " + db_).exitCode, 0);
  const json shown = json::parse(cli("runs show " + std::to_string(id) + " --json --db " + db_).out);
  EXPECT_EQ(shown["tag"], "baseline");
  EXPECT_EQ(shown["note"], "");
  EXPECT_DOUBLE_EQ(shown["metrics"]["ppl"].get<double>(), 11.5);
  RunResult none = cli("runs label " + std::to_string(id) + " --db " + db_);
  EXPECT_EQ(none.exitCode, 2);
  EXPECT_THAT(none.err, HasSubstr("give --tag, --note or both"));
  RunResult missing = cli("runs label 999 --tag x --db " + db_);
  EXPECT_EQ(missing.exitCode, 2);
  EXPECT_THAT(missing.err, HasSubstr("no run 999"));
}

TEST_F(StoreCli, BenchKernelsRecordsItsRows) {
  const std::string shape = dir_ + "/tiny-shape.json";
  {
    std::ofstream out(shape);
    out << R"({"name": "tiny", "layers": 1, "linears": [{"name": "qkv", "rows": 64, "cols": 256}]})";
  }
  RunResult r = cli("bench kernels --device cpu --shapes " + shape +
                    " --formats dense,bitmask-2:4,int4-g128 --batch 1,2 --runs 1 --db " + db_);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("bitmask-2:4"), std::string::npos) << r.out;
  ExperimentStore store(db_);
  const auto runs = store.listRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].kind, "bench");
  EXPECT_EQ(runs[0].status, RunStatus::Finished);
  RunResult shown = cli("runs show " + std::to_string(runs[0].id) + " --json --db " + db_);
  ASSERT_EQ(shown.exitCode, 0) << shown.err;
  EXPECT_EQ(json::parse(shown.out)["benchmarks"].size(), 6u) << shown.out;   // 3 formats x 2 batches

  RunResult bad = cli("bench kernels --device cpu --shapes no-such-model --db " + db_);
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.err.find("unknown model shape"), std::string::npos) << bad.err;
}

TEST_F(StoreCli, BenchDecodeRunsASyntheticModelAndRecordsItsRows) {
  RunResult r = cli("bench decode --synthetic tiny-llama --format dense,int4-g128 --context 4,8 --new-tokens 2 "
                    "--device cpu --dtype bfloat16 --runs 1 --json --db " + db_);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["mode"], "eager (CPU references of the kernels)");
  ASSERT_EQ(j["results"].size(), 4u);   // 2 formats x 2 contexts
  for (const auto& row : j["results"]) EXPECT_GT(row["tokens_per_second"].get<double>(), 0) << row.dump();
  ExperimentStore store(db_);
  const auto runs = store.listRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].kind, "bench");
  RunResult shown = cli("runs show " + std::to_string(runs[0].id) + " --json --db " + db_);
  ASSERT_EQ(shown.exitCode, 0) << shown.err;
  const json rows = json::parse(shown.out)["benchmarks"];
  ASSERT_EQ(rows.size(), 4u) << shown.out;
  EXPECT_EQ(rows[0]["kernel"], "decode dense");

  RunResult both = cli("bench decode --synthetic tiny-llama --model " + dir_ + " --device cpu --db " + db_);
  EXPECT_NE(both.exitCode, 0);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
  RunResult unknown = cli("bench decode --synthetic llama-9 --device cpu --db " + db_);
  EXPECT_EQ(unknown.exitCode, 2);
  EXPECT_NE(unknown.err.find("llama-3.1-8b"), std::string::npos) << unknown.err;
  RunResult format = cli("bench decode --synthetic tiny-llama --format int5-g3 --device cpu --db " + db_);
  EXPECT_EQ(format.exitCode, 2);
  EXPECT_NE(format.err.find("unknown weight format"), std::string::npos) << format.err;
}

}  // namespace
}  // namespace pareto
