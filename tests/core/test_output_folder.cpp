// The output folder of a job (util/OutputFolder.h): what --overwrite may replace, inputs it may not touch, one
// writer at a time, temporary names of its own, normalised paths; and files written whole or not at all.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "SharedData.h"
#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/OutputFolder.h"

namespace pareto {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

void writeText(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

std::string readText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

OutputClaim claim(const std::string& path, bool overwrite = false, std::vector<std::string> inputs = {}) {
  OutputClaim c;
  c.path = path;
  c.overwrite = overwrite;
  c.inputs = std::move(inputs);
  c.job = "test job";
  return c;
}

std::string refusal(const OutputClaim& c) {
  try {
    OutputFolder f(c);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A folder Pareto wrote, as compress leaves it.
void writeParetoFolder(const fs::path& dir, const std::string& marker) {
  writeText(dir / "pareto.json", R"({"producer": "pareto 0.1.0", "format_version": 2, "modules": {}})");
  writeText(dir / "model.safetensors", marker);
}

TEST(OutputFolder, OverwriteReplacesOnlyWhatParetoWrote) {
  const fs::path dir = test::scratchDir("output-overwrite");
  // The user's own folder: refused with --overwrite too, every file left as it was.
  writeText(dir / "precious" / "thesis.tex", "years of work");
  EXPECT_THAT(refusal(claim((dir / "precious").string(), true)),
              AllOf(HasSubstr("precious"), HasSubstr("is not a folder Pareto wrote")));
  EXPECT_EQ(readText(dir / "precious" / "thesis.tex"), "years of work");
  // A pareto.json that does not name Pareto as its producer proves nothing either.
  writeText(dir / "fake" / "pareto.json", R"({"producer": "someone else"})");
  EXPECT_THAT(refusal(claim((dir / "fake").string(), true)), HasSubstr("is not a folder Pareto wrote"));
  // Without --overwrite even Pareto's own output stays.
  writeParetoFolder(dir / "old", "old weights");
  EXPECT_THAT(refusal(claim((dir / "old").string(), false)), HasSubstr("already exists"));
  // With it, Pareto's output is replaced once the new one is committed (an export's record counts too).
  for (const char* manifest : {kCompressManifestFile, kExportManifestFile}) {
    const fs::path target = dir / (std::string("ours-") + manifest);
    writeText(target / manifest, R"({"producer": "pareto 0.1.0+gabc"})");
    OutputFolder out(claim(target.string(), true));
    writeText(fs::path(out.staging()) / "model.safetensors", "new weights");
    EXPECT_EQ(readText(target / manifest), R"({"producer": "pareto 0.1.0+gabc"})") << "replaced before commit";
    out.commit();
    EXPECT_EQ(entries(target), (std::vector<std::string>{"model.safetensors"}));
  }
  // An empty folder holds nothing to lose: it is used without --overwrite.
  fs::create_directories(dir / "empty");
  {
    OutputFolder out(claim((dir / "empty").string()));
    writeText(fs::path(out.staging()) / "a", "x");
    out.commit();
  }
  EXPECT_EQ(readText(dir / "empty" / "a"), "x");
  // A file, or a link, is never taken for the folder.
  writeText(dir / "file", "f");
  EXPECT_THAT(refusal(claim((dir / "file").string(), true)), HasSubstr("is not a folder"));
  fs::create_directory_symlink(dir / "old", dir / "link");
  EXPECT_THAT(refusal(claim((dir / "link").string(), true)), HasSubstr("symbolic link"));
}

TEST(OutputFolder, MayNeitherHoldNorLieInsideAnInput) {
  const fs::path dir = test::scratchDir("output-inputs");
  writeParetoFolder(dir / "anc", "compressed");
  writeText(dir / "anc" / "model" / "config.json", "{}");
  writeText(dir / "recipes" / "r.json", "{}");
  // compress --model anc/model --out anc --overwrite: the output would hold the source model.
  EXPECT_THAT(refusal(claim((dir / "anc").string(), true, {(dir / "anc" / "model").string()})),
              AllOf(HasSubstr("holds"), HasSubstr("which this run reads")));
  // export hf --model out/x --out out: the same from the other side, and an output inside the source.
  EXPECT_THAT(refusal(claim((dir / "anc" / "model" / "sub").string(), true, {(dir / "anc" / "model").string()})),
              HasSubstr("lies inside"));
  EXPECT_THAT(refusal(claim((dir / "anc" / "model").string(), true, {(dir / "anc" / "model").string()})),
              HasSubstr("which this run reads"));
  // A file input counts as well (the recipe, a calibration text), and so does any spelling of the path.
  EXPECT_THAT(refusal(claim((dir / "recipes").string(), true, {(dir / "recipes" / "r.json").string()})),
              HasSubstr("holds"));
  fs::create_directory_symlink(dir / "anc", dir / "alias");
  EXPECT_THAT(refusal(claim((dir / "anc").string(), true, {(dir / "alias" / "model").string()})), HasSubstr("holds"));
  EXPECT_THAT(refusal(claim((dir / "anc" / "model" / ".." / "model").string(), true, {(dir / "anc/model").string()})),
              HasSubstr("which this run reads"));
  EXPECT_EQ(readText(dir / "anc" / "model" / "config.json"), "{}");
  // A sibling is fine.
  EXPECT_EQ(refusal(claim((dir / "anc-out").string(), false, {(dir / "anc").string()})), "");
}

TEST(OutputFolder, OneWriterAtATimeNamedToTheSecond) {
  const fs::path dir = test::scratchDir("output-lock");
  const std::string target = (dir / "out").string();
  std::optional<OutputFolder> first(std::in_place, claim(target));
  // A second claim (through another spelling too) is refused at once, naming the first.
  for (const std::string& spelling : {target, target + "/", (dir / "." / "out").string()}) {
    const std::string why = refusal(claim(spelling, true));
    EXPECT_THAT(why, AllOf(HasSubstr("another Pareto run is writing this folder"), HasSubstr("test job"),
                           HasSubstr("pid " + std::to_string(::getpid()))))
        << spelling;
  }
  // From another process as well (flock is per open file, so this also holds within one process).
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      OutputFolder f(claim(target));
      ::_exit(1);
    } catch (const InputError&) {
      ::_exit(0);
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a second process took the lock";
  writeText(fs::path(first->staging()) / "model.safetensors", "first");
  first->commit();
  first.reset();
  // Released: the next run takes it, and the lock file is gone with the first run.
  EXPECT_EQ(entries(dir), (std::vector<std::string>{"out"}));
  EXPECT_EQ(refusal(claim(target + "-2")), "");
}

TEST(OutputFolder, TemporaryNamesAreThisRunsAndLeftoversGo) {
  const fs::path dir = test::scratchDir("output-staging");
  const std::string target = (dir / "out").string();
  // What a killed run of this or an older version left behind; the holder of the lock removes it.
  fs::create_directories(dir / ".out.partial");
  fs::create_directories(dir / ".out.partial-1-deadbeef");
  fs::create_directories(dir / ".out.old");
  fs::create_directories(dir / ".outside.partial");   // another destination's
  std::string firstStaging;
  {
    OutputFolder a(claim(target));
    firstStaging = a.staging();
    EXPECT_THAT(fs::path(a.staging()).filename().string(), HasSubstr(".out.partial-" + a.runId()));
    EXPECT_TRUE(fs::is_directory(a.staging()));
    EXPECT_EQ(entries(dir), (std::vector<std::string>{".out.lock", fs::path(a.staging()).filename().string(),
                                                      ".outside.partial"}));
  }
  // Not committed: nothing of it remains.
  EXPECT_EQ(entries(dir), (std::vector<std::string>{".outside.partial"}));
  OutputFolder b(claim(target));
  EXPECT_NE(b.staging(), firstStaging) << "two runs must never share a temporary name";
}

TEST(OutputFolder, PathsAreNormalisedBeforeAnyWork) {
  const fs::path dir = test::scratchDir("output-normalise");
  EXPECT_EQ(normalizeOutputPath((dir / "x").string() + "/"), (dir / "x").string());
  EXPECT_EQ(normalizeOutputPath((dir / "a" / ".." / "x" / ".").string()), (dir / "x").string());
  for (const std::string& bad : {"", "/", ".", ".."}) EXPECT_THROW(normalizeOutputPath(bad), InputError) << bad;
  {
    OutputFolder out(claim((dir / "x").string() + "/"));
    EXPECT_EQ(out.target(), (dir / "x").string());
    writeText(fs::path(out.staging()) / "model.safetensors", "w");
    out.commit();
  }
  EXPECT_EQ(entries(dir), (std::vector<std::string>{"x"}));
  EXPECT_EQ(readText(dir / "x" / "model.safetensors"), "w");
}

TEST(OutputFolder, AFolderThatAppearsMeanwhileIsKeptAndTheResultToo) {
  const fs::path dir = test::scratchDir("output-appeared");
  OutputFolder out(claim((dir / "out").string()));
  writeText(fs::path(out.staging()) / "model.safetensors", "result");
  writeText(dir / "out" / "notes.txt", "the user's");   // made by hand while the run worked
  try {
    out.commit();
    FAIL() << "expected a refusal";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the result is in " + (dir / "out").string() + ".pareto-" + out.runId()));
  }
  EXPECT_EQ(readText(dir / "out" / "notes.txt"), "the user's");
  EXPECT_EQ(readText(dir / ("out.pareto-" + out.runId()) / "model.safetensors"), "result");
}

// The final check after the swap: the destination holds exactly the files the run staged. A file replaced by
// another writer's (same name, even the same bytes), a missing one and an extra one are each caught.
TEST(OutputFolder, TheFinalCheckCatchesAnotherWritersFiles) {
  const fs::path dir = test::scratchDir("output-identity");
  writeText(dir / "a" / "model.safetensors", "ours");
  writeText(dir / "a" / "pareto.json", "{}");
  const FolderIdentity ours = folderIdentity((dir / "a").string());
  EXPECT_NO_THROW(requireSameFiles((dir / "a").string(), ours));
  writeText(dir / "b" / "model.safetensors", "ours");
  fs::rename(dir / "b" / "model.safetensors", dir / "a" / "model.safetensors");
  auto why = [&] {
    try {
      requireSameFiles((dir / "a").string(), ours);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_THAT(why(), AllOf(HasSubstr("a/model.safetensors"), HasSubstr("is not the file this run wrote")));
  fs::remove(dir / "a" / "model.safetensors");
  EXPECT_THAT(why(), HasSubstr("is missing"));
  writeText(dir / "a" / "model.safetensors", "x");
  writeText(dir / "a" / "model-00002.safetensors", "x");
  EXPECT_THAT(why(), HasSubstr("model-00002.safetensors: was not written by this run"));
}

// A file written through a temporary name: on a full disk (the child's RLIMIT_FSIZE) the call fails naming the
// file and the previous content stays; no temporary file remains.
TEST(WriteFileAtomically, AFullDiskKeepsThePreviousFile) {
  const fs::path dir = test::scratchDir("atomic-write");
  const std::string path = (dir / "bench.json").string();
  writeFileAtomically(path, "previous\n");
  EXPECT_EQ(readText(path), "previous\n");
  const pid_t child = ::fork();
  if (child == 0) {
    rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    ::signal(SIGXFSZ, SIG_IGN);
    try {
      writeFileAtomically(path, std::string(1 << 20, 'x'));
      ::_exit(1);
    } catch (const Error& e) {
      ::_exit(std::string(e.what()).find("bench.json: write failed: File too large") != std::string::npos ? 0 : 2);
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the write passed; 2: the error did not name the file and the cause";
  EXPECT_EQ(readText(path), "previous\n");
  EXPECT_EQ(entries(dir), (std::vector<std::string>{"bench.json"}));
  EXPECT_THROW(writeFileAtomically((dir / "missing" / "x.json").string(), "x"), Error);
}

}  // namespace
}  // namespace pareto
