// The quantization blocks of llama.cpp's GGUF files that Pareto writes and can quantize to, as plain structs
// with static_assert'ed sizes and their bits per weight. The layouts are ggml's (ggml-common.h): a block holds
// a run of consecutive weights of one row (ne0, the input dimension), so a row of `cols` weights is
// cols / weightsPerBlock blocks back to back, and a tensor is its rows back to back.
//
// Host-side C++17 only (fp16 is its uint16_t bit pattern, little-endian as on every target), so that these
// bytes are what the GGUF file holds and what a compressed folder stores for the gguf-* formats.
#pragma once

#include <cstdint>
#include <string>

namespace pareto {
namespace gguf {

using Fp16Bits = uint16_t;

constexpr int kQ8_0Weights = 32;
constexpr int kQ4_0Weights = 32;
constexpr int kSuperBlockWeights = 256;   // QK_K: the k-quants' super-block
constexpr int kQ4KScaleBytes = 12;        // 8 six-bit scales and 8 six-bit mins, packed

// Q8_0: w = d · q, q in [-128, 127]. 34 bytes per 32 weights = 8.5 bits per weight.
struct BlockQ8_0 {
  Fp16Bits d;
  int8_t qs[kQ8_0Weights];
};
static_assert(sizeof(BlockQ8_0) == 2 + 32, "Q8_0 block: fp16 scale + 32 int8 codes");

// Q4_0: w = d · (q − 8), q in [0, 15]; byte j holds weight j (low nibble) and weight j + 16 (high nibble).
// 18 bytes per 32 weights = 4.5 bits per weight.
struct BlockQ4_0 {
  Fp16Bits d;
  uint8_t qs[kQ4_0Weights / 2];
};
static_assert(sizeof(BlockQ4_0) == 2 + 16, "Q4_0 block: fp16 scale + 32 nibbles");

// Q4_K: 8 sub-blocks of 32; w = d · sc[j] · q − dmin · m[j], q in [0, 15], sc and m 6-bit. qs byte 32c + l holds
// weight 64c + l (low nibble) and 64c + 32 + l (high nibble). 144 bytes per 256 weights = 4.5 bits per weight.
struct BlockQ4K {
  Fp16Bits d;
  Fp16Bits dmin;
  uint8_t scales[kQ4KScaleBytes];
  uint8_t qs[kSuperBlockWeights / 2];
};
static_assert(sizeof(BlockQ4K) == 2 * 2 + 12 + 128, "Q4_K block: d, dmin, packed scales/mins, 256 nibbles");

// Q6_K: 16 sub-blocks of 16; w = d · sc[j] · (q − 32), q in [0, 63], sc int8. The low 4 bits of the codes are in
// ql, the high 2 bits in qh (layout in GgufQuant.cpp). 210 bytes per 256 weights = 6.5625 bits per weight.
struct BlockQ6K {
  uint8_t ql[kSuperBlockWeights / 2];
  uint8_t qh[kSuperBlockWeights / 4];
  int8_t scales[kSuperBlockWeights / 16];
  Fp16Bits d;
};
static_assert(sizeof(BlockQ6K) == 128 + 64 + 16 + 2, "Q6_K block: 4+2-bit codes, int8 scales, fp16 d");

// ggml's tensor type ids (enum ggml_type) for the types Pareto writes.
enum class TensorType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, Q4_K = 12, Q6_K = 14, BF16 = 30 };

struct TypeTraits {
  const char* name;      // "q4_k": as `export gguf --type` and the gguf-* format names spell it
  int weightsPerBlock;   // 1 for the float types
  int bytesPerBlock;
  bool quantized;
};

TypeTraits traits(TensorType type);
// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k" (case-insensitive); InputError otherwise.
TensorType parseTensorType(const std::string& name);
// Bytes of a row of `cols` weights; cols must be a multiple of the block's weights.
int64_t rowBytes(TensorType type, int64_t cols);

}  // namespace gguf
}  // namespace pareto
