// formats/PackedModuleIO.h: every stored format written to a safetensors file and read back to the identical
// packed module, and the refusals of a read (a missing tensor, a wrong dtype, a wrong shape, parts that do not
// fit together, an unknown format) and of a write (parts the format does not have), each naming the file, the
// module and the tensor.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "compress/QuantGrid.h"
#include "formats/GgufQuant.h"
#include "compress/Spqr.h"
#include "formats/PackedModuleIO.h"
#include "InputErrors.h"
#include "checkpoint/Safetensors.h"
#include "model/CheckpointTensors.h"
#include "model/TensorIO.h"
#include "SharedData.h"
#include "util/Error.h"

namespace pareto {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using test::inputErrorOf;

constexpr int64_t kRows = 32, kCols = 64;

// The folder's model.safetensors as PackedModuleIO reads it.
struct FileTensors {
  explicit FileTensors(const std::string& dir) : ckpt(Checkpoint::open(dir)), tensors(ckpt) {}
  FileTensors(const FileTensors&) = delete;   // `tensors` refers to this `ckpt`
  Checkpoint ckpt;
  CheckpointTensors tensors;
};

at::Tensor weight(uint64_t seed) {
  at::manual_seed(seed);
  return at::randn({kRows, kCols}, at::kFloat);
}

// Keeps the 2 largest |w| of every 4 consecutive columns.
at::Tensor twoOfFour(const at::Tensor& w) {
  const at::Tensor groups = w.abs().reshape({kRows, kCols / 4, 4});
  const at::Tensor top = std::get<1>(groups.topk(2, -1));
  return at::zeros_like(groups, at::kBool).scatter_(-1, top, true).reshape({kRows, kCols});
}

SpqrOptions spqrOptions(int64_t groupSize, const at::Tensor& keep = {}) {
  SpqrOptions o;
  o.bits = 3;
  o.groupSize = groupSize;
  o.scaleBits = 3;
  o.scaleGroup = 16;
  o.outlierRatio = 0.02;
  o.keep = keep;
  return o;
}

double relativeError(const at::Tensor& approx, const at::Tensor& exact) {
  return (approx - exact).norm().item<double>() / exact.norm().item<double>();
}

at::Tensor hessian(uint64_t seed) {
  at::manual_seed(seed);
  const at::Tensor x = at::randn({256, kCols}, at::kFloat);
  return x.t().matmul(x);
}

PackedModule packedModule(const std::string& formatName, uint64_t seed) {
  PackedModule p;
  p.format = WeightFormat::parse(formatName);
  p.rows = kRows;
  p.cols = kCols;
  const at::Tensor w = weight(seed);
  const WeightFormat& f = p.format;
  if (f.isDense()) p.dense = w.to(at::kHalf);
  at::Tensor values = w;
  if (f.isBitmask()) {
    p.bitmask = BitmaskNMWeight::pack(w.to(at::kBFloat16), twoOfFour(w), f.n, f.m);
    values = p.bitmask->values.to(at::kFloat);
    if (f.isQuantized()) p.bitmask->values = at::Tensor();
  }
  if (f.isGguf()) {
    const std::vector<uint8_t> bytes = gguf::quantizeRows(f.ggufType, w.data_ptr<float>(), kRows, kCols);
    p.gguf = at::tensor(at::ArrayRef<uint8_t>(bytes), at::kByte).reshape({kRows, -1});
  }
  if (f.values == WeightFormat::Values::Int) {
    const QuantSpec spec = f.groupSize == WeightFormat::kPerChannel  ? QuantSpec::channel(f.bits, f.symmetric)
                           : f.groupSize == WeightFormat::kPerTensor ? QuantSpec::tensor(f.bits, f.symmetric)
                                                                     : QuantSpec::group(f.bits, f.groupSize, f.symmetric);
    p.quant = QuantGroupWeight::pack(rtnQuantize(values, spec), spec);
  } else if (f.values == WeightFormat::Values::Spqr) {
    if (f.isBitmask()) {
      const at::Tensor keep = twoOfFour(w);
      p.spqr = SpqrWeight::pack(spqrKeptColumns(spqrQuantize(w, hessian(seed), spqrOptions(2 * f.groupSize, keep)), keep));
    } else {
      p.spqr = SpqrWeight::pack(spqrQuantize(w, hessian(seed), spqrOptions(f.groupSize)));
    }
  }
  return p;
}

void expectSameTensor(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.defined(), b.defined()) << what;
  if (!a.defined()) return;
  EXPECT_EQ(a.scalar_type(), b.scalar_type()) << what;
  EXPECT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_TRUE(a.sizes() == b.sizes() && at::equal(a, b)) << what;
}

