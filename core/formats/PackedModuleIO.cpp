#include "formats/PackedModuleIO.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <map>

#include "formats/GgufQuant.h"
#include "formats/PackedBlocks.h"
#include "util/Error.h"

namespace pareto {
namespace {

const std::vector<at::ScalarType> kFloating = {at::kFloat, at::kHalf, at::kBFloat16};

// One stored tensor of a format: its name, where it lives in a PackedModule, and the dtypes and shapes it may have.
struct TensorSlot {
  std::string name;
  std::function<at::Tensor&(PackedModule&)> part;
  std::vector<at::ScalarType> dtypes;
  std::vector<std::vector<int64_t>> shapes;   // any one of these
};

// "<module>.weight" and its parts "<module>.weight.<part>".
std::string tensorName(const std::string& module, const std::string& part = {}) {
  return part.empty() ? module + ".weight" : module + ".weight." + part;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The safetensors spelling, as the file the message names says it.
std::string dtypeText(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "F32";
    case at::kHalf: return "F16";
    case at::kBFloat16: return "BF16";
    case at::kInt: return "I32";
    case at::kShort: return "I16";
    case at::kChar: return "I8";
    case at::kByte: return "U8";
    default: return c10::toString(type);
  }
}

std::string expectedText(const TensorSlot& slot) {
  std::string out;
  for (size_t i = 0; i < slot.dtypes.size(); ++i) out += (i ? "|" : "") + dtypeText(slot.dtypes[i]);
  for (size_t i = 0; i < slot.shapes.size(); ++i) out += (i ? " or " : " ") + shapeText(slot.shapes[i]);
  return out;
}

bool fits(const TensorSlot& slot, at::ScalarType dtype, const std::vector<int64_t>& shape) {
  return std::find(slot.dtypes.begin(), slot.dtypes.end(), dtype) != slot.dtypes.end() &&
         std::find(slot.shapes.begin(), slot.shapes.end(), shape) != slot.shapes.end();
}

std::string label(const std::string& module, const WeightFormat& format) {
  return module + " (" + format.name() + ")";
}

bool storable(const WeightFormat& f) {
  const bool mask = f.m == 0 ? f.n == 0 : f.n >= 1 && f.n < f.m && f.m <= 32 && 32 % f.m == 0;
  switch (f.values) {
    case WeightFormat::Values::Float:
      return mask && f.bits == 0;
    case WeightFormat::Values::Int:
      return mask && f.bits >= 2 && f.bits <= 8 &&
             (f.groupSize > 0 || f.groupSize == WeightFormat::kPerChannel || f.groupSize == WeightFormat::kPerTensor);
    case WeightFormat::Values::Spqr:
      return mask && f.bits >= 1 && f.bits <= 8 && f.scaleBits >= 1 && f.scaleBits <= 8 && f.groupSize > 0;
    case WeightFormat::Values::Gguf:
      return f.m == 0 && gguf::traits(f.ggufType).quantized;
  }
  return false;
}

// The parts `format` has for a [rows, cols] weight, with every number set and no tensor yet: what a read fills in
// and what a written module must agree with. Throws InputError naming the module when the format is not one this
// version stores or does not fit the shape.
PackedModule emptyModule(const std::string& module, const WeightFormat& format, int64_t rows, int64_t cols,
                         const PackedModuleRecord& record) {
  if (!storable(format))
    throw InputError(label(module, format) + ": not a weight format this version of Pareto stores");
  auto refuse = [&](const std::string& why) {
    throw InputError(label(module, format) + ": does not fit a [" + std::to_string(rows) + ", " +
                     std::to_string(cols) + "] weight: " + why);
  };
  if (rows < 1 || cols < 1) refuse("empty shape");
  PackedModule p;
  p.format = format;
  p.rows = rows;
  p.cols = cols;
  int64_t valueCols = cols;
  if (format.isGguf()) {
    const int block = gguf::traits(format.ggufType).weightsPerBlock;
    if (cols % block != 0)
      refuse(std::to_string(cols) + " columns are not whole " + std::to_string(block) + "-weight blocks");
    return p;
  }
  if (format.isBitmask()) {
    if (cols % packed::kMaskWordColumns != 0) refuse("a bitmask needs the columns in whole mask words of 32");
    p.bitmask.emplace();
    p.bitmask->n = format.n;
    p.bitmask->m = format.m;
    p.bitmask->rows = rows;
    p.bitmask->cols = cols;
    valueCols = cols * format.n / format.m;
  }
  if (format.values == WeightFormat::Values::Int) {
    const int64_t group = format.groupSize > 0 ? format.groupSize : valueCols;
    if (valueCols % group != 0)
      refuse("groups of " + std::to_string(group) + " do not divide " + std::to_string(valueCols) + " value columns");
    if (!(format.bits == 8 || (format.bits == 4 && valueCols % 2 == 0) || valueCols % 8 == 0))
      refuse(std::to_string(valueCols) + " value columns do not fill whole bytes of " +
             std::to_string(format.bits) + "-bit codes");
    QuantGroupWeight& q = p.quant.emplace();
    q.bits = format.bits;
    q.symmetric = format.symmetric;
    q.groupSize = group;
    q.rows = rows;
    q.cols = valueCols;
  } else if (format.values == WeightFormat::Values::Spqr) {
    if (valueCols % format.groupSize != 0)
      refuse("groups of " + std::to_string(format.groupSize) + " do not divide " + std::to_string(valueCols) +
             " value columns");
    if (record.spqrScaleGroup < 1 || rows % record.spqrScaleGroup != 0)
      refuse("second-level groups of " + std::to_string(record.spqrScaleGroup) + " rows do not divide the rows");
    SpqrWeight& s = p.spqr.emplace();
    s.bits = format.bits;
    s.scaleBits = format.scaleBits;
    s.groupSize = format.groupSize;
    s.scaleGroup = record.spqrScaleGroup;
    s.rows = rows;
    s.cols = valueCols;
  }
  return p;
}

// The tensors of a module laid out as `layout` (emptyModule), in the order they are written: the one list per
// format. `outliers`: SpQR's outlier count, which only the stored tensors know.
std::vector<TensorSlot> tensorSlots(const std::string& module, const PackedModule& layout, bool actOrder,
                                    int64_t outliers) {
  const int64_t rows = layout.rows;
  std::vector<TensorSlot> slots;
  if (layout.format.isDense()) {
    slots.push_back({tensorName(module), [](PackedModule& p) -> at::Tensor& { return p.dense; }, kFloating,
                     {{rows, layout.cols}}});
    return slots;
  }
  if (layout.format.isGguf()) {
    slots.push_back({tensorName(module, "gguf"), [](PackedModule& p) -> at::Tensor& { return p.gguf; }, {at::kByte},
                     {{rows, gguf::rowBytes(layout.format.ggufType, layout.cols)}}});
    return slots;
  }
  if (layout.bitmask) {
    const BitmaskNMWeight& b = *layout.bitmask;
    slots.push_back({tensorName(module, "bitmask"), [](PackedModule& p) -> at::Tensor& { return p.bitmask->masks; },
                     {at::kInt}, {{rows, b.cols / packed::kMaskWordColumns}}});
    if (!layout.format.isQuantized())
      slots.push_back({tensorName(module, "values"), [](PackedModule& p) -> at::Tensor& { return p.bitmask->values; },
                       kFloating, {{rows, b.cols * b.n / b.m}}});
  }
  if (layout.quant) {
    const QuantGroupWeight& q = *layout.quant;
    const int64_t groups = q.cols / q.groupSize;
    // One grid per row is also how folders of earlier versions store a per-tensor grid (one scale row).
    std::vector<std::vector<int64_t>> scaleShapes = {{rows, groups}};
    if (layout.format.groupSize == WeightFormat::kPerTensor) scaleShapes = {{1, 1}};
    else if (groups == 1) scaleShapes.push_back({1, 1});
    slots.push_back({tensorName(module, "qcodes"), [](PackedModule& p) -> at::Tensor& { return p.quant->codes; },
                     {q.bits == 8 && q.symmetric ? at::kChar : at::kByte},
                     {{rows, q.bits == 8 ? q.cols : q.cols * q.bits / 8}}});
    slots.push_back({tensorName(module, "qscales"), [](PackedModule& p) -> at::Tensor& { return p.quant->scales; }, {at::kHalf},
                     scaleShapes});
    if (!q.symmetric)
      slots.push_back({tensorName(module, "qzeros"), [](PackedModule& p) -> at::Tensor& { return p.quant->zeros; }, {at::kByte},
                       scaleShapes});
    if (actOrder)
      slots.push_back({tensorName(module, "qperm"), [](PackedModule& p) -> at::Tensor& { return p.columnOrder; }, {at::kInt},
                       {{layout.cols}}});
  }
  if (layout.spqr) {
    const SpqrWeight& s = *layout.spqr;
    const int64_t groups = s.cols / s.groupSize;
    auto part = [&](const char* name, at::Tensor SpqrWeight::*member, at::ScalarType dtype,
                    std::vector<int64_t> shape) {
      slots.push_back({tensorName(module, std::string("spqr.") + name), [member](PackedModule& p) -> at::Tensor& { return (*p.spqr).*member; },
                       {dtype}, {std::move(shape)}});
    };
    part("codes", &SpqrWeight::codes, at::kByte, {packed::codeStreamBytes(rows * s.cols, s.bits)});
    part("scale_codes", &SpqrWeight::scaleCodes, at::kByte, {packed::codeStreamBytes(rows * groups, s.scaleBits)});
    part("zero_codes", &SpqrWeight::zeroCodes, at::kByte, {packed::codeStreamBytes(rows * groups, s.bits)});
    part("scale_base", &SpqrWeight::scaleBase, at::kHalf, {rows / s.scaleGroup, groups});
    part("scale_step", &SpqrWeight::scaleStep, at::kHalf, {rows / s.scaleGroup, groups});
    part("outlier_rows", &SpqrWeight::outlierRowOffsets, at::kInt, {rows + 1});
    part("outlier_columns", &SpqrWeight::outlierColumns,
         packed::spqrOutlierIndexBytes(s.cols) == 2 ? at::kShort : at::kInt, {outliers});
    part("outlier_values", &SpqrWeight::outlierValues, at::kHalf, {outliers});
  }
  return slots;
}

// A module to write must carry the parts and numbers its format has.
void checkSameLayout(const std::string& module, const PackedModule& layout, const PackedModule& given) {
  auto refuse = [&](const std::string& what) {
    throw InputError(label(module, layout.format) + ": cannot be written: " + what + " do not fit the format");
  };
  if (layout.format.isDense() != given.dense.defined()) refuse("the dense weight and the format");
  if (layout.format.isGguf() != given.gguf.defined()) refuse("the GGUF blocks and the format");
  if (layout.bitmask.has_value() != given.bitmask.has_value() || layout.quant.has_value() != given.quant.has_value() ||
      layout.spqr.has_value() != given.spqr.has_value())
    refuse("the packed parts (bitmask, int grid, SpQR)");
  if (layout.bitmask && (given.bitmask->n != layout.bitmask->n || given.bitmask->m != layout.bitmask->m ||
                         given.bitmask->rows != layout.bitmask->rows || given.bitmask->cols != layout.bitmask->cols))
    refuse("the bitmask's pattern or shape");
  if (layout.quant) {
    const QuantGroupWeight &a = *layout.quant, &b = *given.quant;
    if (a.bits != b.bits || a.symmetric != b.symmetric || a.groupSize != b.groupSize || a.rows != b.rows ||
        a.cols != b.cols)
      refuse("the int grid's bits, symmetry, group size or shape");
  }
  if (given.columnOrder.defined() && !layout.quant) refuse("a column order without an int grid");
  if (layout.spqr) {
    const SpqrWeight &a = *layout.spqr, &b = *given.spqr;
    if (a.bits != b.bits || a.scaleBits != b.scaleBits || a.groupSize != b.groupSize || a.rows != b.rows ||
        a.cols != b.cols)
      refuse("the SpQR bits, scale bits, group size or shape");
  }
}

}  // namespace

at::Tensor PackedModule::unpack() const {
  if (format.isDense()) {
    if (!dense.defined() || dense.dim() != 2 || dense.size(0) != rows || dense.size(1) != cols)
      throw InputError("dense weight must be [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
    return dense;
  }
  if (format.isGguf()) {
    const int64_t bytes = gguf::rowBytes(format.ggufType, cols);
    if (!gguf.defined() || gguf.scalar_type() != at::kByte || gguf.dim() != 2 || gguf.size(0) != rows ||
        gguf.size(1) != bytes)
      throw InputError("GGUF blocks must be uint8 [" + std::to_string(rows) + ", " + std::to_string(bytes) + "]");
    const at::Tensor blocks = gguf.contiguous();
    at::Tensor out = at::empty({rows, cols}, at::kFloat);
    gguf::dequantizeRows(format.ggufType, blocks.data_ptr<uint8_t>(), rows, cols, out.data_ptr<float>());
    return out;
  }
  at::Tensor values;
  if (spqr) values = spqr->unpack();
  else if (quant) values = quant->unpack();
  if (!bitmask) return values;
  if (!values.defined()) return bitmask->unpack();
  BitmaskNMWeight withValues = *bitmask;
  withValues.values = values;
  return withValues.unpack();
}

int64_t PackedModule::storedBytes() const {
  auto bytesOf = [](const at::Tensor& t) { return t.defined() ? t.numel() * int64_t(t.element_size()) : 0; };
  int64_t bytes = bytesOf(dense) + bytesOf(gguf);
  if (bitmask) bytes += bytesOf(bitmask->masks) + (format.isQuantized() ? 0 : bytesOf(bitmask->values));
  if (quant) bytes += quant->storedBytes() + bytesOf(columnOrder);
  if (spqr) bytes += spqr->storedBytes();
  return bytes;
}

std::vector<std::pair<std::string, at::Tensor>> writePackedModule(const std::string& module,
                                                                  const PackedModule& packed) {
  PackedModuleRecord record;
  record.actOrder = packed.columnOrder.defined();
  record.spqrScaleGroup = packed.spqr ? packed.spqr->scaleGroup : 0;
  const PackedModule layout = emptyModule(module, packed.format, packed.rows, packed.cols, record);
  checkSameLayout(module, layout, packed);
  PackedModule parts = packed;
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const TensorSlot& slot :
       tensorSlots(module, layout, record.actOrder, packed.spqr ? packed.spqr->outlierColumns.numel() : 0)) {
    const at::Tensor& t = slot.part(parts);
    if (!t.defined() || !fits(slot, t.scalar_type(), t.sizes().vec()))
      throw InputError("tensor " + slot.name + " of " + label(module, packed.format) + " cannot be written: it is " +
                       (t.defined() ? dtypeText(t.scalar_type()) + " " + shapeText(t.sizes().vec()) : "missing") +
                       ", the format stores " + expectedText(slot));
    tensors.emplace_back(slot.name, t.to(at::kCPU).contiguous());
  }
  return tensors;
}

PackedModule readPackedModule(const StoredTensors& from, const std::string& module, const WeightFormat& format,
                              int64_t rows, int64_t cols, const PackedModuleRecord& record) {
  PackedModule p;
  try {
    p = emptyModule(module, format, rows, cols, record);
  } catch (const InputError& err) {
    throw InputError(fileMessage(from.location(), err.what()));
  }
  int64_t outliers = 0;
  if (p.spqr)
    if (auto e = from.find(tensorName(module, "spqr.outlier_columns")); e && e->shape.size() == 1) outliers = e->shape[0];
  std::map<std::string, std::string> files;
  for (const TensorSlot& slot : tensorSlots(module, p, record.actOrder, outliers)) {
    const std::optional<StoredTensors::Entry> e = from.find(slot.name);
    if (!e)
      throw InputError(fileMessage(from.location(), "tensor " + slot.name + " of " + label(module, format) +
                                                        " is missing"));
    if (!fits(slot, e->dtype, e->shape))
      throw InputError(fileMessage(e->file, "tensor " + slot.name + " of " + label(module, format) + " is " +
                                                dtypeText(e->dtype) + " " + shapeText(e->shape) +
                                                ", but the format stores " + expectedText(slot) + " for a [" +
                                                std::to_string(rows) + ", " + std::to_string(cols) + "] weight"));
    slot.part(p) = from.read(slot.name);
    files[slot.name] = e->file;
  }
  const std::string file = files.begin()->second;
  try {
    if (p.quant) p.quant->checkConsistent();
    if (p.spqr) p.spqr->checkConsistent();
  } catch (const InputError& err) {
    throw InputError(fileMessage(file, label(module, format) + ": " + err.what()));
  }
  if (record.actOrder) {
    // Not needed to dequantize (the codes are in the original column order), but kernels regroup columns by it.
    const std::string name = tensorName(module, "qperm");
    try {
      checkColumnPermutation(p.columnOrder, cols);
    } catch (const InputError& err) {
      throw InputError(fileMessage(files.at(name), "tensor " + name + " (act-order permutation of " + module +
                                                       "): " + err.what()));
    }
  }
  return p;
}

std::string packedModuleOf(const std::string& tensor) {
  const size_t pos = tensor.rfind(tensorName("") + ".");
  return pos == std::string::npos ? std::string() : tensor.substr(0, pos);
}

}  // namespace pareto
