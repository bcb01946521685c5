// fp16 / bf16 bit patterns to float on the host, for the CPU references (which must not depend on CUDA or
// LibTorch). Exact: every fp16 and bf16 value is a float.
#pragma once

#include <cstdint>
#include <cstring>

namespace pareto::kernels {

inline float floatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float bf16ToFloat(uint16_t h) { return floatFromBits(uint32_t(h) << 16); }

inline float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return floatFromBits(sign | 0x7F800000u | (mantissa << 13));  // inf, nan
  if (exponent != 0) return floatFromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return floatFromBits(sign);
  // Subnormal: normalise the mantissa.
  int e = -1;
  do {
    ++e;
    mantissa <<= 1;
  } while ((mantissa & 0x400u) == 0);
  return floatFromBits(sign | uint32_t(112 - e) << 23 | ((mantissa & 0x3FFu) << 13));
}

}  // namespace pareto::kernels
