#include "formats/GgufQuant.h"

#include <c10/util/Half.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "util/Error.h"

namespace pareto {
namespace gguf {
namespace {

Fp16Bits toHalf(float x) { return c10::Half(x).x; }
float fromHalf(Fp16Bits bits) { return static_cast<float>(c10::Half(bits, c10::Half::from_bits())); }

// The weight of largest magnitude, with its sign (the first of equal magnitudes).
float signedAbsMax(const float* w, int n) {
  float best = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(w[i]) > std::fabs(best)) best = w[i];
  return best;
}

int roundToInt(float x) { return static_cast<int>(std::lrintf(x)); }

// Q4_K's 12 bytes of scales and mins: sub-blocks 0-3 keep their 6 bits in the low bits of bytes 0-3 (scales)
// and 4-7 (mins); sub-blocks 4-7 keep their low 4 bits in bytes 8-11 (scale low nibble, min high nibble) and
// their top 2 bits in the top bits of bytes 0-3 (scales) and 4-7 (mins).
void packQ4KScales(const std::array<uint8_t, 8>& sc, const std::array<uint8_t, 8>& m, uint8_t* out) {
  for (int j = 0; j < 4; ++j) {
    out[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = uint8_t((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    out[j + 8] = uint8_t((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

void unpackQ4KScales(const uint8_t* in, std::array<uint8_t, 8>& sc, std::array<uint8_t, 8>& m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = in[j] & 63;
    m[j] = in[j + 4] & 63;
    sc[j + 4] = uint8_t((in[j + 8] & 15) | ((in[j] >> 6) << 4));
    m[j + 4] = uint8_t((in[j + 8] >> 4) | ((in[j + 4] >> 6) << 4));
  }
}

// Q6_K's codes of one 128-weight half h: for l < 32, ql[64h + l] holds the low nibbles of weights l (low) and
// l + 64 (high), ql[64h + 32 + l] those of l + 32 and l + 96, and qh[32h + l] the top 2 bits of l, l + 32, l + 64
// and l + 96 (bits 0-1, 2-3, 4-5, 6-7), weights counted from 128h.
void packQ6KCodes(const int* q, BlockQ6K& b) {
  for (int h = 0; h < 2; ++h) {
    const int* w = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      b.ql[64 * h + l] = uint8_t((w[l] & 15) | ((w[l + 64] & 15) << 4));
      b.ql[64 * h + 32 + l] = uint8_t((w[l + 32] & 15) | ((w[l + 96] & 15) << 4));
      b.qh[32 * h + l] = uint8_t((w[l] >> 4) | ((w[l + 32] >> 4) << 2) | ((w[l + 64] >> 4) << 4) | ((w[l + 96] >> 4) << 6));
    }
  }
}

void unpackQ6KCodes(const BlockQ6K& b, int* q) {
  for (int h = 0; h < 2; ++h) {
    int* w = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const uint8_t lo0 = b.ql[64 * h + l], lo1 = b.ql[64 * h + 32 + l], hi = b.qh[32 * h + l];
      w[l] = (lo0 & 15) | ((hi & 3) << 4);
      w[l + 32] = (lo1 & 15) | (((hi >> 2) & 3) << 4);
      w[l + 64] = (lo0 >> 4) | (((hi >> 4) & 3) << 4);
      w[l + 96] = (lo1 >> 4) | (((hi >> 6) & 3) << 4);
    }
  }
}

template <class Block>
Block readBlock(const uint8_t* bytes) {
  Block b;
  std::memcpy(&b, bytes, sizeof b);
  return b;
}

void checkQuantized(TensorType type) {
  if (!traits(type).quantized)
    throw InputError(std::string("gguf: ") + traits(type).name + " is not a block-quantized type");
}

}  // namespace

TypeTraits traits(TensorType type) {
  switch (type) {
    case TensorType::F32: return {"f32", 1, 4, false};
    case TensorType::F16: return {"f16", 1, 2, false};
    case TensorType::BF16: return {"bf16", 1, 2, false};
    case TensorType::Q8_0: return {"q8_0", kQ8_0Weights, int(sizeof(BlockQ8_0)), true};
    case TensorType::Q4_0: return {"q4_0", kQ4_0Weights, int(sizeof(BlockQ4_0)), true};
    case TensorType::Q4_K: return {"q4_k", kSuperBlockWeights, int(sizeof(BlockQ4K)), true};
    case TensorType::Q6_K: return {"q6_k", kSuperBlockWeights, int(sizeof(BlockQ6K)), true};
  }
  throw InputError("gguf: unknown tensor type " + std::to_string(uint32_t(type)));
}

TensorType parseTensorType(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0, TensorType::Q4_0,
                       TensorType::Q4_K, TensorType::Q6_K})
    if (lower == traits(t).name) return t;
  throw InputError("unknown GGUF tensor type \"" + name + "\" (expected f32, f16, bf16, q8_0, q4_0, q4_k or q6_k)");
}

int64_t rowBytes(TensorType type, int64_t cols) {
  const TypeTraits t = traits(type);
  if (cols % t.weightsPerBlock != 0)
    throw InputError(std::string("gguf ") + t.name + ": a row of " + std::to_string(cols) +
                     " weights is not a whole number of " + std::to_string(t.weightsPerBlock) + "-weight blocks");
  return cols / t.weightsPerBlock * t.bytesPerBlock;
}

TensorType narrowRowType(TensorType type) {
  if (type == TensorType::Q4_K) return TensorType::Q4_0;
  if (type == TensorType::Q6_K) return TensorType::Q8_0;
  return type;
}

float BlockGrid::value(int position, int code) const {
  const int s = position / subBlockWeights;
  switch (type) {
    case TensorType::Q8_0: return fromHalf(d) * float(code);
    case TensorType::Q4_0: return fromHalf(d) * float(code - 8);
    case TensorType::Q4_K: {
      const float scale = fromHalf(d) * float(sc[s]);
      const float offset = fromHalf(dmin) * float(m[s]);
      return scale * float(code) - offset;
    }
    case TensorType::Q6_K: return fromHalf(d) * float(sc6[s]) * float(code - 32);
    default: break;
  }
  checkQuantized(type);
  return 0;
}

int BlockGrid::nearestCode(int position, float x) const {
  // value() is affine in the code: invert it, then settle between the two codes around the exact inverse.
  const float v0 = value(position, codeMin), v1 = value(position, codeMin + 1);
  const float step = v1 - v0;
  if (step == 0 || !std::isfinite(step)) {
    // A zero scale: every code stands for the same value; store the one that means zero.
    const int zero = type == TensorType::Q4_0 ? 8 : type == TensorType::Q6_K ? 32 : 0;
    return std::clamp(zero, codeMin, codeMax);
  }
  const int below = std::clamp(codeMin + int(std::floor((x - v0) / step)), codeMin, codeMax);
  const int above = std::min(below + 1, codeMax);
  return std::fabs(value(position, above) - x) < std::fabs(value(position, below) - x) ? above : below;
}

BlockGrid chooseGrid(TensorType type, const float* w) {
  BlockGrid g;
  g.type = type;
  switch (type) {
    case TensorType::Q8_0: {
      g.subBlockWeights = kQ8_0Weights;
      g.codeMin = -128, g.codeMax = 127;
      g.d = toHalf(std::fabs(signedAbsMax(w, kQ8_0Weights)) / 127.0f);
      return g;
    }
    case TensorType::Q4_0: {
      // The weight of largest magnitude lands exactly on code 0 (−8 · d); the other end of the range has 7 steps.
      g.subBlockWeights = kQ4_0Weights;
      g.codeMin = 0, g.codeMax = 15;
      g.d = toHalf(signedAbsMax(w, kQ4_0Weights) / -8.0f);
      return g;
    }
    case TensorType::Q4_K: {
      g.subBlockWeights = 32;
      g.codeMin = 0, g.codeMax = 15;
      std::array<float, 8> scale{}, offset{};
      for (int s = 0; s < 8; ++s) {
        const float* sub = w + 32 * s;
        const float lo = std::min(0.0f, *std::min_element(sub, sub + 32));
        const float hi = *std::max_element(sub, sub + 32);
        scale[s] = (hi - lo) / 15.0f;
        offset[s] = -lo;
      }
      g.d = toHalf(*std::max_element(scale.begin(), scale.end()) / 63.0f);
      g.dmin = toHalf(*std::max_element(offset.begin(), offset.end()) / 63.0f);
      const float d = fromHalf(g.d), dmin = fromHalf(g.dmin);
      for (int s = 0; s < 8; ++s) {
        g.sc[s] = uint8_t(d > 0 ? std::clamp(roundToInt(scale[s] / d), 0, 63) : 0);
        g.m[s] = uint8_t(dmin > 0 ? std::clamp(roundToInt(offset[s] / dmin), 0, 63) : 0);
      }
      return g;
    }
    case TensorType::Q6_K: {
      // Each sub-block's weight of largest magnitude maps to code 0 (q − 32 = −32); the sub-block scales are
      // int8 with the largest of them at −128.
      g.subBlockWeights = 16;
      g.codeMin = 0, g.codeMax = 63;
      std::array<float, 16> scale{};
      for (int s = 0; s < 16; ++s) scale[s] = signedAbsMax(w + 16 * s, 16) / -32.0f;
      g.d = toHalf(signedAbsMax(scale.data(), 16) / -128.0f);
      const float d = fromHalf(g.d);
      for (int s = 0; s < 16; ++s) g.sc6[s] = int8_t(d != 0 ? std::clamp(roundToInt(scale[s] / d), -128, 127) : 0);
      return g;
    }
    default: break;
  }
  checkQuantized(type);
  return g;
}

void encodeBlock(const BlockGrid& g, const int* codes, uint8_t* out) {
  const int n = traits(g.type).weightsPerBlock;
  for (int i = 0; i < n; ++i)
    if (codes[i] < g.codeMin || codes[i] > g.codeMax)
      throw Error(std::string("gguf ") + traits(g.type).name + ": code " + std::to_string(codes[i]) +
                  " outside [" + std::to_string(g.codeMin) + ", " + std::to_string(g.codeMax) + "]");
  switch (g.type) {
    case TensorType::Q8_0: {
      BlockQ8_0 b{};
      b.d = g.d;
      for (int i = 0; i < kQ8_0Weights; ++i) b.qs[i] = int8_t(codes[i]);
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case TensorType::Q4_0: {
      BlockQ4_0 b{};
      b.d = g.d;
      for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(codes[j] | (codes[j + 16] << 4));
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case TensorType::Q4_K: {
      BlockQ4K b{};
      b.d = g.d;
      b.dmin = g.dmin;
      packQ4KScales(g.sc, g.m, b.scales);
      for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) b.qs[32 * c + l] = uint8_t(codes[64 * c + l] | (codes[64 * c + 32 + l] << 4));
      std::memcpy(out, &b, sizeof b);
      return;
    }
    case TensorType::Q6_K: {
      BlockQ6K b{};
      packQ6KCodes(codes, b);
      for (int s = 0; s < 16; ++s) b.scales[s] = g.sc6[s];
      b.d = g.d;
      std::memcpy(out, &b, sizeof b);
      return;
    }
    default: checkQuantized(g.type);
  }
}

void decodeBlock(TensorType type, const uint8_t* bytes, float* out) {
  BlockGrid g;
  g.type = type;
  int codes[kSuperBlockWeights];
  switch (type) {
    case TensorType::Q8_0: {
      const auto b = readBlock<BlockQ8_0>(bytes);
      g.d = b.d;
      g.subBlockWeights = kQ8_0Weights;
      for (int i = 0; i < kQ8_0Weights; ++i) codes[i] = b.qs[i];
      break;
    }
    case TensorType::Q4_0: {
      const auto b = readBlock<BlockQ4_0>(bytes);
      g.d = b.d;
      g.subBlockWeights = kQ4_0Weights;
      for (int j = 0; j < 16; ++j) codes[j] = b.qs[j] & 15, codes[j + 16] = b.qs[j] >> 4;
      break;
    }
    case TensorType::Q4_K: {
      const auto b = readBlock<BlockQ4K>(bytes);
      g.d = b.d;
      g.dmin = b.dmin;
      g.subBlockWeights = 32;
      unpackQ4KScales(b.scales, g.sc, g.m);
      for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) codes[64 * c + l] = b.qs[32 * c + l] & 15, codes[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
      break;
    }
    case TensorType::Q6_K: {
      const auto b = readBlock<BlockQ6K>(bytes);
      g.d = b.d;
      g.subBlockWeights = 16;
      for (int s = 0; s < 16; ++s) g.sc6[s] = b.scales[s];
      unpackQ6KCodes(b, codes);
      break;
    }
    default: checkQuantized(type);
  }
  const int n = traits(type).weightsPerBlock;
  for (int i = 0; i < n; ++i) out[i] = g.value(i, codes[i]);
}

std::vector<uint8_t> quantizeRows(TensorType type, const float* w, int64_t rows, int64_t cols) {
  checkQuantized(type);
  const TypeTraits t = traits(type);
  const int64_t perRow = rowBytes(type, cols);
  std::vector<uint8_t> out(size_t(rows * perRow));
  int codes[kSuperBlockWeights];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / t.weightsPerBlock; ++b) {
      const float* block = w + r * cols + b * t.weightsPerBlock;
      const BlockGrid g = chooseGrid(type, block);
      for (int i = 0; i < t.weightsPerBlock; ++i) codes[i] = g.nearestCode(i, block[i]);
      encodeBlock(g, codes, out.data() + r * perRow + b * t.bytesPerBlock);
    }
  }
  return out;
}

void dequantizeRows(TensorType type, const uint8_t* data, int64_t rows, int64_t cols, float* out) {
  checkQuantized(type);
  const TypeTraits t = traits(type);
  const int64_t blocks = rows * (cols / t.weightsPerBlock);
  (void)rowBytes(type, cols);
  for (int64_t b = 0; b < blocks; ++b) decodeBlock(type, data + b * t.bytesPerBlock, out + b * t.weightsPerBlock);
}

}  // namespace gguf
}  // namespace pareto