// The numbers of each part, then its tensors.
auto numbers(const BitmaskNMWeight& b) { return std::make_tuple(b.n, b.m, b.rows, b.cols); }
auto numbers(const QuantGroupWeight& q) { return std::make_tuple(q.bits, q.symmetric, q.groupSize, q.rows, q.cols); }
auto numbers(const SpqrWeight& s) {
  return std::make_tuple(s.bits, s.scaleBits, s.groupSize, s.scaleGroup, s.rows, s.cols);
}
std::vector<at::Tensor> tensorsOf(const BitmaskNMWeight& b) { return {b.masks, b.values}; }
std::vector<at::Tensor> tensorsOf(const QuantGroupWeight& q) { return {q.codes, q.scales, q.zeros}; }
std::vector<at::Tensor> tensorsOf(const SpqrWeight& s) {
  return {s.codes, s.scaleCodes, s.zeroCodes, s.scaleBase, s.scaleStep, s.outlierRowOffsets, s.outlierColumns,
          s.outlierValues};
}

template <class Part>
void expectSamePart(const std::optional<Part>& a, const std::optional<Part>& b, const std::string& what) {
  ASSERT_EQ(a.has_value(), b.has_value()) << what;
  if (!a) return;
  EXPECT_EQ(numbers(*a), numbers(*b)) << what;
  const std::vector<at::Tensor> ta = tensorsOf(*a), tb = tensorsOf(*b);
  for (size_t i = 0; i < ta.size(); ++i) expectSameTensor(ta[i], tb[i], what + " tensor " + std::to_string(i));
}

void expectSameModule(const PackedModule& a, const PackedModule& b) {
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  expectSameTensor(a.dense, b.dense, "dense");
  expectSameTensor(a.columnOrder, b.columnOrder, "column order");
  expectSameTensor(a.gguf, b.gguf, "GGUF blocks");
  expectSamePart(a.bitmask, b.bitmask, "bitmask");
  expectSamePart(a.quant, b.quant, "int grid");
  expectSamePart(a.spqr, b.spqr, "SpQR");
}

PackedModuleRecord recordOf(const PackedModule& p) {
  PackedModuleRecord r;
  r.actOrder = p.columnOrder.defined();
  r.spqrScaleGroup = p.spqr ? p.spqr->scaleGroup : 0;
  return r;
}

class PackedModuleIO : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::scratchDir("packed-module-io"); }
  void TearDown() override { removeTree(dir_); }

  // Writes `tensors` as the folder's model.safetensors and opens it.
  FileTensors stored(const NamedTensors& tensors) {
    writeSafetensors(dir_ + "/model.safetensors", tensors);
    return FileTensors(dir_);
  }
  std::string fileName() const { return dir_ + "/model.safetensors"; }

  std::string dir_;
};

const char* kModule = "model.layers.0.mlp.up_proj";

TEST_F(PackedModuleIO, EveryFormatReadsBackAsWritten) {
  const std::vector<std::string> formats = {
      "dense",          "bitmask-2:4",     "int4-g32",          "int4-g16-asym",         "int8-channel",
      "int8-channel-asym", "int4-tensor",  "int3-g32",          "int2-channel-asym",     "spqr-3bit",
      "bitmask-2:4+int4-g16", "bitmask-2:4+int8-channel-asym", "bitmask-2:4+spqr-3bit", "gguf-q8_0", "gguf-q4_0"};
  std::vector<PackedModule> written;
  NamedTensors tensors;
  for (size_t i = 0; i < formats.size(); ++i) {
    SCOPED_TRACE(formats[i]);
    written.push_back(packedModule(formats[i], 10 + i));
    ASSERT_EQ(written.back().format.name(), formats[i]);
    for (auto& t : writePackedModule("model.layers." + std::to_string(i) + ".mlp.up_proj", written.back()))
      tensors.push_back(std::move(t));
  }
  // GPTQ's act-order stores the column order beside the codes.
  PackedModule actOrder = packedModule("int4-g16", 99);
  actOrder.columnOrder = at::randperm(kCols, at::kInt);
  for (auto& t : writePackedModule("model.layers.99.mlp.up_proj", actOrder)) tensors.push_back(std::move(t));

  const FileTensors file = stored(tensors);
  for (size_t i = 0; i < formats.size(); ++i) {
    SCOPED_TRACE(formats[i]);
    const PackedModule read = readPackedModule(file.tensors, "model.layers." + std::to_string(i) + ".mlp.up_proj",
                                               written[i].format, kRows, kCols, recordOf(written[i]));
    expectSameModule(read, written[i]);
    EXPECT_EQ(read.storedBytes(), written[i].storedBytes());
    EXPECT_TRUE(at::equal(read.unpack(), written[i].unpack()));
  }
  const PackedModule read = readPackedModule(file.tensors, "model.layers.99.mlp.up_proj", actOrder.format, kRows, kCols,
                                             recordOf(actOrder));
  expectSameModule(read, actOrder);
  EXPECT_EQ(read.storedBytes(), actOrder.storedBytes());
}

