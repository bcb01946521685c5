#include "compress/ModulePlan.h"

#include "compress/Spqr.h"
#include "formats/GgufQuant.h"
#include "formats/PackedBlocks.h"
#include "formats/SpqrWeight.h"
#include "util/Error.h"

namespace pareto {
namespace {

WeightFormat::Values valuesOf(const QuantizeSpec& q) {
  return q.method == "spqr" ? WeightFormat::Values::Spqr : WeightFormat::Values::Int;
}

int64_t gridGroup(const QuantSpec& grid) {
  switch (grid.granularity) {
    case QuantSpec::Granularity::Tensor: return WeightFormat::kPerTensor;
    case QuantSpec::Granularity::Channel: return WeightFormat::kPerChannel;
    case QuantSpec::Granularity::Group: return grid.groupSize;
  }
  return WeightFormat::kPerChannel;
}

// Groups of g kept values of an N:M weight are g·M/N original columns for the solvers: g must be a multiple of
// N and divide a row's kept values.
void checkKeptGroups(const std::string& who, int64_t keptGroup, const SparsityPattern& p, int64_t keptCols) {
  if ((keptGroup * p.m()) % p.n() != 0 || keptCols % keptGroup != 0)
    throw InputError(who + ": groups of " + std::to_string(keptGroup) + " kept values do not fit " + p.label() +
                     " pruning with " + std::to_string(keptCols) + " kept values per row (need a multiple of N = " +
                     std::to_string(p.n()) + " dividing the kept values)");
}

// A GGUF grid stores every weight of whole blocks: no pruning (N:M would need a mask GGUF has no place for, and
// q4_k cannot store an exact zero), and rows of whole blocks, falling back as `export gguf` does.
void planGguf(ModulePlan& plan) {
  const WeightFormat& asked = *plan.quant->format;
  if (plan.prune)
    throw InputError(plan.module + ": " + asked.name() + " cannot be combined with pruning (" +
                     plan.prune->pattern.label() + "): a GGUF block stores every weight of its run of columns");
  gguf::TensorType type = asked.ggufType;
  if (plan.cols % gguf::traits(type).weightsPerBlock != 0) {
    type = gguf::narrowRowType(type);
    if (plan.cols % gguf::traits(type).weightsPerBlock != 0)
      throw InputError(plan.module + ": " + std::to_string(plan.cols) + " input columns are not a multiple of 32, "
                       "which every GGUF block type needs (" + asked.name() + ")");
    plan.note = asked.name() + " → gguf-" + gguf::traits(type).name + ": " + std::to_string(plan.cols) +
                " input columns are not whole 256-weight super-blocks";
  }
  plan.format = WeightFormat::ggufBlocks(type);
}

// A group that does not divide a row (of kept values) would leave a partial last group, which no format stores:
// the plan takes the largest power-of-two fraction of the asked group that divides the row, down to 32 columns
// (the smallest group the kernels take), and says so in its note. A group with no such fraction stays as asked,
// and the grid's check refuses it with the module named.
void fitGroup(ModulePlan& plan, int64_t valueColumns) {
  QuantSpec& grid = plan.quant->grid;
  if (plan.quant->method == "spqr" || grid.granularity != QuantSpec::Granularity::Group || grid.groupSize < 1 ||
      valueColumns % grid.groupSize == 0)
    return;
  for (int64_t g = grid.groupSize; g % 2 == 0 && g / 2 >= 32;) {
    g /= 2;
    if (valueColumns % g != 0) continue;
    plan.note = "groups of " + std::to_string(g) + " instead of " + std::to_string(grid.groupSize) + ": " +
                std::to_string(grid.groupSize) + " does not divide a row's " + std::to_string(valueColumns) +
                (plan.format.isBitmask() ? " kept values" : " input columns");
    grid.groupSize = g;
    plan.format.groupSize = g;
    return;
  }
}

}  // namespace

std::string ModulePlan::method() const {
  std::string m = prune ? prune->method : "";
  if (quant) m += (m.empty() ? "" : "+") + quant->method;
  return m;
}

std::string ModulePlan::pattern() const {
  std::string p = prune ? prune->pattern.label() : "";
  if (quant) p += (p.empty() ? "" : " ") + (format.isGguf() ? format.name() : quant->grid.label());
  return p;
}

int64_t ModulePlan::valueColumns() const { return format.isBitmask() ? cols * format.n / format.m : cols; }

QuantSpec ModulePlan::solverGrid() const {
  QuantSpec grid = quant->grid;
  if (format.isBitmask() && (grid.granularity == QuantSpec::Granularity::Group || quant->method == "spqr"))
    grid.groupSize = grid.groupSize * format.m / format.n;
  return grid;
}

uint64_t ModulePlan::storedBytes(int64_t valueBytes, int64_t outliers) const {
  const int64_t vcols = valueColumns();
  uint64_t bytes = 0;
  if (format.isBitmask()) {
    const int64_t blocks = rows * (cols / packed::kMaskWordColumns);
    bytes += uint64_t(blocks * packed::bitmaskBlockBytes(format.n, format.m, format.isQuantized() ? 0 : valueBytes));
  } else if (!format.isQuantized()) {
    return uint64_t(rows * cols * valueBytes);
  } else if (format.isGguf()) {
    return uint64_t(rows * gguf::rowBytes(format.ggufType, cols));
  }
  if (format.values == WeightFormat::Values::Int) {
    const QuantSpec& grid = quant->grid;
    int64_t grids = 1;
    if (grid.granularity == QuantSpec::Granularity::Channel) grids = rows;
    if (grid.granularity == QuantSpec::Granularity::Group) grids = rows * (vcols / grid.groupSize);
    const int64_t perGrid = grid.columnsPerGroup(vcols);
    const int64_t statBytes =
        packed::quantGroupBytes(grid.bits, perGrid, grid.symmetric) - packed::quantRowCodeBytes(perGrid, grid.bits);
    bytes += uint64_t(rows * packed::quantRowCodeBytes(vcols, grid.bits) + grids * statBytes);
    // GPTQ with act-order stores its column order beside the codes: int32 per input column.
    if (quant->method == "gptq" && quant->actOrder) bytes += uint64_t(cols) * 4;
  } else if (format.values == WeightFormat::Values::Spqr) {
    const SpqrOptions defaults;   // the job uses the solver's second-level group
    bytes += uint64_t(spqrStoredBits(rows, vcols, format.bits, format.groupSize, format.scaleBits,
                                     defaults.scaleGroup, outliers) / 8);
  }
  return bytes;
}

ModulePlan planModule(const Recipe& recipe, const std::string& module, int64_t rows, int64_t cols) {
  ModulePlan plan;
  plan.module = module;
  plan.rows = rows;
  plan.cols = cols;
  plan.prune = recipe.pruneFor(module);
  plan.quant = recipe.quantizeFor(module);
  if (plan.prune) {
    plan.prune->pattern.checkColumns(cols, module);
    if (plan.prune->pattern.isNM() && cols % packed::kMaskWordColumns == 0) {
      plan.format.n = plan.prune->pattern.n();
      plan.format.m = plan.prune->pattern.m();
    }
  }
  if (!plan.quant) return plan;
  const QuantizeSpec& q = *plan.quant;
  if (q.format) {
    planGguf(plan);
    return plan;
  }
  if (q.method == "gptq" && q.actOrder && !q.staticGroups && q.grid.granularity == QuantSpec::Granularity::Group)
    throw InputError(module + ": GPTQ act-order with groups (" + q.grid.label() +
                     ") needs static groups; dynamic groups with act-order are not supported");
  plan.format.values = valuesOf(q);
  plan.format.bits = q.grid.bits;
  plan.format.groupSize = q.method == "spqr" ? q.grid.groupSize : gridGroup(q.grid);
  plan.format.symmetric = q.method == "spqr" ? true : q.grid.symmetric;
  plan.format.scaleBits = q.method == "spqr" ? q.scaleBits : 0;
  const int64_t vcols = plan.valueColumns();
  fitGroup(plan, vcols);
  // RTN quantizes the kept values as they are packed; GPTQ and SpQR solve over the original columns.
  if (plan.format.isBitmask() &&
      (q.method == "spqr" || (q.method == "gptq" && q.grid.granularity == QuantSpec::Granularity::Group)))
    checkKeptGroups(module, q.grid.groupSize, plan.prune->pattern, vcols);
  if (q.method == "spqr") {
    const SpqrOptions defaults;
    if (vcols % q.grid.groupSize != 0)
      throw InputError(module + ": " + std::to_string(vcols) + " columns are not a multiple of the SpQR group size " +
                       std::to_string(q.grid.groupSize));
    if (rows % defaults.scaleGroup != 0)
      throw InputError(module + ": " + std::to_string(rows) + " output rows are not a multiple of the SpQR scale " +
                       "group " + std::to_string(defaults.scaleGroup));
  } else {
    q.grid.groupsPerRow(vcols, module);   // throws when the groups do not fit
    if ((vcols * q.grid.bits) % 8 != 0 && q.grid.bits != 8)
      throw InputError(module + ": " + std::to_string(vcols) + " columns do not fill whole bytes of " +
                       std::to_string(q.grid.bits) + "-bit codes");
  }
  return plan;
}

}  // namespace pareto
