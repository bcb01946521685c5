// Random packed weights of a given shape, made directly on a device: what `bench kernels` and synthetic models
// measure speed with (no checkpoint needed) and what the kernel tests feed the kernels and their references.
// The values are random but every part is valid for its format (exactly N kept per group of M, codes in range,
// sorted distinct outlier columns), so the packed structs' own consistency checks pass.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "formats/BitmaskNMWeight.h"
#include "formats/QuantGroupWeight.h"
#include "runtime/PackedGemv.h"

namespace pareto {

// A dense random weight [rows, cols] (normal, std 0.02, like an initialised linear layer) in `dtype`.
at::Tensor randomDenseWeight(int64_t rows, int64_t cols, at::ScalarType dtype, at::Device device, uint64_t seed);

// N:M: the N largest-magnitude entries of every group of M of a random dense weight.
BitmaskNMWeight randomBitmaskNM(int64_t rows, int64_t cols, int n, int m, at::ScalarType dtype, at::Device device,
                                uint64_t seed);

// Codes on a uniform grid with fp16 scales (and uint8 zeros when asymmetric); groupSize = cols is per channel.
QuantGroupWeight randomQuantGroup(int64_t rows, int64_t cols, int bits, bool symmetric, int64_t groupSize,
                                  at::Device device, uint64_t seed);

// SpQR parts with `outlierFraction` of each row's weights as outliers (rounded to whole outliers per row).
SpqrParts randomSpqr(int64_t rows, int64_t cols, int bits, int64_t scaleGroup, double outlierFraction,
                     at::Device device, uint64_t seed);

}  // namespace pareto
