// The one vocabulary of stored weight formats: the name pareto.json records for a module, inspect and the
// workbench show, the run store keeps, `bench kernels` / `bench decode --format` take, and the runtime reads to
// pick a kernel. A format says how a [rows, cols] weight is laid out; the per-module numbers that do not change
// the layout's kind (act-order, outlier count, the exact SpQR second-level group) live beside it in the manifest.
//
//   dense                         the checkpoint's dtype, zeros included (also unstructured pruning)
//   bitmask-N:M                   a uint32 mask per 32 columns + the kept values in fp (formats/BitmaskNMWeight.h)
//   intB-gG | intB-channel | intB-tensor [-asym]
//                                 B-bit codes with an fp16 scale per G values / per row / for the whole tensor,
//                                 and a uint8 zero per scale when asymmetric (formats/QuantGroupWeight.h)
//   spqr-Bbit [-gG] [-sS]         SpQR: B-bit codes in groups of G (default 16) with S-bit (default 3) quantized
//                                 scales and zeros, plus fp16 CSR outliers (formats/SpqrWeight.h)
//   bitmask-N:M+<int or spqr>     the mask, and the kept values quantized as above (groups of kept values)
//   gguf-q8_0 | gguf-q4_0 | gguf-q4_k | gguf-q6_k
//                                 llama.cpp's blocks, byte for byte as a GGUF file holds them (formats/GgufBlocks.h);
//                                 bits per weight are ggml's: 8.5, 4.5, 4.5, 6.5625. Never behind a bitmask.
//
// Folders written before this vocabulary ("int4", "spqr3", "bitmask-2:4+int4") still load: the manifest reader
// maps them with fromStored().
#pragma once

#include <cstdint>
#include <string>

#include "formats/GgufBlocks.h"

namespace pareto {

struct WeightFormat {
  enum class Values { Float, Int, Spqr, Gguf };
  static constexpr int64_t kPerChannel = 0;    // groupSize of an int grid with one scale per row
  static constexpr int64_t kPerTensor = -1;    // ... with one scale for the whole weight
  static constexpr int64_t kSpqrGroup = 16;    // SpQR defaults (the paper's and the kernel's)
  static constexpr int kSpqrScaleBits = 3;

  int n = 0, m = 0;                 // N:M bitmask over the columns; m == 0: no mask
  Values values = Values::Float;    // how the (kept) values are stored
  int bits = 0;                     // Int, Spqr: bits of a code
  int64_t groupSize = 0;            // Int: values per scale, or kPerChannel / kPerTensor; Spqr: values per group
  bool symmetric = true;            // Int
  int scaleBits = 0;                // Spqr
  gguf::TensorType ggufType = gguf::TensorType::F32;   // Gguf: a block-quantized type (never F32 then)

  static WeightFormat dense() { return {}; }
  static WeightFormat ggufBlocks(gguf::TensorType type);
  // The canonical name above; InputError naming the grammar for anything else.
  static WeightFormat parse(const std::string& name);
  // The names of folders from before this vocabulary: "intB", "spqrB", "bitmask-N:M+intB|spqrB", completed by
  // the manifest's grid (columns per scale, `cols` of the weight; spqr group and scale bits).
  static WeightFormat fromStored(const std::string& name, int64_t columnsPerScale, int64_t cols, bool symmetric,
                                 int64_t spqrGroup, int spqrScaleBits);

  std::string name() const;
  bool isDense() const { return m == 0 && values == Values::Float; }
  bool isBitmask() const { return m > 0; }
  bool isQuantized() const { return values != Values::Float; }
  bool isGguf() const { return values == Values::Gguf; }
  // Bits per weight where the format alone fixes them (gguf-*: ggml's block bytes · 8 / block weights); 0 for the
  // formats whose scales, masks or outliers make them depend on the shape (their packed weights count them).
  double blockBitsPerWeight() const;

  // The name of the CUDA kernel (and of its `bench kernels` rows) that runs this format, "" when none does:
  // bitmask N:M of fp values, int4/int8 per channel or in groups, SpQR 2-4 bit, N:M + int4 in groups.
  std::string kernel() const;

  bool operator==(const WeightFormat& o) const;
  bool operator!=(const WeightFormat& o) const { return !(*this == o); }
};

}  // namespace pareto
