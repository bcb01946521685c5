// The small operations of one decode step (batch rows of one new token each), fused so that a step captured in
// a CUDA graph is a short chain of kernels: per layer add+RMSNorm, QKV GEMV, RoPE+cache write, attention,
// O GEMV, add+RMSNorm, gate/up GEMV, SiLU·mul, down GEMV. Unfused, LibTorch needs ~45 kernels a layer, and at
// ~2 µs each that is as long as reading the weights of an 8B model.
//
// Every op writes into buffers the caller owns (static buffers of a captured graph) and reads positions from
// device tensors, so nothing in a step depends on host values and no step synchronises with the host.
// On CUDA the ops run kernels/decode_*.cu; on the CPU they run the same arithmetic with ATen ops in the order
// transformers uses (the reference the CUDA path is tested against, and how CI exercises decode).
// Shapes: B = batch rows (1..64), H = hidden size, Hq/Hkv = query/key-value heads, D = head dim (even, ≤ 256),
// C = cache capacity (positions). dtype fp16 or bf16 throughout except where stated.
#pragma once

#include <ATen/core/Tensor.h>

namespace pareto {

// residual [B, H] += delta [B, H] (rounded to the dtype, as transformers' `h = x + attn`), then
// out [B, H] = weight ⊙ (residual·rsqrt(mean(residual²) + eps) computed in fp32 and rounded to the dtype).
// delta may be undefined (the first layer: residual is the embedding).
void addRmsNorm(const at::Tensor& residual, const at::Tensor& delta, const at::Tensor& weight, double eps,
                const at::Tensor& out);

// qkv [B, (Hq + 2·Hkv)·D]: the fused q/k/v projection of the new token (biases already added).
// Optionally (Qwen3) RMSNorm each q and k head with qNorm/kNorm [D] (eps) before RoPE (undefined: skipped).
// RoPE at positions [B] int64 (device): angle = float32(position)·invFreq[i] (invFreq float32 [D/2]), cos and
// sin rounded to the dtype, rotate-half convention (transformers' Llama). Writes q [B, Hq, D] and the new key
// and value at cache slot `slot` (int64 scalar tensor on the device): keys/values [B, Hkv, C, D].
// A slot outside [0, C) is an InputError on the CPU; on CUDA, where it is not read back, nothing is written.
void ropeAndCacheWrite(const at::Tensor& qkv, const at::Tensor& qNorm, const at::Tensor& kNorm, double eps,
                       const at::Tensor& positions, const at::Tensor& invFreq, const at::Tensor& slot,
                       const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values);

// Grouped-query attention of one query token per row over cache slots [validFrom[b], slot] (inclusive):
// query head h reads key-value head h / (Hq/Hkv); scores = q·k·scale, softmax in fp32, out [B, Hq·D].
// validFrom [B] int64 on the device (left padding of batched prompts) or undefined (all from 0); it is clamped
// to [0, slot], so a row of padding alone still attends its own slot (as LlamaModel's masks do).
// The CPU rejects a slot outside [0, C); CUDA clamps it into the cache.
void decodeAttention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values, const at::Tensor& slot,
                     const at::Tensor& validFrom, double scale, const at::Tensor& out);

// ropeAndCacheWrite followed by decodeAttention, on CUDA as one kernel (kernels/DecodeOps.h) with the same
// values bit for bit; q is not kept. counters: int32 [decodeAttentionCounters(B, Hq, Hkv)], zeros on the device,
// which the kernel leaves at zero (a static buffer of the caller, reused by every layer and step; the CPU checks
// its shape only). The shapes are those of the two ops; Hq comes from out [B, Hq·D].
void ropeAttention(const at::Tensor& qkv, const at::Tensor& qNorm, const at::Tensor& kNorm, double eps,
                   const at::Tensor& positions, const at::Tensor& invFreq, const at::Tensor& slot,
                   const at::Tensor& keys, const at::Tensor& values, const at::Tensor& validFrom, double scale,
                   const at::Tensor& counters, const at::Tensor& out);
int64_t decodeAttentionCounters(int64_t batch, int64_t qHeads, int64_t kvHeads);

// The greedy end of a decode step: next [B] = argmax of logits [B, V] (fp16/bf16; the first maximum, as at::argmax
// of their float32 copy), then the next step's inputs on the device: ids = next, positions += 1, slot += 1 and
// generated[:, slot] = next at the new slot (a slot past generated's columns writes nothing there). All int64
// on the logits' device; counter: int32 [1] zeros, left at zero (CUDA: one launch; the CPU: the ATen ops).
void greedyNextToken(const at::Tensor& logits, const at::Tensor& next, const at::Tensor& ids,
                     const at::Tensor& positions, const at::Tensor& slot, const at::Tensor& generated,
                     const at::Tensor& counter);

// gateUp [B, 2F] = [gate | up]: out [B, F] = silu(gate)·up (silu rounded to the dtype first, as
// transformers' act_fn(gate) * up).
void siluMul(const at::Tensor& gateUp, const at::Tensor& out);

// Whether the ops above run CUDA kernels in this build (false: CPU only).
bool decodeKernelsBuilt();

}  // namespace pareto
