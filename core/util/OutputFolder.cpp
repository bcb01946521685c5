#include "util/OutputFolder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <algorithm>

#include "util/Error.h"
#include "util/FileSystem.h"
#include "util/Json.h"

namespace pareto {
namespace fs = std::filesystem;
namespace {

std::string errnoText() { return std::strerror(errno); }

// `inner` is `outer` or lies inside it (both canonical).
bool within(const fs::path& inner, const fs::path& outer) {
  const fs::path rel = inner.lexically_relative(outer);
  if (rel.empty()) return false;
  if (rel == ".") return true;
  return *rel.begin() != "..";
}

std::string newRunId() {
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d-%08x", static_cast<int>(::getpid()), rd());
  return buf;
}

std::string holderDescription(const std::string& job, const std::string& runId) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  const std::time_t now = std::time(nullptr);
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return (job.empty() ? std::string("a job") : job) + ", pid " + std::to_string(::getpid()) + " on " + host +
         ", started " + when + ", run " + runId;
}

bool isEmptyFolder(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::is_empty(dir, ec) && !ec;
}

// Hidden names of earlier runs to this destination (".x.partial-<run>", ".x.old-<run>", and the unsuffixed
// names of older versions). Whoever holds the lock knows their writers are gone.
bool isLeftoverOf(const std::string& entry, const std::string& name) {
  for (const char* kind : {".partial", ".old"}) {
    const std::string prefix = "." + name + kind;
    if (entry == prefix || entry.rfind(prefix + "-", 0) == 0) return true;
  }
  return false;
}

bool holdsResumeProgress(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kResumeStateFile, ec);
}

// The most recently changed leftover of `name` in `parent` that holds resume progress.
fs::path findResumable(const fs::path& parent, const std::string& name) {
  fs::path best;
  fs::file_time_type bestTime{};
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string entryName = entry.path().filename().string();
    if (!isLeftoverOf(entryName, name) || !holdsResumeProgress(entry.path())) continue;
    const fs::file_time_type t = fs::last_write_time(entry.path() / kResumeStateFile, ec);
    if (best.empty() || t > bestTime) best = entry.path(), bestTime = t;
  }
  return best;
}

}  // namespace

std::string resumableStaging(const std::string& path) {
  const fs::path target = fs::weakly_canonical(normalizeOutputPath(path));
  std::error_code ec;
  if (!fs::is_directory(target.parent_path(), ec)) return {};
  return findResumable(target.parent_path(), target.filename().string()).string();
}

std::string normalizeOutputPath(const std::string& path) {
  if (path.empty()) throw InputError("no output folder given");
  // "." or "a/.." would make the working folder (or one above it) the output, to be replaced by a rename.
  fs::path given = fs::path(path).lexically_normal();
  if (!given.has_filename()) given = given.parent_path();   // "x/" normalises to "x/" with an empty file name
  fs::path p = fs::absolute(given).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  if (p == p.root_path() || given.empty() || given.filename() == "." || given.filename() == "..")
    throw InputError(fileMessage(path, "names no folder of its own; give the output folder's name"));
  return p.string();
}

bool isParetoOutput(const std::string& dir) {
  for (const char* file : {kCompressManifestFile, kExportManifestFile}) {
    const fs::path p = fs::path(dir) / file;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    try {
      const nlohmann::json doc = readJsonFile(p.string());
      if (doc.is_object() && doc.contains("producer") && doc["producer"].is_string() &&
          doc["producer"].get<std::string>().rfind("pareto", 0) == 0)
        return true;
    } catch (const InputError&) {
      // a manifest that does not parse proves nothing
    }
  }
  return false;
}

