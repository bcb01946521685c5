#include "jobs/ExportJob.h"

#include <sstream>

#include "util/Error.h"

namespace pareto {

std::string exportKindName(ExportKind kind) {
  switch (kind) {
    case ExportKind::HuggingFace: return "hf";
    case ExportKind::Gguf: return "gguf";
    case ExportKind::CompressedTensors: return "compressed-tensors";
  }
  return "?";
}

ExportKind parseExportKind(const std::string& name) {
  for (ExportKind k : {ExportKind::HuggingFace, ExportKind::Gguf, ExportKind::CompressedTensors})
    if (exportKindName(k) == name) return k;
  throw InputError("unknown export \"" + name + "\" (hf, gguf or compressed-tensors)");
}

ExportJob::ExportJob(ExportOptions options) : options_(std::move(options)) {}

void ExportJob::run(const ProgressCallback& progress, const CancelToken& cancel) {
  report_ = {};
  report_.kind = options_.kind;
  switch (options_.kind) {
    case ExportKind::HuggingFace: {
      HfExportOptions o;
      o.modelDir = options_.modelDir;
      o.outDir = options_.out;
      o.dtype = options_.type;
      o.overwrite = options_.overwrite;
      report_.hf = exportHuggingFace(o, progress, &cancel);
      break;
    }
    case ExportKind::Gguf: {
      GgufExportOptions o;
      o.modelDir = options_.modelDir;
      o.outFile = options_.out;
      if (!options_.type.empty()) o.type = options_.type;
      o.overwrite = options_.overwrite;
      report_.gguf = exportGguf(o, progress, &cancel);
      break;
    }
    case ExportKind::CompressedTensors: {
      CompressedTensorsExportOptions o;
      o.modelDir = options_.modelDir;
      o.outDir = options_.out;
      if (!options_.type.empty()) o.dtype = options_.type;
      o.overwrite = options_.overwrite;
      report_.compressedTensors = exportCompressedTensors(o, progress, &cancel);
      break;
    }
  }
}

nlohmann::json ExportJob::result() const {
  if (const auto& r = report_.hf)
    return {{"out", r->outDir},         {"dtype", r->dtype}, {"tensors", r->tensors},
            {"densified_modules", r->densifiedModules}, {"bytes", r->bytes}, {"files", r->files},
            {"seconds", r->seconds}};
  if (const auto& r = report_.gguf)
    return {{"out", r->outFile},
            {"type", r->type},
            {"architecture", r->architecture},
            {"tensors", r->tensors},
            {"bytes", r->bytes},
            {"tensors_by_type", r->tensorsByType},
            {"linear_bits_per_weight", r->linearBitsPerWeight},
            {"notes", r->notes},
            {"seconds", r->seconds}};
  if (const auto& r = report_.compressedTensors)
    return {{"out", r->outDir},
            {"dtype", r->dtype},
            {"tensors", r->tensors},
            {"quantized_modules", r->quantizedModules},
            {"dense_modules", r->denseModules},
            {"schemes", r->schemes},
            {"ignore", r->ignore},
            {"bytes", r->bytes},
            {"files", r->files},
            {"notes", r->notes},
            {"seconds", r->seconds}};
  return nlohmann::json::object();
}

std::string ExportJob::summary() const {
  std::ostringstream text;
  text.precision(3);
  if (const auto& r = report_.hf) {
    text << "wrote " << r->outDir << ": " << r->tensors << " tensors in " << r->dtype << " (" << r->densifiedModules
         << " packed modules made dense), " << std::fixed << r->bytes / 1048576.0 << " MiB; files:";
    for (const auto& f : r->files) text << " " << f;
  } else if (const auto& r = report_.gguf) {
    text << "wrote " << r->outFile << " (" << r->architecture << "): " << r->tensors << " tensors,";
    for (const auto& [type, n] : r->tensorsByType) text << " " << n << " " << type;
    text << "; block linears at " << std::fixed << r->linearBitsPerWeight << " bits per weight, "
         << r->bytes / 1048576.0 << " MiB";
    for (const auto& note : r->notes) text << "\n  note: " << note;
  } else if (const auto& r = report_.compressedTensors) {
    text << "wrote " << r->outDir << ": " << r->quantizedModules << " modules pack-quantized, " << r->denseModules
         << " dense (ignored), " << r->tensors << " tensors in " << r->dtype << ", " << std::fixed
         << r->bytes / 1048576.0 << " MiB";
    for (const auto& s : r->schemes) text << "\n  " << s;
    for (const auto& note : r->notes) text << "\n  note: " << note;
  }
  return text.str();
}

}  // namespace pareto
