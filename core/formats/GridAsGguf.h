// An int grid (formats/QuantGroupWeight.h) that is a ggml block type, written as that type's blocks with nothing
// requantized: symmetric groups of 32 at 8 bits are block_q8_0 (fp16 scale, int8 codes) and at 4 bits block_q4_0
// (fp16 scale, codes q + 8: the symmetric int4 codes lie in [−7, 7]), both decoding as scale · q. So a module
// compress stored as int8-g32 / int4-g32 reaches a GGUF file as the very weights Pareto runs.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "formats/GgufBlocks.h"
#include "formats/QuantGroupWeight.h"

namespace pareto {

// The ggml type whose blocks store `q` exactly; nullopt for any other grid (asymmetric, other groups or bits).
std::optional<gguf::TensorType> ggufTypeOfGrid(const QuantGroupWeight& q);

// q's rows as blocks of ggufTypeOfGrid(q): uint8 [rows, gguf::rowBytes(type, cols)] on the CPU, decoding to
// q.unpack() bit for bit. Throws InputError when q has no such type.
at::Tensor gridAsGgufBlocks(const QuantGroupWeight& q);

}  // namespace pareto