OutputFolder::OutputFolder(const OutputClaim& claim)
    : overwrite_(claim.overwrite), file_(claim.file), writtenByPareto_(claim.writtenByPareto) {
  if (file_ && !writtenByPareto_) throw Error("OutputFolder: a file output needs its writtenByPareto check");
  const char* kind = file_ ? "file" : "folder";
  const fs::path given = normalizeOutputPath(claim.path);
  struct stat st {};
  if (::lstat(given.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      throw InputError(fileMessage(given.string(), std::string("is a symbolic link; give the ") + kind + " it points to"));
    if (!file_ && !S_ISDIR(st.st_mode)) throw InputError(fileMessage(given.string(), "exists and is not a folder"));
    if (file_ && !S_ISREG(st.st_mode))
      throw InputError(fileMessage(given.string(), "exists and is not a regular file (give the file to write)"));
  }
  // Canonical, so that every spelling of one place (through links, "..") meets the same checks and lock.
  const fs::path target = fs::weakly_canonical(given);
  for (const std::string& input : claim.inputs) {
    if (input.empty()) continue;
    const fs::path in = fs::weakly_canonical(fs::absolute(input));
    if (within(target, in))
      throw InputError(fileMessage(given.string(), (target == in ? "is " : "lies inside ") + in.string() +
                                                   ", which this run reads; choose an output " + kind + " outside it"));
    if (within(in, target))
      throw InputError(fileMessage(given.string(), "holds " + in.string() + ", which this run reads; choose an "
                                                   "output folder that does not contain the inputs"));
  }
  target_ = target.string();
  runId_ = newRunId();
  const fs::path parent = target.parent_path();
  const std::string name = target.filename().string();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw InputError(fileMessage(parent.string(), "cannot create the output's parent folder: " + ec.message()));

  // The lock lives beside the destination (which is replaced, so cannot hold it) for the whole run. flock
  // ends with the process, so a crashed run never blocks the next one.
  lockPath_ = (parent / ("." + name + ".lock")).string();
  for (int attempt = 0; lockFd_ < 0; ++attempt) {
    const int fd = ::open(lockPath_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw InputError(fileMessage(lockPath_, "cannot create the output's lock file: " + errnoText()));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char holder[512] = {};
      const ssize_t n = ::pread(fd, holder, sizeof holder - 1, 0);
      ::close(fd);
      if (err != EWOULDBLOCK) throw InputError(fileMessage(lockPath_, std::string("cannot lock: ") + std::strerror(err)));
      std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string("just starting");
      while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
      throw InputError(fileMessage(target_, std::string("another Pareto run is writing this ") + kind + " (" + who +
                                                "); wait for it to finish or choose another --out"));
    }
    // A holder that finished removed the file between our open and our lock: that inode guards nothing.
    struct stat held {}, named {};
    if (::fstat(fd, &held) != 0 || ::stat(lockPath_.c_str(), &named) != 0 || held.st_ino != named.st_ino ||
        held.st_dev != named.st_dev) {
      ::close(fd);
      if (attempt > 16) throw InputError(fileMessage(lockPath_, "the lock file keeps changing; is another run looping?"));
      continue;
    }
    const std::string who = holderDescription(claim.job, runId_) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, who.data(), who.size(), 0) < 0) {
      // The lock holds without its description; a second run then says only that one is running.
    }
    lockFd_ = fd;
  }

  try {
    if (file_ && fs::exists(target)) {
      if (!overwrite_)
        throw InputError(fileMessage(target_, "already exists (choose another --out, or --overwrite to replace it)"));
      if (!writtenByPareto_(target_))
        throw InputError(fileMessage(target_, "is not a file Pareto wrote: --overwrite replaces only Pareto's own "
                                              "output; move it away or choose another --out"));
    } else if (!file_ && fs::exists(target) && !isEmptyFolder(target)) {
      if (!overwrite_)
        throw InputError(fileMessage(target_, "already exists (choose another --out, or --overwrite to replace it)"));
      if (!isParetoOutput(target_))
        throw InputError(fileMessage(target_, std::string("is not a folder Pareto wrote (no ") + kCompressManifestFile +
                                                  " or " + kExportManifestFile + " naming Pareto): --overwrite "
                                                  "replaces only Pareto's own output; move it away or choose "
                                                  "another --out"));
    }
    const fs::path progress = file_ ? fs::path() : findResumable(parent, name);
    if (!progress.empty() && !claim.resume)
      throw InputError(fileMessage(progress.string(), "holds the finished part of an interrupted run to " + target_ +
                                                          ": add --resume to continue it, or remove this folder to "
                                                          "start over"));
    if (progress.empty() && claim.resume)
      throw InputError(fileMessage(target_, "has no interrupted run to resume (no ." + name +
                                                ".partial-* folder with its progress beside it)"));
    staging_ = (parent / ("." + name + ".partial-" + runId_)).string();
    if (!progress.empty()) {
      fs::rename(progress, staging_);
      resumed_ = keepStaging_ = true;
    }
    for (const auto& entry : fs::directory_iterator(parent))
      if (isLeftoverOf(entry.path().filename().string(), name) && entry.path() != fs::path(staging_) &&
          !holdsResumeProgress(entry.path()))
        removeTree(entry.path().string());
    if (!file_ && !resumed_) fs::create_directory(staging_);
  } catch (const fs::filesystem_error& e) {
    release();
    throw InputError(fileMessage(target_, std::string("cannot prepare the output: ") + e.code().message()));
  } catch (...) {
    release();
    throw;
  }
}