TEST_F(PackedModuleIO, WritesTheTensorsOfTheFormatInTheirOrder) {
  auto names = [](const NamedTensors& tensors) {
    std::vector<std::string> out;
    for (const auto& [name, t] : tensors) out.push_back(name.substr(std::string(kModule).size()));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(writePackedModule(kModule, packedModule("dense", 1))), V{".weight"});
  EXPECT_EQ(names(writePackedModule(kModule, packedModule("bitmask-2:4", 1))), (V{".weight.bitmask", ".weight.values"}));
  EXPECT_EQ(names(writePackedModule(kModule, packedModule("int4-g32-asym", 1))),
            (V{".weight.qcodes", ".weight.qscales", ".weight.qzeros"}));
  EXPECT_EQ(names(writePackedModule(kModule, packedModule("bitmask-2:4+int4-g16", 1))),
            (V{".weight.bitmask", ".weight.qcodes", ".weight.qscales"}));
  EXPECT_EQ(names(writePackedModule(kModule, packedModule("bitmask-2:4+spqr-3bit", 1))),
            (V{".weight.bitmask", ".weight.spqr.codes", ".weight.spqr.scale_codes", ".weight.spqr.zero_codes",
               ".weight.spqr.scale_base", ".weight.spqr.scale_step", ".weight.spqr.outlier_rows",
               ".weight.spqr.outlier_columns", ".weight.spqr.outlier_values"}));
  EXPECT_EQ(names(writePackedModule(kModule, packedModule("gguf-q4_0", 1))), V{".weight.gguf"});
  // Each packed part names its module; a dense weight is no packed part.
  for (const char* f : {"bitmask-2:4", "int4-g32-asym", "bitmask-2:4+spqr-3bit", "gguf-q8_0"})
    for (const auto& [name, t] : writePackedModule(kModule, packedModule(f, 1))) EXPECT_EQ(packedModuleOf(name), kModule);
  EXPECT_EQ(packedModuleOf(std::string(kModule) + ".weight"), "");
  // Every byte counted is a byte written.
  for (const char* f : {"dense", "bitmask-2:4", "int3-g32", "spqr-3bit", "bitmask-2:4+int4-g16", "gguf-q4_0"}) {
    const PackedModule p = packedModule(f, 2);
    int64_t bytes = 0;
    for (const auto& [name, t] : writePackedModule(kModule, p)) bytes += t.numel() * int64_t(t.element_size());
    EXPECT_EQ(p.storedBytes(), bytes) << f;
  }
}

// The tensors of one int4-g32-asym module, with `change` applied to the one named `target`.
NamedTensors alteredInt4(const std::string& target, const std::function<at::Tensor(const at::Tensor&)>& change) {
  NamedTensors out;
  for (auto& [name, t] : writePackedModule(kModule, packedModule("int4-g32-asym", 3)))
    if (name != target) out.emplace_back(name, t);
    else if (at::Tensor changed = change(t); changed.defined()) out.emplace_back(name, changed);
  return out;
}

TEST_F(PackedModuleIO, RefusesAMissingTensorNamingModuleAndTensor) {
  const std::string tensor = std::string(kModule) + ".weight.qzeros";
  const FileTensors file = stored(alteredInt4(tensor, [](const at::Tensor&) { return at::Tensor(); }));
  EXPECT_THAT(inputErrorOf([&] {
                readPackedModule(file.tensors, kModule, WeightFormat::parse("int4-g32-asym"), kRows, kCols);
              }),
              AllOf(HasSubstr(dir_), HasSubstr(tensor), HasSubstr(kModule), HasSubstr("missing")));
}

