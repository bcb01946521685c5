#include "runtime/PackedLinear.h"

#include <ATen/ATen.h>

#include "kernels/BitmaskNMGemv.h"
#include "kernels/GemvProblem.h"
#include "formats/WeightFormat.h"
#include "runtime/SyntheticWeights.h"
#include "util/Error.h"

namespace pareto {
namespace {

// A format a kernel runs (formats/WeightFormat.h), as the random-weight makers below take it.
struct FormatSpec {
  enum Kind { Dense, Bitmask, Quant, Spqr, BitmaskInt4 } kind = Dense;
  int n = 0, m = 0;
  int bits = 0;
  int64_t group = 0;  // 0: per channel
};

FormatSpec parseFormat(const std::string& name) {
  const WeightFormat w = WeightFormat::parse(name);
  if (w.kernel() != name || !w.symmetric)
    throw InputError("unknown weight format \"" + name + "\" for the kernels (they run: dense, bitmask-N:M, "
                     "int8-channel, int4-channel, int4-gG, int8-gG, spqr-2bit/3bit/4bit, bitmask-N:M+int4-gG)");
  FormatSpec f;
  f.n = w.n;
  f.m = w.m;
  f.bits = w.bits;
  f.group = w.values == WeightFormat::Values::Int ? w.groupSize : 0;
  if (w.isDense()) f.kind = FormatSpec::Dense;
  else if (w.values == WeightFormat::Values::Float) f.kind = FormatSpec::Bitmask;
  else if (w.values == WeightFormat::Values::Spqr) f.kind = FormatSpec::Spqr;
  else f.kind = w.isBitmask() ? FormatSpec::BitmaskInt4 : FormatSpec::Quant;
  return f;
}

int64_t tensorBytes(const at::Tensor& t) { return t.defined() ? t.numel() * int64_t(t.element_size()) : 0; }

at::Tensor catDim0(const std::vector<at::Tensor>& parts) {
  for (const auto& p : parts)
    if (!p.defined()) return {};
  return at::cat(parts, 0);
}

template <class W>
std::vector<const W*> alternatives(const std::vector<const PackedLinear*>& parts) {
  std::vector<const W*> out;
  for (const PackedLinear* p : parts) out.push_back(&std::get<W>(p->weight()));
  return out;
}

// Kernel-layout tensors lead with the row group, so rows concatenate by concatenating dimension 0.
template <class W, class Field>
at::Tensor catField(const std::vector<const W*>& parts, Field field) {
  std::vector<at::Tensor> ts;
  for (const W* w : parts) ts.push_back(w->*field);
  return catDim0(ts);
}

at::Tensor countersFor(int64_t rows, const at::Tensor& like) {
  return at::zeros({kernels::rowGroups(rows)}, like.options().dtype(at::kInt));
}

}  // namespace

PackedLinear::PackedLinear(Weight weight, std::string format, int64_t rows, int64_t cols, at::Tensor bias)
    : weight_(std::move(weight)), format_(std::move(format)), rows_(rows), cols_(cols), bias_(std::move(bias)) {}

PackedLinear PackedLinear::dense(const at::Tensor& weight, const at::Tensor& bias) {
  return PackedLinear(weight, "dense", weight.size(0), weight.size(1), bias);
}

const at::Tensor& PackedLinear::denseWeight() const {
  if (!isDense()) throw Error("linear holds a packed " + format_ + " weight, not a dense one");
  return std::get<at::Tensor>(weight_);
}

int64_t PackedLinear::weightBytes() const {
  const int64_t b = tensorBytes(bias_);
  return b + std::visit(
                 [](const auto& w) -> int64_t {
                   if constexpr (std::is_same_v<std::decay_t<decltype(w)>, at::Tensor>)
                     return tensorBytes(w);
                   else
                     return w.bytes();
                 },
                 weight_);
}

bool PackedLinear::fusesInKernel() const {
  return !isDense() && !bias_.defined() && !std::holds_alternative<SpqrKernelWeight>(weight_) &&
         !std::holds_alternative<BitmaskNMKernelWeight>(weight_);
}

void PackedLinear::forward(const at::Tensor& x, const at::Tensor& out, const std::string& what,
                           const GemvFusion& fusion) const {
  if (!fusesInKernel())
    return forwardAroundOps(x, out, rows_, cols_, fusion, what,
                            [&](const at::Tensor& in, const at::Tensor& y) { forward(in, y, what); });
  runKernels(x, out, what, fusion);
}

// The packed weight's kernels (their references on the CPU), 16 rows at a time: a longer input is a prefill.
void PackedLinear::runKernels(const at::Tensor& x, const at::Tensor& out, const std::string& what,
                              const GemvFusion& fusion) const {
  const int64_t n = x.size(0);
  for (int64_t start = 0; start < n; start += kernels::kMaxBatch) {
    const int64_t len = std::min<int64_t>(kernels::kMaxBatch, n - start);
    const at::Tensor xs = len == n ? x : x.narrow(0, start, len);
    const at::Tensor ys = len == n ? out : out.narrow(0, start, len);
    std::visit(
        [&](const auto& w) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(w)>, at::Tensor>) gemv(w, xs, ys, what, fusion);
        },
        weight_);
  }
}

