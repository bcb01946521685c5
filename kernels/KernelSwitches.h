// Environment switches between the kernels' paths, all in one list.
//
// They exist for A/B timing on the GPU machine (each one's measurement is in bench/NOTES.md) and as a way out
// should a driver or a shape mishandle a path; a user never needs one. "0" turns a switch off and "1" on; unset
// leaves the path's own policy. Any other value is reported once on stderr, naming the switch, and taken as
// unset, so a typo cannot silently change what a benchmark measures.
#pragma once

namespace pareto::kernels {

enum class SwitchSetting { Unset, Off, On };

struct KernelSwitch {
  const char* name;
  const char* meaning;  // what "0" or "1" does (gemv_kernels prints it in its usage)
};

inline constexpr KernelSwitch kKernelSwitches[] = {
    {"PARETO_PDL", "0: every kernel launched the ordinary way, without programmatic dependent launch"},
    {"PARETO_QUANT_MMA", "0: the int4/int8 GEMVs on the FFMA path; 1: on the tensor cores wherever they can be"},
    {"PARETO_QUANT_ODD", "0: the odd int4 columns shifted down before the tensor cores, not read in place under exponent 64"},
    {"PARETO_QUANT_ZERO_MMA", "0: int4 g128 (fp16) subtracts its zero point through per-unit sums of x, not on the tensor cores"},
    {"PARETO_QUANT_ZERO_MMA_8", "0: int8 (fp16, per channel) subtracts its zero point through per-unit sums of x, not on the tensor cores"},
    {"PARETO_QUANT_ZERO_ROW", "0: the int4/int8 zero point on the tensor cores once a row tile, not its shared terms (bias, sum of x) once a batch tile"},
    {"PARETO_QUANT_DEEP_RING", "1: int4 (fp16) at batch 1-4 streams half chunks through 4 ring stages (6 KB a warp in flight), not whole ones through 2"},
    {"PARETO_QUANT_HALVES", "0: whole chunks in the int4/int8 rings at batch 8 and 16"},
    {"PARETO_BITMASK_MMA", "0: the N:M GEMVs on the FFMA path; 1: on the tensor cores wherever they can be"},
    {"PARETO_BITMASK_INT4_MMA", "0: 2:4 + int4 on the FFMA path"},
    {"PARETO_SPQR_MMA", "0: SpQR on the FFMA path; 1: on the tensor cores wherever they can be"},
    {"PARETO_SPQR_EARLY_SEARCH", "0: SpQR's tensor-core path searches its outliers' columns after it waits for the previous kernel, not before"},
    {"PARETO_RING_BALANCED", "0: a ring GEMV keeps uniform blocks where they fill some multiprocessors twice and others once, not its row groups dealt out evenly over a full wave"},
    {"PARETO_SPLIT_COMBINE_WIDE", "0: the last block of a split GEMV loads 2-8 splits' partial sums at once at batch 1-8 (4-16 otherwise)"},
    {"PARETO_RING_SPREAD", "1: a ring GEMV of no more blocks than multiprocessors reserves over half of one's shared memory, so that no two of its blocks share a multiprocessor"},
    {"PARETO_RING_GROUP_WARPS", "0: every warp of a ring block its own row group (no sharing of a row group)"},
    {"PARETO_NORM_ONE_ROUND", "0: a GEMV with a folded RMSNorm reads the row for its statistic apart from staging x, always"},
    {"PARETO_ATTENTION_EARLY_TILE", "0: the fused decode attention waits for the previous kernel before it reads its first tile"},
    {"PARETO_ATTENTION_ROPE_PRELOAD", "0: the fused decode attention reads each head's qkv values where it rotates them, not all at once"},
    {"PARETO_ATTENTION_WAVE", "0: the decode attention split into about 4 blocks a multiprocessor, rounded up"},
};

// The setting of switch `name` (one of kKernelSwitches) in the environment now. Callers read it once, into a
// function-local static: a process's kernels take one path for its whole life.
SwitchSetting kernelSwitch(const char* name);

}  // namespace pareto::kernels
