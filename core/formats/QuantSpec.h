// A uniform quantization grid as a stored format describes it, and the integer codes on it: what a solver
// (compress/QuantGrid.h: RTN, compress/Gptq.h: GPTQ) returns and what formats/QuantGroupWeight.h packs.
//
// A grid maps a weight w to an integer code q and back to ŵ = (q − z) · s, symmetric (z = 0, int8 codes in
// [−(2^(b−1) − 1), 2^(b−1) − 1]) or asymmetric (a uint8 zero point z, codes in [0, 2^b − 1]). One grid covers the
// whole tensor, one output row (channel), or one group of g consecutive input columns of one row. How a solver
// picks s and z is compress/QuantGrid.h's business; here is only the description the layout follows.
#pragma once

#include <ATen/core/Tensor.h>
#include <cstdint>
#include <string>

namespace pareto {

struct QuantSpec {
  enum class Granularity { Tensor, Channel, Group };

  int bits = 4;                                   // 2..8
  bool symmetric = true;                          // absmax (int8 codes) or min-max with a zero point (uint8 codes)
  Granularity granularity = Granularity::Group;
  int64_t groupSize = 128;                        // input columns per group; only for Granularity::Group

  static QuantSpec tensor(int bits, bool symmetric = true);
  static QuantSpec channel(int bits, bool symmetric = true);
  static QuantSpec group(int bits, int64_t groupSize, bool symmetric = true);

  // "int4 sym g128", "int3 asym channel", "int8 sym tensor".
  std::string label() const;
  // Throws InputError (naming `who`, e.g. "module 'q_proj'") for bits outside 2..8 or a group size < 1.
  void validate(const std::string& who = "quantization") const;
  // validate() plus: for groups, `columns` must be a multiple of groupSize. Returns the number of grids per row
  // (1 for tensor and channel).
  int64_t groupsPerRow(int64_t columns, const std::string& who = "quantization") const;
  // Input columns per grid: groupSize for groups, `columns` otherwise.
  int64_t columnsPerGroup(int64_t columns) const;

  int64_t qmin() const;  // −(2^(b−1) − 1) symmetric, 0 asymmetric
  int64_t qmax() const;  // 2^(b−1) − 1 symmetric, 2^b − 1 asymmetric
};

struct QuantResult {
  at::Tensor dequantized;  // [out, in], the weight's dtype and device: (codes − zeros) · scales
  at::Tensor codes;        // [out, in] int8 (symmetric) or uint8 (asymmetric)
  at::Tensor scales;       // float32 [out, groups] (group), [out, 1] (channel), [1, 1] (tensor); fp16-exact
  at::Tensor zeros;        // asymmetric only: uint8, the shape of scales; undefined for symmetric
};

}  // namespace pareto
