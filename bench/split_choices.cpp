// Prints the split each packed format's policy chooses for every Llama-3.1-8B shape at batch 1, 2, 4, 8 and 16 on a
// 132-multiprocessor GPU, as CSV (format,batch,shape,splits,group_warps,ring_blocks,chunks_per_split): the host's
// split functions only, no GPU. bench/score-split-policy.py scores it against a `gemv_kernels sweep` CSV, so that
// a change of the policy can be weighed before a device run (bench/NOTES.md "the split sweep").
//   g++ -std=c++17 -O1 -Ikernels bench/split_choices.cpp kernels/GemvProblem.cpp kernels/GemvChecks.cpp \
//       kernels/KernelSwitches.cpp -o /tmp/split_choices && /tmp/split_choices > choices.csv
#include <cstdio>

#include "BitmaskInt4Gemv.h"
#include "BitmaskNMGemv.h"
#include "GemvProblem.h"
#include "QuantGroupGemv.h"
#include "SpqrGemv.h"

namespace k = pareto::kernels;

int main() {
  constexpr int kMultiprocessors = 132;  // H100 and H200 alike
  struct Shape {
    const char* name;
    int64_t rows, cols;
  };
  // As bench/gemv_kernels.cu kLlama8b.
  const Shape shapes[] = {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate+up", 28672, 4096}, {"down", 4096, 14336}};
  std::printf("format,batch,shape,splits,group_warps,ring_blocks,chunks_per_split\n");
  for (int batch : {1, 2, 4, 8, 16})
    for (const Shape& s : shapes) {
      const k::GemvProblem p{s.rows, s.cols, batch, k::ActivationType::Float16, nullptr, nullptr};
      const auto print = [&](const char* format, const k::GemvSplit& sp) {
        std::printf("%s,%d,%s,%d,%d,%lld,%lld\n", format, batch, s.name, sp.splits, sp.ringGroupWarps,
                    (long long)sp.ringBlocks, (long long)sp.chunksPerSplit);
      };
      // The weights as gemv_kernels bench makes them (symmetric codes; only the fields the splits read).
      for (int bits : {4, 8}) {
        const int64_t group = bits == 4 ? 128 : s.cols;
        const k::QuantGroupGemvWeight w{nullptr, nullptr, nullptr, bits, true, group, k::quantScaleColumns(s.cols, group, bits)};
        print(bits == 4 ? "int4-g128" : "int8-channel", k::quantGroupGemvSplit(p, w, kMultiprocessors));
      }
      const k::BitmaskInt4GemvWeight wi{nullptr, nullptr, nullptr, nullptr, true, 128, k::bitmaskInt4ScaleColumns(s.cols, 128),
                                        2, 4, nullptr};
      print("bitmask-2:4+int4-g128", k::bitmaskInt4GemvSplit(p, wi, kMultiprocessors));
      print("bitmask-2:4", k::bitmaskNMGemvSplit(p, k::BitmaskNMGemvWeight{nullptr, nullptr, 2, 4}, kMultiprocessors));
      print("bitmask-16:32", k::bitmaskNMGemvSplit(p, k::BitmaskNMGemvWeight{nullptr, nullptr, 16, 32}, kMultiprocessors));
      k::SpqrGemvWeight ws;
      ws.bits = 3;
      ws.scaleGroup = 16;
      print("spqr-3bit", k::spqrGemvSplit(p, ws, kMultiprocessors));
    }
  return 0;
}
