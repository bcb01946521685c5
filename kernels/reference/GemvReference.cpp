#include "reference/GemvReference.h"

#include <stdexcept>

#include "reference/HalfBits.h"

namespace pareto::kernels {
namespace {

float valueBits(ActivationType t, uint16_t bits) {
  return t == ActivationType::Float16 ? halfToFloat(bits) : bf16ToFloat(bits);
}

void require(const std::string& error) {
  if (!error.empty()) throw std::invalid_argument(error);
}

// y[b, r] += Σ over the row's (column, weight) pairs, in float64.
struct RowAccumulator {
  const GemvProblem& p;
  std::vector<double>& y;
  int64_t row;
  void add(int64_t col, double weight) {
    if (col >= p.cols) return;  // padding
    for (int b = 0; b < p.batch; ++b) y[size_t(b * p.rows + row)] += weight * activationAt(p, b, col);
  }
};

// Byte t of lane l's stream of `pieces` 16-byte pieces in chunk (g, c) of a lane-interleaved array.
uint8_t laneByte(const void* data, int64_t chunkIndex, int pieces, int lane, int64_t t) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  return bytes[((chunkIndex * pieces + t / 16) * 32 + lane) * 16 + t % 16];
}

}  // namespace

float activationAt(const GemvProblem& p, int b, int64_t c) {
  return valueBits(p.type, static_cast<const uint16_t*>(p.x)[b * p.cols + c]);
}

std::vector<double> bitmaskNMGemvReference(const GemvProblem& p, const BitmaskNMGemvWeight& w) {
  require(checkBitmaskNMGemv(p, w));
  const int k = bitmaskKeptPerWord(w.n, w.m);
  const int64_t chunks = bitmaskChunks(p.cols);
  std::vector<double> y(size_t(p.batch * p.rows), 0.0);
  const auto* values = static_cast<const uint16_t*>(w.values);
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t g = r / kRowsPerGroup;
    const int lane = int(r % kRowsPerGroup);
    RowAccumulator row{p, y, r};
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t chunk = g * chunks + c;
      for (int word = 0; word < kBitmaskWordsPerChunk; ++word) {
        const uint32_t mask = w.masks[(chunk * 32 + lane) * 8 + word];
        int j = 0;
        for (int bit = 0; bit < 32; ++bit) {
          if (!(mask >> bit & 1u)) continue;
          const int v = word * k + j++;  // the lane's v-th value of the chunk
          const uint16_t bits = values[((chunk * k + v / 8) * 32 + lane) * 8 + v % 8];
          row.add(c * kBitmaskChunkCols + word * 32 + bit, valueBits(p.type, bits));
        }
        if (j != k) throw std::invalid_argument("mask word with " + std::to_string(j) + " set bits, expected " +
                                                std::to_string(k));
      }
    }
  }
  return y;
}

std::vector<double> quantGroupGemvReference(const GemvProblem& p, const QuantGroupGemvWeight& w) {
  require(checkQuantGroupGemv(p, w));
  const int chunkCols = quantChunkCols(w.bits);
  const int64_t chunks = quantChunks(p.cols, w.bits);
  std::vector<double> y(size_t(p.batch * p.rows), 0.0);
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t g = r / kRowsPerGroup;
    const int lane = int(r % kRowsPerGroup);
    RowAccumulator row{p, y, r};
    for (int64_t c = 0; c < chunks; ++c) {
      for (int local = 0; local < chunkCols; ++local) {
        const int64_t col = c * chunkCols + local;
        if (col >= p.cols) break;
        double q;
        if (w.bits == 4) {
          const uint8_t byte = laneByte(w.codes, g * chunks + c, 8, lane, local / 2);
          q = (local % 2 == 0) ? (byte & 0xF) : (byte >> 4);
        } else {
          const uint8_t byte = laneByte(w.codes, g * chunks + c, 8, lane, local);
          q = w.symmetric ? double(int8_t(byte)) : double(byte);
        }
        const int64_t at = (g * w.scaleColumns + col / w.groupSize) * 32 + lane;
        const double scale = halfToFloat(w.scales[at]);
        const double zero = w.symmetric ? (w.bits == 4 ? 8.0 : 0.0) : double(w.zeros[at]);
        row.add(col, (q - zero) * scale);
      }
    }
  }
  return y;
}

