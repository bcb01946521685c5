// The copy bandwidth every "of copy" figure is a fraction of, measured one way for the CLI and the workbench:
// (read + written) bytes of a copy over its time. On a CUDA device a device-to-device copy of 2 GiB, the median of
// 10 timed with CUDA events after 3 warm-ups (about 0.1 s on an H200); on the CPU a memcpy of 64 MiB, the best
// of 4 (the ceiling of a CPU decode that streams its weights).
#pragma once

#include <c10/core/Device.h>

#include <cstddef>

namespace pareto {

// Bytes per second on `device`. Throws InputError when this build has no CUDA and a CUDA device is asked for.
double measureCopyBandwidth(const c10::Device& device);

// The host figure alone, over `bytes` (tests use a small buffer).
double measureHostCopyBandwidth(size_t bytes = size_t(64) << 20);

}  // namespace pareto
