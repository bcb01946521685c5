// Cost of the Hessian-discrepancy study at one module width (default 14336, Llama-3.1-8B's MLP hidden width):
// accumulating three Hessians (text, decode, target) from random activations, then δ(text) and δ(decode)
// against the target. Prints a table; asserts nothing.
//   bench_hessian [--width N] [--tokens N] [--device cuda|cpu] [--json OUT]
#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/HessianDiscrepancy.h"
#include "calib/HessianAccumulator.h"
#include "model/Device.h"

#ifdef PARETO_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace {
void sync(const c10::Device& d) {
#ifdef PARETO_WITH_CUDA
  if (d.is_cuda()) at::cuda::getCurrentCUDAStream(d.index()).synchronize();
#else
  (void)d;
#endif
}
}  // namespace

int main(int argc, char** argv) {
  int64_t width = 14336, tokens = 16384, chunk = 2048;
  std::string device = "cuda", jsonOut;
  CLI::App app{"Hessian accumulation and discrepancy timing at one module width"};
  app.add_option("--width", width, "Input width of the module")->capture_default_str();
  app.add_option("--tokens", tokens, "Activation rows per Hessian")->capture_default_str();
  app.add_option("--device", device, "cpu or cuda")->capture_default_str();
  app.add_option("--json", jsonOut, "Write the results to this file too");
  CLI11_PARSE(app, argc, argv);
  try {
    const c10::Device dev = pareto::parseDevice(device);
    using clock = std::chrono::steady_clock;
    auto seconds = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
    at::manual_seed(0);
    // Three activation distributions that differ in scale per direction, like text vs decode activations.
    auto opts = at::TensorOptions().device(dev).dtype(at::kBFloat16);
    at::Tensor mix = at::randn({width, width}, at::TensorOptions().device(dev)) / std::sqrt(double(width));
    std::vector<pareto::HessianAccumulator> h;
    std::vector<double> accumulateS;
    for (int k = 0; k < 3; ++k) {
      h.emplace_back(width, dev, "bench");
      at::Tensor scale = 1 + 0.3 * k * at::rand({width}, at::TensorOptions().device(dev));
      sync(dev);
      auto t0 = clock::now();
      for (int64_t done = 0; done < tokens; done += chunk) {
        const int64_t rows = std::min(chunk, tokens - done);
        at::Tensor x = (at::matmul(at::randn({rows, width}, at::TensorOptions().device(dev)), mix) * scale).to(opts);
        h.back().add(x);
      }
      sync(dev);
      accumulateS.push_back(seconds(t0));
    }
    at::Tensor target = h[2].mean();
    std::vector<pareto::DiscrepancyResult> deltas;
    std::vector<double> deltaS;
    for (int k = 0; k < 2; ++k) {
      sync(dev);
      auto t0 = clock::now();
      deltas.push_back(pareto::hessianDiscrepancy(h[k].mean(), target, {}, "bench"));
      sync(dev);
      deltaS.push_back(seconds(t0));
    }
    nlohmann::json j = {{"width", width},
                        {"tokens", tokens},
                        {"device", pareto::deviceDescription(dev)},
                        {"accumulate_s", accumulateS},
                        {"delta_s", deltaS},
                        {"delta", {deltas[0].delta, deltas[1].delta}},
                        {"iterations", {deltas[0].iterations, deltas[1].iterations}},
                        {"converged", deltas[0].converged && deltas[1].converged}};
    if (!jsonOut.empty()) std::ofstream(jsonOut) << j.dump(2) << "\n";
    std::printf("device %s, width %lld, %lld tokens per Hessian\n", pareto::deviceDescription(dev).c_str(),
                static_cast<long long>(width), static_cast<long long>(tokens));
    std::printf("%-22s %10s\n", "step", "seconds");
    for (int k = 0; k < 3; ++k) std::printf("accumulate H%-10d %10.3f\n", k, accumulateS[k]);
    for (int k = 0; k < 2; ++k)
      std::printf("delta H%d vs H2 %7s %10.3f  (δ %.4f, %d iterations%s)\n", k, "", deltaS[k], deltas[k].delta,
                  deltas[k].iterations, deltas[k].converged ? "" : ", NOT converged");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_hessian: %s\n", e.what());
    return 1;
  }
  return 0;
}