TEST_F(PackedModuleIO, RefusesAWrongDtypeNamingFileModuleAndTensor) {
  const std::string tensor = std::string(kModule) + ".weight.qscales";
  const FileTensors file = stored(alteredInt4(tensor, [](const at::Tensor& t) { return t.to(at::kFloat); }));
  EXPECT_THAT(inputErrorOf([&] {
                readPackedModule(file.tensors, kModule, WeightFormat::parse("int4-g32-asym"), kRows, kCols);
              }),
              AllOf(HasSubstr(fileName()), HasSubstr(tensor), HasSubstr(kModule), HasSubstr("is F32 [32, 2]"),
                    HasSubstr("stores F16 [32, 2]")));
}

TEST_F(PackedModuleIO, RefusesAWrongShapeNamingFileModuleAndTensor) {
  const std::string tensor = std::string(kModule) + ".weight.qcodes";
  const FileTensors file = stored(alteredInt4(tensor, [](const at::Tensor& t) { return t.narrow(1, 0, 16).clone(); }));
  EXPECT_THAT(inputErrorOf([&] {
                readPackedModule(file.tensors, kModule, WeightFormat::parse("int4-g32-asym"), kRows, kCols);
              }),
              AllOf(HasSubstr(fileName()), HasSubstr(tensor), HasSubstr(kModule), HasSubstr("U8 [32, 16]"),
                    HasSubstr("U8 [32, 32]")));
  // The same tensors under a module of other columns do not fit either.
  const FileTensors whole = stored(alteredInt4("", {}));
  EXPECT_THAT(inputErrorOf([&] {
                readPackedModule(whole.tensors, kModule, WeightFormat::parse("int4-g32-asym"), kRows, 2 * kCols);
              }),
              AllOf(HasSubstr(tensor), HasSubstr(kModule), HasSubstr("[32, 128] weight")));
}

// gguf-*: one uint8 tensor of ggml's blocks, [rows, bytes of a row]; its bytes decode as ggml's decoder does.
TEST_F(PackedModuleIO, GgufBlocksAreOneByteTensorCheckedForDtypeShapeAndBlocks) {
  const PackedModule p = packedModule("gguf-q4_0", 8);
  ASSERT_EQ(p.gguf.sizes(), at::IntArrayRef({kRows, kCols / 32 * 18}));
  EXPECT_EQ(p.storedBytes(), kRows * kCols * 9 / 16);   // 4.5 bits per weight
  at::Tensor expected = at::empty({kRows, kCols}, at::kFloat);
  gguf::dequantizeRows(gguf::TensorType::Q4_0, p.gguf.data_ptr<uint8_t>(), kRows, kCols, expected.data_ptr<float>());
  EXPECT_TRUE(at::equal(p.unpack(), expected));
  EXPECT_LT(relativeError(p.unpack(), weight(8)), 0.15);

  const std::string tensor = std::string(kModule) + ".weight.gguf";
  const FileTensors asInt8 = stored({{tensor, p.gguf.to(at::kChar)}});
  EXPECT_THAT(inputErrorOf([&] { readPackedModule(asInt8.tensors, kModule, p.format, kRows, kCols); }),
              AllOf(HasSubstr(fileName()), HasSubstr(tensor), HasSubstr(kModule), HasSubstr("is I8 [32, 36]"),
                    HasSubstr("stores U8 [32, 36]")));
  const FileTensors cut = stored({{tensor, p.gguf.narrow(1, 0, 18).clone()}});
  EXPECT_THAT(inputErrorOf([&] { readPackedModule(cut.tensors, kModule, p.format, kRows, kCols); }),
              AllOf(HasSubstr(tensor), HasSubstr(kModule), HasSubstr("U8 [32, 18]"), HasSubstr("[32, 64] weight")));
  // A q8_0 module has other bytes a row: the same tensor is not one.
  const FileTensors whole = stored({{tensor, p.gguf}});
  EXPECT_THAT(inputErrorOf([&] {
                readPackedModule(whole.tensors, kModule, WeightFormat::parse("gguf-q8_0"), kRows, kCols);
              }),
              AllOf(HasSubstr(tensor), HasSubstr("gguf-q8_0"), HasSubstr("stores U8 [32, 68]")));
  // 64 columns are no whole 256-weight super-block.
  EXPECT_THAT(inputErrorOf([&] {
                readPackedModule(whole.tensors, kModule, WeightFormat::parse("gguf-q4_k"), kRows, kCols);
              }),
              AllOf(HasSubstr(kModule), HasSubstr("64 columns are not whole 256-weight blocks")));
  PackedModule missing = p;
  missing.gguf = at::Tensor();
  EXPECT_THAT(inputErrorOf([&] { writePackedModule(kModule, missing); }),
              AllOf(HasSubstr(kModule), HasSubstr("GGUF blocks")));
}

