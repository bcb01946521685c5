// Reading files the user points us at (config.json, tokenizer.json, recipes, text corpora, prompt lists) with
// a bound: each must be a regular file no larger than what a real file of its kind needs. Without the check
// /dev/zero is read until memory runs out, a FIFO blocks open() forever, and a folder reads as empty.
#pragma once

#include <cstdint>
#include <string>

namespace pareto {

// Size caps per kind of input, far above every real file of that kind.
constexpr uint64_t kMaxJsonConfigBytes = 16ull << 20;     // config.json, generation_config.json, recipes, manifests
constexpr uint64_t kMaxIndexJsonBytes = 64ull << 20;      // model.safetensors.index.json (~9 MB for 90k tensors)
constexpr uint64_t kMaxTokenizerJsonBytes = 128ull << 20;  // tokenizer.json (the largest real ones are ~35 MB)
constexpr uint64_t kMaxTextFileBytes = 2ull << 30;        // text corpora and prompt lists

// Opens `path` without blocking (a FIFO or a device never stalls us), checks that it is a regular file of at
// most `maxBytes`, and reads it whole. `kind` names what the file is for the size message ("a text file",
// "tokenizer.json"). Throws InputError naming the file and the problem: "not a regular file (a character
// device)", "is a folder", "is 5.20 GiB, more than the 2 GiB a text file may be", "changed size while it was
// read (truncated?)".
std::string readInputFile(const std::string& path, uint64_t maxBytes, const std::string& kind);

// "812 bytes", "3.50 MiB", "2 GiB": sizes in messages.
std::string formatBytes(uint64_t bytes);

// "a character device", "a FIFO", ... for a st_mode that is not a regular file.
std::string describeFileType(unsigned mode);

}  // namespace pareto