void PackedLinear::forward(const at::Tensor& x, const at::Tensor& out, const std::string& what) const {
  if (isDense()) {
    const at::Tensor& w = std::get<at::Tensor>(weight_);
    if (x.is_cpu() && x.scalar_type() == at::kHalf) {
      // LibTorch 1.13 has no fp16 matrix product on the CPU: float32, rounded once at the end.
      at::Tensor y = at::mm(x.to(at::kFloat), w.to(at::kFloat).t());
      if (bias_.defined()) y.add_(bias_.to(at::kFloat));
      out.copy_(y);
    } else if (bias_.defined()) {
      at::addmm_out(const_cast<at::Tensor&>(out), bias_, x, w.t());
    } else {
      at::mm_out(const_cast<at::Tensor&>(out), x, w.t());
    }
    return;
  }
  runKernels(x, out, what, GemvFusion());
  if (bias_.defined()) const_cast<at::Tensor&>(out).add_(bias_);
}

at::Tensor PackedLinear::forward(const at::Tensor& x, const std::string& what) const {
  at::Tensor out = at::empty({x.size(0), rows_}, x.options());
  forward(x, out, what);
  return out;
}

PackedLinear concatRows(const std::vector<const PackedLinear*>& parts) {
  if (parts.empty()) throw InputError("concatRows: no parts");
  if (parts.size() == 1) return *parts[0];
  const PackedLinear& first = *parts[0];
  int64_t rows = 0;
  std::vector<at::Tensor> biases;
  bool anyBias = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    const PackedLinear& p = *parts[i];
    if (p.format() != first.format() || p.cols() != first.cols() || p.weight().index() != first.weight().index())
      throw InputError("cannot fuse " + p.format() + " [" + std::to_string(p.rows()) + ", " + std::to_string(p.cols()) +
                       "] with " + first.format() + " [.., " + std::to_string(first.cols()) + "]");
    if (!first.isDense() && i + 1 < parts.size() && p.rows() % kernels::kRowsPerGroup != 0)
      throw InputError("cannot fuse packed weights whose rows (" + std::to_string(p.rows()) +
                       ") are not a multiple of 32");
    rows += p.rows();
    anyBias = anyBias || p.bias().defined();
  }
  if (anyBias) {
    for (const PackedLinear* p : parts) {
      const at::Tensor& b = p->bias();
      const at::TensorOptions opts = first.isDense() ? first.denseWeight().options() : b.options();
      biases.push_back(b.defined() ? b : at::zeros({p->rows()}, opts));
    }
  }
  const at::Tensor bias = anyBias ? at::cat(biases, 0) : at::Tensor();

  return std::visit(
      [&](const auto& w0) -> PackedLinear {
        using W = std::decay_t<decltype(w0)>;
        if constexpr (std::is_same_v<W, at::Tensor>) {
          std::vector<at::Tensor> ws;
          for (const PackedLinear* p : parts) ws.push_back(p->denseWeight());
          return PackedLinear(at::cat(ws, 0), first.format(), rows, first.cols(), bias);
        } else {
          const auto ps = alternatives<W>(parts);
          W out = w0;
          out.rows = rows;
          if constexpr (std::is_same_v<W, BitmaskNMKernelWeight>) {
            out.masks = catField(ps, &W::masks);
            out.values = catField(ps, &W::values);
            out.launch.counters = countersFor(rows, out.masks);
          } else if constexpr (std::is_same_v<W, QuantGroupKernelWeight> ||
                               std::is_same_v<W, BitmaskInt4KernelWeight>) {
            if constexpr (std::is_same_v<W, BitmaskInt4KernelWeight>) {
              out.masks = catField(ps, &W::masks);  // masks, metadata or both (PackedGemv.h); undefined stay so
              out.metadata = catField(ps, &W::metadata);
            }
            out.codes = catField(ps, &W::codes);
            out.scales = catField(ps, &W::scales);
            out.zeros = catField(ps, &W::zeros);
            out.launch.counters = countersFor(rows, out.codes);
          } else {
            out.codes = catField(ps, &W::codes);
            out.stats = catField(ps, &W::stats);
            out.second = catField(ps, &W::second);
            out.outlierColumns = catField(ps, &W::outlierColumns);
            out.outlierValues = catField(ps, &W::outlierValues);
            // CSR row offsets: each part's offsets (over its padded rows) shifted by the outliers before it.
            std::vector<at::Tensor> offsets;
            int64_t before = 0;
            for (size_t i = 0; i < ps.size(); ++i) {
              const at::Tensor& o = ps[i]->rowOffsets;
              offsets.push_back((i + 1 < ps.size() ? o.narrow(0, 0, o.size(0) - 1) : o) + before);
              before += ps[i]->outlierValues.numel();
            }
            out.rowOffsets = at::cat(offsets, 0).to(at::kInt);
            out.launch.counters = countersFor(rows, out.codes);
          }
          return PackedLinear(std::move(out), first.format(), rows, first.cols(), bias);
        }
      },
      first.weight());
}

