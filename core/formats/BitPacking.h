// Packing b-bit codes (1..8 bits) into a byte stream: groups of 8 codes form one b-byte little-endian word with
// code k at bit b·k, so the stream is every code's bits, least significant first, one after the other. Used by
// the SpQR and grouped-integer formats so that a 3-bit code costs exactly 3 bits.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace pareto {

// b-bit codes (any integer tensor with values in [0, 2^b), read in row-major order) → uint8 [ceil(n/8) · b].
at::Tensor packCodeBits(const at::Tensor& codes, int bits);
// Inverse: the first `count` codes as uint8 [count].
at::Tensor unpackCodeBits(const at::Tensor& packed, int bits, int64_t count);

}  // namespace pareto
