// Exporting a model folder to where it deploys, as both front ends run it: `pareto-cli export hf | gguf |
// compressed-tensors` and the workbench's Export menu on the selected run. One job over the three exports of
// core/export (HfExport.h, GgufExport.h, CompressedTensorsExport.h): the same options, the same refusals, the
// same bytes and the same report text from either front end.
//
// Each export writes through util/OutputFolder.h (a staging name swapped in at the end), so a cancel or a failure
// leaves the destination as it was: absent, or the earlier export that --overwrite would have replaced.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "export/CompressedTensorsExport.h"
#include "export/GgufExport.h"
#include "export/HfExport.h"
#include "jobs/Job.h"

namespace pareto {

enum class ExportKind { HuggingFace, Gguf, CompressedTensors };

// "hf", "gguf", "compressed-tensors": the CLI's subcommand names.
std::string exportKindName(ExportKind kind);
// Throws InputError for another name.
ExportKind parseExportKind(const std::string& name);

struct ExportOptions {
  ExportKind kind = ExportKind::HuggingFace;
  std::string modelDir;   // the folder to export (written by compress; gguf also takes a dense one)
  std::string out;        // the output folder (hf, compressed-tensors) or .gguf file
  // gguf: --type (auto, f32, f16, bf16, q8_0, q4_0, q4_k, q6_k); hf and compressed-tensors: --dtype. "" is the
  // export's default (gguf: auto; hf: the source dtype; compressed-tensors: float16).
  std::string type;
  bool overwrite = false;   // replace an earlier export Pareto wrote, once the new one is complete
};

// The report of the export that ran (exactly one is set).
struct ExportReport {
  ExportKind kind = ExportKind::HuggingFace;
  std::optional<HfExportReport> hf;
  std::optional<GgufExportReport> gguf;
  std::optional<CompressedTensorsExportReport> compressedTensors;
};

class ExportJob : public Job {
 public:
  explicit ExportJob(ExportOptions options);

  // Throws InputError naming the folder, file or module that cannot be exported; Cancelled when `cancel` fires
  // (checked between tensors).
  void run(const ProgressCallback& progress, const CancelToken& cancel) override;
  const ExportReport& report() const { return report_; }
  // What `pareto-cli export ... --json` prints, and the lines it prints without --json (the workbench shows
  // the same lines).
  nlohmann::json result() const;
  std::string summary() const;
  // Where the export went: the folder or the file.
  const std::string& out() const { return options_.out; }

 private:
  ExportOptions options_;
  ExportReport report_;
};

}  // namespace pareto