void checkPackedFormatName(const std::string& format) { parseFormat(format); }

PackedLinear randomPackedLinear(const std::string& format, int64_t rows, int64_t cols, at::ScalarType dtype,
                                at::Device device, uint64_t seed, double spqrOutlierFraction) {
  const FormatSpec f = parseFormat(format);
  switch (f.kind) {
    case FormatSpec::Dense:
      return PackedLinear::dense(randomDenseWeight(rows, cols, dtype, device, seed));
    case FormatSpec::Bitmask:
      return PackedLinear(BitmaskNMKernelWeight::fromPacked(randomBitmaskNM(rows, cols, f.n, f.m, dtype, device, seed)),
                          format, rows, cols);
    case FormatSpec::Quant:
      return PackedLinear(QuantGroupKernelWeight::fromPacked(randomQuantGroup(
                              rows, cols, f.bits, true, f.group == 0 ? cols : f.group, device, seed)),
                          format, rows, cols);
    case FormatSpec::Spqr:
      return PackedLinear(SpqrKernelWeight::fromParts(randomSpqr(rows, cols, f.bits, 16, spqrOutlierFraction, device, seed)),
                          format, rows, cols);
    case FormatSpec::BitmaskInt4: {
      const BitmaskNMWeight pattern = randomBitmaskNM(rows, cols, f.n, f.m, dtype, device, seed);
      const QuantGroupWeight kept = randomQuantGroup(rows, cols * f.n / f.m, 4, true, f.group, device, seed + 1);
      return PackedLinear(BitmaskInt4KernelWeight::fromPacked(pattern.masks, f.n, f.m, kept), format, rows, cols);
    }
  }
  throw InputError("unknown weight format \"" + format + "\"");
}

}  // namespace pareto
