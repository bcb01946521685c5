// The folder a job writes (compress, export), or the single file (export gguf): checked before any work starts,
// locked for the whole run, built under a temporary name unique to the run and swapped in at the end. Nothing the user owns is ever replaced:
// an existing folder is replaced only with --overwrite and only when Pareto wrote it, and never when it holds,
// or lies inside, anything the run reads.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace pareto {

// The files by which a folder says that Pareto wrote it: a compressed model's manifest, an export's record.
inline constexpr const char* kCompressManifestFile = "pareto.json";
inline constexpr const char* kExportManifestFile = "pareto-export.json";
// The key under which a job records its run id in its manifest (which run wrote the folder).
inline constexpr const char* kOutputRunKey = "pareto_run";
// Inside a staging folder: the finished part of a resumable job (compress: its finished layers) and the file
// that says what it is. A staging folder holding it is progress, not a leftover: it is kept when the run fails,
// is cancelled or is killed, and only a run with `resume` takes it up; no run removes it.
inline constexpr const char* kResumeFolder = "resume";
inline constexpr const char* kResumeStateFile = "resume/state.json";

// "x/", "./x/.", "a/../x" → one absolute, lexically normal path without a trailing separator. Throws
// InputError for an empty path and for one that names no folder of its own ("/", ".", "..").
std::string normalizeOutputPath(const std::string& path);

// True when `dir` holds pareto.json or pareto-export.json whose "producer" names Pareto.
bool isParetoOutput(const std::string& dir);

// The files of a folder by name, each with the identity (device, inode, size) of the file written: the final
// check of a job proves that what lies under the destination after the swap is exactly what this run wrote,
// not a mix with another writer's files, without reading the (possibly huge) contents again.
struct FileIdentity {
  unsigned long long device = 0, inode = 0, size = 0;
  bool operator==(const FileIdentity& o) const { return device == o.device && inode == o.inode && size == o.size; }
};
using FolderIdentity = std::vector<std::pair<std::string, FileIdentity>>;
FolderIdentity folderIdentity(const std::string& dir);
// Throws Error naming the first file of `dir` that is missing, extra or another file than `expected` lists.
void requireSameFiles(const std::string& dir, const FolderIdentity& expected);

struct OutputClaim {
  std::string path;                  // the destination as the user gave it
  bool overwrite = false;            // --overwrite: replace a folder Pareto wrote, once the new one is complete
  std::vector<std::string> inputs;   // what the run reads: the destination may neither hold nor lie inside any
  std::string job;                   // "compress", "export hf": named to a second run that finds the lock
  // A single file instead of a folder: staging() is then a file path the job creates, commit() renames it into
  // place, and --overwrite replaces an existing file only when writtenByPareto says Pareto wrote it.
  bool file = false;
  std::function<bool(const std::string& path)> writtenByPareto;
  // Continue an interrupted run: the staging folder of an earlier run to this destination that holds resume
  // progress (kResumeStateFile) becomes this run's staging folder. Without it, such a folder makes the claim
  // fail, naming it: progress is never removed by a run that was not asked to continue it.
  bool resume = false;
};

// The staging folder of an interrupted run to `path` that holds resume progress, or "" when there is none.
std::string resumableStaging(const std::string& path);

class OutputFolder {
 public:
  // Checks the claim, takes the destination's lock (a second run is refused at once, naming this one) and
  // creates the staging folder. Throws InputError naming the path.
  explicit OutputFolder(const OutputClaim& claim);
  // Without commit(): the staging folder is removed. The lock is released in every case.
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  const std::string& target() const { return target_; }
  const std::string& staging() const { return staging_; }
  // Unique to this run; jobs record it in their manifest so that the final check can tell their folder apart.
  const std::string& runId() const { return runId_; }
  // With OutputClaim::resume: whether an interrupted run's staging folder was taken up.
  bool resumed() const { return resumed_; }
  // From now on a failure or cancel leaves the staging folder in place (it holds resume progress) instead of
  // removing it.
  void keepStagingOnFailure() { keepStaging_ = true; }

  // Makes the staging folder the destination (a failed swap puts the previous result back), then checks that
  // the destination holds exactly the files staged (requireSameFiles). If a folder the run may not replace
  // appeared under the destination meanwhile, the result is kept under a visible name beside it and the
  // InputError says where.
  void commit();

 private:
  void release() noexcept;
  std::string target_, staging_, lockPath_, runId_;
  bool overwrite_ = false, committed_ = false, file_ = false, resumed_ = false, keepStaging_ = false;
  std::function<bool(const std::string&)> writtenByPareto_;
  int lockFd_ = -1;
};

}  // namespace pareto
