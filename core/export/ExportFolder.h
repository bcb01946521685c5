// What the exports that write a Hugging Face folder (export hf, export compressed-tensors) do alike around
// their weights: copy the files a checkpoint keeps unchanged, record that Pareto wrote the folder, list it.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace pareto {

// Copies into `staging` the files of `src` that an exported checkpoint keeps as they are: the tokenizer, the
// generation config, a chat template... (everything but config.json, the weights, Pareto's manifests and hidden
// or partial files), each made writable.
void copyUnchangedFiles(const std::string& src, const std::string& staging);

// pareto-export.json in `staging`: that Pareto wrote the folder (what a later --overwrite may replace), in which
// run, by which export, from which folder, in which dtype.
void writeExportRecord(const std::string& staging, const std::string& runId, const std::string& exportKind,
                       const std::string& src, const std::string& dtype);

// Makes config.json name the dtype the weights were written in: every spelling it has ("torch_dtype", the
// older one, and "dtype"), else "torch_dtype", which transformers of every version reads.
void setConfigDtype(nlohmann::json& config, const std::string& dtype);

// The file names of a folder, sorted.
std::vector<std::string> folderFileNames(const std::string& dir);

}  // namespace pareto
