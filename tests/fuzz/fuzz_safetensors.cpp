// libFuzzer target: a safetensors image (8-byte length, JSON header, data) through the same validation a
// downloaded file gets. Every entry the parser accepts is then read end to end, so an offset or size it let
// through wrongly shows up as an AddressSanitizer report rather than a quiet wrong answer.
#include <cstddef>
#include <cstdint>

#include "checkpoint/Safetensors.h"
#include "util/Error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const pareto::SafetensorsContents contents =
        pareto::parseSafetensors(reinterpret_cast<const std::byte*>(data), size, "fuzz.safetensors");
    unsigned sum = 0;
    for (const pareto::TensorEntry& t : contents.tensors) {
      if (t.numel() * static_cast<int64_t>(pareto::dtypeSize(t.dtype)) != static_cast<int64_t>(t.nbytes)) __builtin_trap();
      for (size_t i = 0; i < t.nbytes; ++i) sum += std::to_integer<unsigned>(t.data[i]);
    }
    for (const auto& [key, value] : contents.metadata) sum += static_cast<unsigned>(key.size() + value.size());
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const pareto::InputError&) {
    // refused with a message: the expected outcome for most inputs
  }
  return 0;
}