TEST_F(PackedModuleIO, RefusesPartsThatDoNotFitTogether) {
  // SpQR row offsets that are not a CSR over the stored outliers.
  NamedTensors tensors = writePackedModule(kModule, packedModule("spqr-3bit", 4));
  for (auto& [name, t] : tensors)
    if (name == std::string(kModule) + ".weight.spqr.outlier_rows") t[kRows] = t[kRows].item<int>() + 1;
  const FileTensors file = stored(tensors);
  PackedModuleRecord record;
  record.spqrScaleGroup = 16;
  EXPECT_THAT(inputErrorOf([&] {
                readPackedModule(file.tensors, kModule, WeightFormat::parse("spqr-3bit"), kRows, kCols, record);
              }),
              AllOf(HasSubstr(fileName()), HasSubstr(kModule), HasSubstr("not a valid CSR")));
}

TEST_F(PackedModuleIO, RefusesAnActOrderThatIsNoPermutation) {
  PackedModule p = packedModule("int4-g16", 5);
  p.columnOrder = at::arange(kCols, at::kInt);
  p.columnOrder[3] = 4;
  const FileTensors file = stored(writePackedModule(kModule, p));
  const std::string tensor = std::string(kModule) + ".weight.qperm";
  EXPECT_THAT(inputErrorOf([&] { readPackedModule(file.tensors, kModule, p.format, kRows, kCols, recordOf(p)); }),
              AllOf(HasSubstr(fileName()), HasSubstr(tensor), HasSubstr(kModule), HasSubstr("not a permutation")));
}

TEST_F(PackedModuleIO, RefusesAnUnknownFormatNamingTheModule) {
  const FileTensors file = stored(writePackedModule(kModule, packedModule("int4-g32", 6)));
  WeightFormat nineBits = WeightFormat::parse("int4-g32");
  nineBits.bits = 9;
  EXPECT_THAT(inputErrorOf([&] { readPackedModule(file.tensors, kModule, nineBits, kRows, kCols); }),
              AllOf(HasSubstr(dir_), HasSubstr(kModule), HasSubstr("not a weight format")));
  PackedModule p = packedModule("int4-g32", 6);
  p.format = nineBits;
  EXPECT_THAT(inputErrorOf([&] { writePackedModule(kModule, p); }),
              AllOf(HasSubstr(kModule), HasSubstr("not a weight format")));
  WeightFormat badMask = WeightFormat::parse("bitmask-2:4");
  badMask.m = 3;
  EXPECT_THAT(inputErrorOf([&] { readPackedModule(file.tensors, kModule, badMask, kRows, kCols); }),
              AllOf(HasSubstr(kModule), HasSubstr("not a weight format")));
  // A format the module's shape cannot take.
  EXPECT_THAT(inputErrorOf([&] { readPackedModule(file.tensors, kModule, WeightFormat::parse("int4-g48"), kRows, kCols); }),
              AllOf(HasSubstr(kModule), HasSubstr("do not divide")));
}

TEST_F(PackedModuleIO, RefusesToWritePartsTheFormatDoesNotHave) {
  PackedModule p = packedModule("int4-g32", 7);
  p.quant.reset();
  EXPECT_THAT(inputErrorOf([&] { writePackedModule(kModule, p); }), AllOf(HasSubstr(kModule), HasSubstr("int grid")));
  PackedModule q = packedModule("int4-g32", 7);
  q.format = WeightFormat::parse("int4-g16");
  EXPECT_THAT(inputErrorOf([&] { writePackedModule(kModule, q); }), AllOf(HasSubstr(kModule), HasSubstr("group size")));
  PackedModule b = packedModule("bitmask-2:4", 7);
  b.bitmask->values = b.bitmask->values.narrow(1, 0, 8);
  EXPECT_THAT(inputErrorOf([&] { writePackedModule(kModule, b); }),
              AllOf(HasSubstr(std::string(kModule) + ".weight.values"), HasSubstr("cannot be written")));
}

}  // namespace
}  // namespace pareto
