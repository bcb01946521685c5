#include "export/ExportFolder.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/FileSystem.h"
#include "util/OutputFolder.h"
#include "util/Version.h"

namespace pareto {
namespace fs = std::filesystem;
namespace {

bool copiedAsIs(const fs::path& file) {
  const std::string name = file.filename().string();
  if (name.empty() || name[0] == '.') return false;
  if (name == kCompressManifestFile || name == kExportManifestFile || name == "config.json" ||
      name == "model.safetensors.index.json")
    return false;
  return file.extension() != ".safetensors" && file.extension() != ".partial";
}

}  // namespace

void copyUnchangedFiles(const std::string& src, const std::string& staging) {
  for (const auto& entry : fs::directory_iterator(src)) {
    if (!entry.is_regular_file() || !copiedAsIs(entry.path())) continue;
    const fs::path to = fs::path(staging) / entry.path().filename();
    fs::copy_file(entry.path(), to);
    // Copies keep the source's mode; files of a read-only model store would stay read-only in a folder the
    // user owns and may want to edit (a chat template, a generation setting).
    fs::permissions(to, fs::perms::owner_write, fs::perm_options::add);
  }
}

void writeExportRecord(const std::string& staging, const std::string& runId, const std::string& exportKind,
                       const std::string& src, const std::string& dtype) {
  const nlohmann::json record = {{"producer", std::string("pareto ") + paretoVersion()},
                                 {kOutputRunKey, runId},
                                 {"export", exportKind},
                                 {"source", src},
                                 {"dtype", dtype}};
  writeFileAtomically((fs::path(staging) / kExportManifestFile).string(), record.dump(2) + "\n");
}

void setConfigDtype(nlohmann::json& config, const std::string& dtype) {
  bool set = false;
  for (const char* key : {"torch_dtype", "dtype"})
    if (config.contains(key)) {
      config[key] = dtype;
      set = true;
    }
  if (!set) config["torch_dtype"] = dtype;
}

std::vector<std::string> folderFileNames(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace pareto
