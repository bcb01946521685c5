// `pareto-cli export compressed-tensors`: a folder written by compress as a Hugging Face checkpoint in the
// "pack-quantized" format of compressed-tensors, which vLLM (its CompressedTensorsWNA16 scheme) and SGLang serve
// with their W4A16 / W8A16 kernels. The codes and scales Pareto chose are kept exactly; nothing is requantized.
//
// The format, as compressed-tensors' PackedQuantizationCompressor writes it and vLLM's WNA16 scheme reads it
// (checked against vllm-project/compressed-tensors and vllm's quantization/compressed_tensors sources):
//
//   config.json "quantization_config":
//     quant_method "compressed-tensors", format "pack-quantized", quantization_status "compressed",
//     config_groups {name: {targets, weights, input_activations null, output_activations null}}, ignore [...].
//     weights: num_bits 4|8, type "int", symmetric, strategy "group"|"channel", group_size (null for channel),
//     dynamic false, actorder null|"weight". compressed-tensors validates these with extra keys forbidden, so
//     only long-standing keys are written (no version, scale_dtype or zp_dtype: newer versions fill defaults).
//     vLLM needs every linear it builds to match a target or be ignored, and takes weight-only int schemes only
//     for strategy group or channel (per-tensor is refused), at 4 or 8 bits.
//     targets: ["Linear"] when every quantized module shares one scheme (the usual case), else the modules' full
//     names. ignore: every linear left dense (unquantized, pruned-only, and lm_head, which vLLM never quantizes
//     in this scheme).
//
//   per quantized module <m> ([rows, cols] its dense weight, b bits, p = 32 / b codes a word):
//     <m>.weight_packed      int32 [rows, cols / p]: the code of column p·j + i in bits b·i .. b·i + b − 1 of
//                            word j (little end first); codes stored unsigned, a signed code q as q + 2^(b−1).
//     <m>.weight_scale       the checkpoint's float dtype, [rows, groups] (groups = 1 per channel)
//     <m>.weight_zero_point  asymmetric only: int32 [ceil(rows / p), groups], the zeros packed like the codes
//                            but along the OUTPUT rows (row p·j + i in bits b·i of word j), stored as z.
//     <m>.weight_shape       [rows, cols]; int32 here (compressed-tensors writes int64; vLLM copies it into an
//                            int64 parameter, and only the value is used)
//     <m>.weight_g_idx       int32 [cols] only for actorder "group", which this export never writes (below)
//   and the value is (q − z) · s, signed q and z in [−2^(b−1), 2^(b−1) − 1], z = 0 symmetric.
//
// How Pareto's formats map (formats/QuantGroupWeight.h): Pareto stores a symmetric code as q + 8 (4-bit) or as
// int8 q (8-bit) and an asymmetric one as the unsigned code u with a uint8 zero z, value (u − z) · s. The
// unsigned values are exactly what compressed-tensors stores (its signed u − 2^(b−1) and z − 2^(b−1) give the
// same difference), so the packed words hold Pareto's codes and zeros bit for bit. Formats:
//   intB-gG [-asym]            strategy group, group_size G
//   intB-channel [-asym]       strategy channel
//   intB-tensor [-asym]        strategy channel with the one scale (and zero) repeated per row: the same values,
//                              in a strategy vLLM runs
//   GPTQ act-order             Pareto's act-order keeps static groups (each group's grid from the original
//                              columns, codes in the original order): compressed-tensors' actorder "weight",
//                              which changes how GPTQ calibrated but not the format, so no g_idx is written.
//                              ("group" would mean groups of the permuted order, which Pareto never makes.)
//   bitmask-N:M (fp values)    written dense, pruned weights as zeros, and ignored (vLLM no longer reads
//                              sparse-24 checkpoints)
//   dense, unstructured        as stored, ignored
// Refused, naming the module: other bit widths, SpQR, and a bitmask with quantized values; compressed-tensors
// has no scheme vLLM runs for them (`export hf` writes a dense checkpoint, a recipe with int4/int8 groups one
// this export keeps).
//
// Scales: vLLM loads weight_scale into a parameter of the model's activation dtype (config.json's dtype), so the
// checkpoint is written in float16 by default: Pareto's fp16 scales, and with them the dequantized weights, stay
// exact, and vLLM's fp16 kernels compute (q − z) · s exactly as Pareto does. --dtype keeps the source dtype (or
// another); bfloat16 rounds the scales, and the report counts how many changed.
//
// The rest of the checkpoint (embedding, norms, lm_head) is written dense in that dtype; config.json gets
// quantization_config and its dtype; tokenizer and generation config are copied; pareto-export.json records
// that Pareto wrote the folder. Written under a temporary name and renamed at the end: nothing is left under the
// output name on failure or cancel; --overwrite replaces only a folder Pareto wrote.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/QuantGroupWeight.h"
#include "formats/WeightFormat.h"
#include "util/Progress.h"

namespace pareto {

struct CompressedTensorsExportOptions {
  std::string modelDir;            // a folder written by compress (has pareto.json)
  std::string outDir;              // must not exist unless overwrite
  std::string dtype = "float16";   // of the scales and dense tensors: float16, bfloat16, float32, or "source"
  bool overwrite = false;
};

struct CompressedTensorsExportReport {
  std::string outDir;
  std::string dtype;                       // written
  int64_t tensors = 0;
  int64_t quantizedModules = 0;            // written pack-quantized
  int64_t denseModules = 0;                // linears written dense and ignored (lm_head included when present)
  std::vector<std::string> schemes;        // one line per config group ("group_0: int4 sym group 64, 112 modules")
  std::vector<std::string> ignore;         // quantization_config.ignore
  uint64_t bytes = 0;                      // of model.safetensors' tensor data
  std::vector<std::string> files;          // of the output folder
  std::vector<std::string> notes;          // conversions and what a server may not run, one line each
  double seconds = 0;
};

// One compressed-tensors weight scheme (a config group's "weights").
struct CompressedTensorsScheme {
  int bits = 4;
  bool symmetric = true;
  int64_t groupSize = 0;   // > 0: strategy group; 0: strategy channel
  bool actOrder = false;   // actorder "weight"
  nlohmann::json weightsArgs() const;
  std::string label() const;   // "int4 sym group 128 actorder weight"
  bool operator<(const CompressedTensorsScheme& o) const;
};

// The pack-quantized tensors of one module.
struct PackQuantizedTensors {
  at::Tensor weightPacked;      // int32 [rows, cols·bits/32]
  at::Tensor weightScale;       // scaleDtype [rows, groups]
  at::Tensor weightZeroPoint;   // int32 [ceil(rows·bits/32), groups]; undefined when symmetric
  at::Tensor weightShape;       // int32 [2]
};

// The scheme a stored int format maps to; throws InputError naming `module` (and what would work) for a format
// compressed-tensors has no scheme for.
CompressedTensorsScheme compressedTensorsScheme(const WeightFormat& format, bool actOrder, const std::string& module);

// `q` (4 or 8 bits, groups, channel or tensor) as compressed-tensors stores it, scales in `scaleDtype`. Throws
// InputError naming `module` when the columns are not whole int32 words or a zero is off the grid.
PackQuantizedTensors packQuantized(const QuantGroupWeight& q, at::ScalarType scaleDtype, const std::string& module);

// Throws InputError naming the folder, the module or the dtype for what cannot be exported; Cancelled when the
// token fires (nothing is left behind either way).
CompressedTensorsExportReport exportCompressedTensors(const CompressedTensorsExportOptions& opts,
                                                      const ProgressCallback& progress = {},
                                                      const CancelToken* cancel = nullptr);

}  // namespace pareto
