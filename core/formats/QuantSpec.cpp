#include "formats/QuantSpec.h"

#include "util/Error.h"

namespace pareto {

QuantSpec QuantSpec::tensor(int bits, bool symmetric) {
  QuantSpec spec;
  spec.bits = bits;
  spec.symmetric = symmetric;
  spec.granularity = Granularity::Tensor;
  spec.groupSize = 0;
  return spec;
}

QuantSpec QuantSpec::channel(int bits, bool symmetric) {
  QuantSpec spec = tensor(bits, symmetric);
  spec.granularity = Granularity::Channel;
  return spec;
}

QuantSpec QuantSpec::group(int bits, int64_t groupSize, bool symmetric) {
  QuantSpec spec = tensor(bits, symmetric);
  spec.granularity = Granularity::Group;
  spec.groupSize = groupSize;
  return spec;
}

std::string QuantSpec::label() const {
  std::string text = "int" + std::to_string(bits) + (symmetric ? " sym " : " asym ");
  switch (granularity) {
    case Granularity::Tensor: return text + "tensor";
    case Granularity::Channel: return text + "channel";
    case Granularity::Group: return text + "g" + std::to_string(groupSize);
  }
  return text;
}

void QuantSpec::validate(const std::string& who) const {
  if (bits < 2 || bits > 8)
    throw InputError(who + ": quantization bits must be in 2..8, got " + std::to_string(bits));
  if (granularity == Granularity::Group && groupSize < 1)
    throw InputError(who + ": quantization group size must be positive, got " + std::to_string(groupSize));
}

int64_t QuantSpec::groupsPerRow(int64_t columns, const std::string& who) const {
  validate(who);
  if (granularity != Granularity::Group) return 1;
  if (columns % groupSize != 0)
    throw InputError(who + ": " + std::to_string(columns) + " input columns are not a multiple of the group size " +
                     std::to_string(groupSize) + " (" + label() + ")");
  return columns / groupSize;
}

int64_t QuantSpec::columnsPerGroup(int64_t columns) const {
  return granularity == Granularity::Group ? groupSize : columns;
}

int64_t QuantSpec::qmin() const { return symmetric ? -((int64_t(1) << (bits - 1)) - 1) : 0; }

int64_t QuantSpec::qmax() const {
  return symmetric ? (int64_t(1) << (bits - 1)) - 1 : (int64_t(1) << bits) - 1;
}

}  // namespace pareto
