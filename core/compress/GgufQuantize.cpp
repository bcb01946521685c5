#include "compress/GgufQuantize.h"

#include <ATen/ATen.h>

#include <utility>
#include <vector>

#include "compress/DampedHessian.h"
#include "compress/ObsSweep.h"
#include "compress/SolverInputs.h"
#include "formats/GgufQuant.h"
#include "util/Error.h"

namespace pareto {
namespace {

// The subject of messages, after the checks every GGUF solver shares.
std::string checkInputs(const at::Tensor& weight, gguf::TensorType type, const std::string& moduleName) {
  const std::string who = solverSubject(moduleName);
  checkWeightMatrix(weight, who);
  checkFiniteWeight(weight, who);
  const gguf::TypeTraits t = gguf::traits(type);
  if (!t.quantized) throw InputError(who + ": GGUF type " + t.name + " is not a block-quantized grid");
  if (weight.size(1) % t.weightsPerBlock != 0)
    throw InputError(who + ": " + std::to_string(weight.size(1)) + " input columns are not whole " +
                     std::to_string(t.weightsPerBlock) + "-weight blocks of gguf-" + t.name);
  return who;
}

at::Tensor decoded(const at::Tensor& blocks, gguf::TensorType type, int64_t cols, const at::Tensor& like) {
  at::Tensor out = at::empty({blocks.size(0), cols}, at::kFloat);
  gguf::dequantizeRows(type, blocks.data_ptr<uint8_t>(), blocks.size(0), cols, out.data_ptr<float>());
  return out.to(like.device(), like.scalar_type());
}

}  // namespace

GgufQuantResult ggufRtnQuantize(const at::Tensor& weight, gguf::TensorType type, const std::string& moduleName) {
  checkInputs(weight, type, moduleName);
  const int64_t rows = weight.size(0), cols = weight.size(1);
  const at::Tensor w = weight.to(at::kCPU, at::kFloat).contiguous();
  std::vector<uint8_t> bytes = gguf::quantizeRows(type, w.data_ptr<float>(), rows, cols);
  GgufQuantResult r;
  r.blocks = at::empty({rows, gguf::rowBytes(type, cols)}, at::kByte);
  std::copy(bytes.begin(), bytes.end(), r.blocks.data_ptr<uint8_t>());
  r.dequantized = decoded(r.blocks, type, cols, weight);
  return r;
}

GgufGptqResult ggufGptqQuantize(const at::Tensor& weight, const at::Tensor& hessian, gguf::TensorType type,
                                const GgufGptqOptions& options, const std::string& moduleName) {
  const std::string who = checkInputs(weight, type, moduleName);
  checkObsOptions(options.damp, options.blockSize, options.maxDampRetries, who, "GPTQ");
  ObsInputs inputs = obsInputs(weight, hessian, {}, obsWorkType(weight), who, "GPTQ");
  GgufGptqResult result;
  result.report.deadInputs = inputs.deadInputs;
  const DampedInverse damped = dampedInverse(inputs.hessian, options.damp, options.maxDampRetries, who, "GPTQ");
  noteDamping(result.report, damped.damping);
  inputs.hessian = at::Tensor();

  const gguf::TypeTraits t = gguf::traits(type);
  const int64_t rows = weight.size(0), cols = weight.size(1), width = t.weightsPerBlock;
  const int64_t blocksPerRow = cols / width;
  const int64_t lazy = (options.blockSize + width - 1) / width * width;
  std::vector<gguf::BlockGrid> grids(size_t(rows * blocksPerRow));   // [row][block]
  std::vector<int> codes(size_t(rows * cols));                        // [row][column]
  ObsSweepHooks hooks;
  hooks.fixColumn = [&](const ObsSweepState& sweep, int64_t column, const at::Tensor& values) {
    const int64_t block = column / width;
    const int position = int(column % width);
    if (position == 0) {
      const at::Tensor current = sweep.current(column, width).to(at::kCPU, at::kFloat).contiguous();
      const float* w = current.data_ptr<float>();
      for (int64_t r = 0; r < rows; ++r) grids[size_t(r * blocksPerRow + block)] = gguf::chooseGrid(type, w + r * width);
    }
    const at::Tensor v = values.to(at::kCPU, at::kFloat).contiguous();
    at::Tensor fixed = at::empty({rows}, at::kFloat);
    const float* x = v.data_ptr<float>();
    float* out = fixed.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const gguf::BlockGrid& g = grids[size_t(r * blocksPerRow + block)];
      const int code = g.nearestCode(position, x[r]);
      codes[size_t(r * cols + column)] = code;
      out[r] = g.value(position, code);
    }
    return fixed.to(values.device(), values.scalar_type());
  };
  const ObsSweepResult swept = obsSweep(inputs.weight, damped.upper, lazy, hooks);
  checkSweptWeight(swept.weight, who, "GPTQ", result.report.damp);
  result.report.loss = swept.loss;

  GgufQuantResult& q = result.quant;
  const int64_t rowBytes = gguf::rowBytes(type, cols);
  q.blocks = at::empty({rows, rowBytes}, at::kByte);
  uint8_t* bytes = q.blocks.data_ptr<uint8_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocksPerRow; ++b)
      gguf::encodeBlock(grids[size_t(r * blocksPerRow + b)], codes.data() + r * cols + b * width,
                        bytes + r * rowBytes + b * t.bytesPerBlock);
  q.dequantized = decoded(q.blocks, type, cols, weight);
  return result;
}

}  // namespace pareto