std::vector<double> spqrGemvReference(const GemvProblem& p, const SpqrGemvWeight& w) {
  require(checkSpqrGemv(p, w));
  const int64_t chunks = spqrChunks(p.cols);
  const int secondPerGroup = 32 / w.scaleGroup;
  std::vector<double> y(size_t(p.batch * p.rows), 0.0);
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t g = r / kRowsPerGroup;
    const int lane = int(r % kRowsPerGroup);
    RowAccumulator row{p, y, r};
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t chunk = g * chunks + c;
      for (int grp = 0; grp < kSpqrChunkCols / kSpqrGroupCols; ++grp) {
        const uint8_t stat = w.stats[(chunk * 32 + lane) * 8 + grp];
        const int64_t s = (chunk * 8 + grp) * secondPerGroup + lane / w.scaleGroup;
        const double scale = double(halfToFloat(w.second[2 * s])) + (stat & 0xF) * double(halfToFloat(w.second[2 * s + 1]));
        const double zero = stat >> 4;
        for (int i = 0; i < kSpqrGroupCols; ++i) {
          const int local = grp * kSpqrGroupCols + i;
          uint32_t q = 0;
          for (int bit = 0; bit < w.bits; ++bit) {
            const int at = spqrCodeBit(w.bits, local, bit);
            q |= uint32_t(laneByte(w.codes, chunk, w.bits, lane, at / 8) >> (at % 8) & 1u) << bit;
          }
          row.add(c * kSpqrChunkCols + local, (double(q) - zero) * scale);
        }
      }
    }
    for (int32_t i = w.rowOffsets[r]; i < w.rowOffsets[r + 1]; ++i)
      row.add(w.outlierColumns[i], halfToFloat(w.outlierValues[i]));
  }
  return y;
}

std::vector<double> bitmaskInt4GemvReference(const GemvProblem& p, const BitmaskInt4GemvWeight& w) {
  require(checkBitmaskInt4Gemv(p, w));
  require(w.masks ? "" : "the reference reads the masks, and the weight has only their metadata");
  const int64_t chunks = ceilDiv(p.cols, 256);
  std::vector<double> y(size_t(p.batch * p.rows), 0.0);
  for (int64_t r = 0; r < p.rows; ++r) {
    const int64_t g = r / kRowsPerGroup;
    const int lane = int(r % kRowsPerGroup);
    RowAccumulator row{p, y, r};
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t chunk = g * chunks + c;
      int j = 0;  // kept value of the chunk
      for (int word = 0; word < 8; ++word) {
        const uint32_t mask = w.masks[(chunk * 32 + lane) * 8 + word];
        for (int bit = 0; bit < 32; ++bit) {
          if (!(mask >> bit & 1u)) continue;
          const uint8_t byte = laneByte(w.codes, chunk, 4, lane, j / 2);
          const double q = (j % 2 == 0) ? (byte & 0xF) : (byte >> 4);
          const int64_t kept = c * 128 + j;
          const int64_t at = (g * w.scaleColumns + (w.scaleColumns == 1 ? 0 : kept / w.groupSize)) * 32 + lane;
          const double scale = halfToFloat(w.scales[at]);
          const double zero = w.symmetric ? 8.0 : double(w.zeros[at]);
          row.add(c * 256 + word * 32 + bit, (q - zero) * scale);
          ++j;
        }
      }
      if (j != 128) throw std::invalid_argument("a chunk of a 50% N:M weight must keep 128 values");
    }
  }
  return y;
}

}  // namespace pareto::kernels
