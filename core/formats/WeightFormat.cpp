#include "formats/WeightFormat.h"

#include <regex>

#include "util/Error.h"

namespace pareto {
namespace {

const char* kGrammar =
    "dense, bitmask-N:M, intB-gG, intB-channel, intB-tensor (each optionally -asym), spqr-Bbit[-gG][-sS], "
    "bitmask-N:M+ one of the int or spqr ones (e.g. bitmask-2:4+int4-g128), or gguf-q8_0, gguf-q4_0, gguf-q4_k, "
    "gguf-q6_k";

[[noreturn]] void unknown(const std::string& name) {
  throw InputError("unknown weight format \"" + name + "\" (known: " + kGrammar + ")");
}

// The values part after an optional "bitmask-N:M+"; false when it is not one.
bool parseValues(const std::string& text, WeightFormat& f) {
  std::smatch match;
  if (std::regex_match(text, match, std::regex(R"(int([2-8])-(channel|tensor|g([1-9]\d{0,8}))(-asym)?)"))) {
    f.values = WeightFormat::Values::Int;
    f.bits = std::stoi(match[1]);
    f.groupSize = match[2] == "channel"  ? WeightFormat::kPerChannel
                  : match[2] == "tensor" ? WeightFormat::kPerTensor
                                         : std::stoll(match[3]);
    f.symmetric = !match[4].matched;
    return true;
  }
  if (std::regex_match(text, match, std::regex(R"(spqr-([1-8])bit(-g([1-9]\d{0,8}))?(-s([1-8]))?)"))) {
    f.values = WeightFormat::Values::Spqr;
    f.bits = std::stoi(match[1]);
    f.groupSize = match[3].matched ? std::stoll(match[3]) : WeightFormat::kSpqrGroup;
    f.scaleBits = match[5].matched ? std::stoi(match[5]) : WeightFormat::kSpqrScaleBits;
    return true;
  }
  return false;
}

// "bitmask-N:M" with 1 <= N < M <= 32 and M dividing 32 (a mask word then always holds whole N:M groups).
bool parseMask(const std::string& text, WeightFormat& f) {
  std::smatch match;
  if (!std::regex_match(text, match, std::regex(R"(bitmask-([1-9]\d?):([1-9]\d?))"))) return false;
  f.n = std::stoi(match[1]);
  f.m = std::stoi(match[2]);
  return f.n < f.m && f.m <= 32 && 32 % f.m == 0;
}

}  // namespace

WeightFormat WeightFormat::ggufBlocks(gguf::TensorType type) {
  if (!gguf::traits(type).quantized)
    throw InputError(std::string("gguf-") + gguf::traits(type).name + " is not a block-quantized weight format");
  WeightFormat f;
  f.values = Values::Gguf;
  f.ggufType = type;
  return f;
}

WeightFormat WeightFormat::parse(const std::string& name) {
  WeightFormat f;
  if (name == "dense") return f;
  if (name.rfind("gguf-", 0) == 0) {
    for (gguf::TensorType t : {gguf::TensorType::Q8_0, gguf::TensorType::Q4_0, gguf::TensorType::Q4_K,
                               gguf::TensorType::Q6_K})
      if (name.substr(5) == gguf::traits(t).name) return ggufBlocks(t);
    unknown(name);
  }
  const size_t plus = name.find('+');
  const std::string first = name.substr(0, plus);
  if (parseMask(first, f)) {
    if (plus == std::string::npos) return f;
    if (parseValues(name.substr(plus + 1), f)) return f;
    unknown(name);
  }
  if (plus == std::string::npos && parseValues(name, f)) return f;
  unknown(name);
}

WeightFormat WeightFormat::fromStored(const std::string& name, int64_t columnsPerScale, int64_t cols, bool symmetric,
                                      int64_t spqrGroup, int spqrScaleBits) {
  try {
    return parse(name);
  } catch (const InputError&) {
    // the names of earlier versions, below
  }
  WeightFormat f;
  std::string rest = name;
  const size_t plus = name.find('+');
  if (name.rfind("bitmask-", 0) == 0) {
    if (!parseMask(name.substr(0, plus), f)) unknown(name);
    if (plus == std::string::npos) unknown(name);
    rest = name.substr(plus + 1);
  }
  std::smatch match;
  if (std::regex_match(rest, match, std::regex(R"(int([2-8]))"))) {
    f.values = Values::Int;
    f.bits = std::stoi(match[1]);
    f.symmetric = symmetric;
    // The grid's columns per scale: a whole row is one scale per row (a per-tensor grid, stored the same way
    // with one scale row, is told apart by the loader from the scales' shape).
    // Without the weight's columns (folders of format version 1) a grid is named by its columns per scale,
    // which describes a per-channel grid truly too.
    const int64_t valueCols = f.isBitmask() ? cols * f.n / f.m : cols;
    f.groupSize = columnsPerScale > 0 && (cols == 0 || columnsPerScale < valueCols) ? columnsPerScale : kPerChannel;
    return f;
  }
  if (std::regex_match(rest, match, std::regex(R"(spqr([1-8]))"))) {
    f.values = Values::Spqr;
    f.bits = std::stoi(match[1]);
    f.groupSize = spqrGroup > 0 ? spqrGroup : kSpqrGroup;
    f.scaleBits = spqrScaleBits > 0 ? spqrScaleBits : kSpqrScaleBits;
    return f;
  }
  unknown(name);
}

std::string WeightFormat::name() const {
  if (isGguf()) return std::string("gguf-") + gguf::traits(ggufType).name;
  std::string out;
  if (isBitmask()) out = "bitmask-" + std::to_string(n) + ":" + std::to_string(m);
  if (values == Values::Float) return out.empty() ? "dense" : out;
  if (!out.empty()) out += "+";
  if (values == Values::Int) {
    out += "int" + std::to_string(bits) + "-";
    out += groupSize == kPerChannel ? "channel" : groupSize == kPerTensor ? "tensor" : "g" + std::to_string(groupSize);
    if (!symmetric) out += "-asym";
    return out;
  }
  out += "spqr-" + std::to_string(bits) + "bit";
  if (groupSize != kSpqrGroup) out += "-g" + std::to_string(groupSize);
  if (scaleBits != kSpqrScaleBits) out += "-s" + std::to_string(scaleBits);
  return out;
}

std::string WeightFormat::kernel() const {
  // The kernels take the zero points as they come, so symmetry does not change which kernel runs.
  WeightFormat k = *this;
  k.symmetric = true;
  switch (values) {
    case Values::Float:
      return k.name();
    case Values::Int:
      if (isBitmask()) return bits == 4 && groupSize > 0 ? k.name() : "";
      return (bits == 4 || bits == 8) && groupSize != kPerTensor ? k.name() : "";
    case Values::Spqr:
      return !isBitmask() && bits >= 2 && bits <= 4 ? "spqr-" + std::to_string(bits) + "bit" : "";
    case Values::Gguf:
      return "";
  }
  return "";
}

double WeightFormat::blockBitsPerWeight() const {
  if (!isGguf()) return 0;
  const gguf::TypeTraits t = gguf::traits(ggufType);
  return 8.0 * t.bytesPerBlock / t.weightsPerBlock;
}

bool WeightFormat::operator==(const WeightFormat& o) const {
  return n == o.n && m == o.m && values == o.values && bits == o.bits && groupSize == o.groupSize &&
         symmetric == o.symmetric && scaleBits == o.scaleBits && ggufType == o.ggufType;
}

}  // namespace pareto
