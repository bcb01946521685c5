// `pareto-cli export gguf`: a model folder (dense, or written by compress) as one GGUF file that llama.cpp loads:
// its architecture metadata (Llama, Mistral, Qwen2, Qwen3), the tokenizer from tokenizer.json (byte-level BPE:
// vocabulary, merges, pre-tokenizer, special tokens), the tensors under llama.cpp's names with q and k rows
// permuted where llama.cpp's RoPE expects it.
//
// Types: `auto` writes each module as it is stored (a dense module in the checkpoint's float type; a module
// compressed to a gguf-* format, its stored blocks bit for bit, q/k rows permuted as whole rows; general.file_type
// then names the type most such modules have) and refuses a module GGUF has no type for,
// naming it and the --type that would convert it; a type (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k) requantizes
// every block linear from its (dequantized) weights by round-to-nearest. Norms are f32, the embedding and output
// head keep the checkpoint's float type unless a float --type is asked for. A k-quant row must be whole 256-weight
// super-blocks: narrower modules fall back (q4_k → q4_0, q6_k → q8_0, as llama-quantize falls back) and the
// report says which.
//
// The file is written under a temporary name beside the destination and renamed at the end (nothing is left
// under the output name on failure or cancel); --overwrite replaces only a GGUF file Pareto wrote.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/Progress.h"

namespace pareto {

struct GgufExportOptions {
  std::string modelDir;
  std::string outFile;
  std::string type = "auto";
  bool overwrite = false;
};

struct GgufExportReport {
  std::string outFile;
  std::string type;                          // as asked
  std::string architecture;                  // general.architecture
  int64_t tensors = 0;
  uint64_t bytes = 0;                        // of the file
  std::map<std::string, int64_t> tensorsByType;
  double linearBitsPerWeight = 0;            // of the block linears as written
  std::vector<std::string> notes;            // fallbacks and conversions, one line each
  double seconds = 0;
};

// True when `path` is a GGUF file that Pareto wrote (what --overwrite may replace).
bool isParetoGguf(const std::string& path);

GgufExportReport exportGguf(const GgufExportOptions& opts, const ProgressCallback& progress = {},
                            const CancelToken* cancel = nullptr);

}  // namespace pareto