FolderIdentity folderIdentity(const std::string& dir) {
  FolderIdentity files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files.emplace_back(entry.path().filename().string(),
                       FileIdentity{static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino),
                                    static_cast<unsigned long long>(st.st_size)});
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return files;
}

void requireSameFiles(const std::string& dir, const FolderIdentity& expected) {
  const FolderIdentity found = folderIdentity(dir);
  auto changed = [&](const std::string& name, const std::string& how) {
    return Error(fileMessage((fs::path(dir) / name).string(),
                             how + ": another process changed the folder while this run wrote it; run again"));
  };
  size_t i = 0, j = 0;
  while (i < expected.size() || j < found.size()) {
    if (j == found.size() || (i < expected.size() && expected[i].first < found[j].first))
      throw changed(expected[i].first, "is missing");
    if (i == expected.size() || found[j].first < expected[i].first) throw changed(found[j].first, "was not written by this run");
    if (!(expected[i].second == found[j].second)) throw changed(found[j].first, "is not the file this run wrote");
    ++i, ++j;
  }
}

OutputFolder::~OutputFolder() { release(); }

void OutputFolder::release() noexcept {
  if (!committed_ && !staging_.empty() && !keepStaging_) {
    try {
      removeTree(staging_);
    } catch (const std::exception&) {
      // the next run to this destination removes it
    }
  }
  staging_.clear();
  if (lockFd_ >= 0) {
    // Unlinked while still held: a run waiting on this inode sees it is stale and opens a fresh one.
    ::unlink(lockPath_.c_str());
    ::close(lockFd_);
    lockFd_ = -1;
  }
}

void OutputFolder::commit() {
  const fs::path target(target_);
  if (file_) {
    if (fs::exists(target) && (!overwrite_ || !writtenByPareto_(target_))) {
      const std::string kept = target_ + ".pareto-" + runId_;
      fs::rename(staging_, kept);
      committed_ = true;
      throw InputError(fileMessage(target_, "a file that this run may not replace appeared here while it worked; "
                                            "the result is in " + kept));
    }
    struct stat staged {}, placed {};
    if (::stat(staging_.c_str(), &staged) != 0) throw Error(fileMessage(staging_, "the staged output is gone"));
    fs::rename(staging_, target);   // atomic: readers see the old file or the new one, never a mix
    committed_ = true;
    if (::stat(target_.c_str(), &placed) != 0 || placed.st_ino != staged.st_ino || placed.st_dev != staged.st_dev)
      throw Error(fileMessage(target_, "is not the file this run wrote (another writer replaced it)"));
    return;
  }
  if (fs::exists(target) && !isEmptyFolder(target) && (!overwrite_ || !isParetoOutput(target_))) {
    const std::string kept = target_ + ".pareto-" + runId_;
    fs::rename(staging_, kept);
    committed_ = true;
    throw InputError(fileMessage(target_, "a folder that this run may not replace appeared here while it worked; "
                                          "the result is in " + kept));
  }
  const FolderIdentity staged = folderIdentity(staging_);
  const fs::path aside = target.parent_path() / ("." + target.filename().string() + ".old-" + runId_);
  replaceFolder(staging_, target_, aside.string());
  committed_ = true;
  requireSameFiles(target_, staged);
}

}  // namespace pareto
