// A module's weight in its stored format as the named tensors of a compressed folder's safetensors file, and back:
// the one place that knows which tensors each format stores, under which names, in which dtypes and shapes. The
// compress job writes every compressed module through writePackedModule(); the model's loader reads every module
// pareto.json lists through readPackedModule().
//
// The tensors of each format, in the order they are written (<m> = the module, "model.layers.0.mlp.up_proj";
// [rows, cols] its dense weight; v = the columns of the stored values: cols, or k = cols·N/M kept values per row
// behind a bitmask):
//
//   dense            <m>.weight                  floating [rows, cols]
//   bitmask-N:M      <m>.weight.bitmask          int32 [rows, cols/32]            (formats/BitmaskNMWeight.h)
//                    <m>.weight.values           floating [rows, k]               (only when the kept values are fp)
//   intB-…           <m>.weight.qcodes           uint8 [rows, v·B/8], 8-bit symmetric int8 [rows, v]
//                    <m>.weight.qscales          fp16 [rows, v/g], [rows, 1] per channel, [1, 1] per tensor
//                    <m>.weight.qzeros           uint8, the shape of qscales      (-asym only)
//                    <m>.weight.qperm            int32 [cols]                     (GPTQ act-order only)
//                                                                                 (formats/QuantGroupWeight.h)
//   spqr-Bbit…       <m>.weight.spqr.codes, .scale_codes, .zero_codes             uint8 bit streams
//                    <m>.weight.spqr.scale_base, .scale_step                      fp16 [rows/β₂, v/β₁]
//                    <m>.weight.spqr.outlier_rows                                 int32 [rows + 1]
//                    <m>.weight.spqr.outlier_columns                              int16 [nnz] (int32 when v > 32767)
//                    <m>.weight.spqr.outlier_values                               fp16 [nnz]  (formats/SpqrWeight.h)
//   bitmask-N:M+int…, bitmask-N:M+spqr…
//                    <m>.weight.bitmask, then the int or spqr tensors over the kept values
//   gguf-…           <m>.weight.gguf             uint8 [rows, bytes of a row]: each row's ggml blocks back to back,
//                                                rows in the checkpoint's order (formats/GgufBlocks.h)
//
// Besides the format's name, pareto.json records what else decides the tensors (PackedModuleRecord): whether GPTQ's
// act-order stored its column order, and SpQR's second-level group. Adding a format: its tensors go into the one
// list per format in PackedModuleIO.cpp (tensorSlots), which both the writer and the reader follow.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "formats/BitmaskNMWeight.h"
#include "formats/QuantGroupWeight.h"
#include "formats/SpqrWeight.h"
#include "formats/WeightFormat.h"

namespace pareto {

// One module's weight in its stored format: the parts the format has, the others left empty.
struct PackedModule {
  WeightFormat format;
  int64_t rows = 0, cols = 0;               // the dense weight's shape
  at::Tensor dense;                         // dense: the weight [rows, cols], stored in its own dtype
  std::optional<BitmaskNMWeight> bitmask;   // bitmask-N:M: the masks, and the kept values when they are not quantized
  std::optional<QuantGroupWeight> quant;    // int: of the whole weight, or of the bitmask's kept values
  at::Tensor columnOrder;                   // int after GPTQ act-order: int32 [cols], the column quantized k-th
  std::optional<SpqrWeight> spqr;           // spqr: of the whole weight, or of the bitmask's kept values
  at::Tensor gguf;                          // gguf-*: uint8 [rows, gguf::rowBytes(type, cols)]

  // The dense [rows, cols] weight: float32 where the values are quantized, the stored dtype otherwise. Checks the
  // parts first (InputError saying which one is wrong).
  at::Tensor unpack() const;
  // Every byte the tensors take, counted as the formats count them (formats/PackedBlocks.h).
  int64_t storedBytes() const;
};

// What pareto.json records beside a module's format that decides which tensors it stores.
struct PackedModuleRecord {
  bool actOrder = false;        // int: GPTQ act-order stored the column order (<m>.weight.qperm)
  int64_t spqrScaleGroup = 0;   // spqr: rows per second-level group of the scales (pareto.json spqr.scale_group)
};

// The stored tensors read back from: a checkpoint (the model's loader adapts its Checkpoint), or tensors in memory.
class StoredTensors {
 public:
  struct Entry {
    at::ScalarType dtype;
    std::vector<int64_t> shape;
    std::string file;   // the file that holds it, for messages
  };
  virtual ~StoredTensors() = default;
  // The dtype and shape of `name`, before any data is read; nullopt when there is no such tensor.
  virtual std::optional<Entry> find(const std::string& name) const = 0;
  // The tensor's data on the CPU (called only after find() said it is there).
  virtual at::Tensor read(const std::string& name) const = 0;
  // Where the tensors are (a folder, a file), for messages about a missing one.
  virtual std::string location() const = 0;
};

// The tensors of `packed` for `module` on the CPU, in the order above. Throws InputError naming the module when the
// format is not one this version stores or the parts do not fit it (a part missing, a shape that differs).
std::vector<std::pair<std::string, at::Tensor>> writePackedModule(const std::string& module, const PackedModule& packed);

// `module` of dense shape [rows, cols] stored in `format`: every tensor the format has is looked up, its dtype and
// shape checked against the format and the shape before it is read, and the parts checked to fit together. Throws
// InputError naming the file (or `from.location()`), the module and the tensor for anything missing or wrong, and
// the module for a format this version does not store.
PackedModule readPackedModule(const StoredTensors& from, const std::string& module, const WeightFormat& format,
                              int64_t rows, int64_t cols, const PackedModuleRecord& record = {});

// The module a stored part of a packed weight belongs to ("model.layers.0.mlp.up_proj" for
// "model.layers.0.mlp.up_proj.weight.qcodes"); "" for any other tensor, a dense "<m>.weight" included.
std::string packedModuleOf(const std::string& tensor);

}  // namespace pareto
