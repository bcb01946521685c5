// Tokenizer throughput: encodes a text file with each tokenizer and prints tokens per second (single thread).
//   bench_tokenizer [--shared DIR] [--text FILE] [--repeat N] [--json OUT]
// The first encode of each tokenizer is reported apart: it fills the per-pre-token cache, which is what a
// user's first perplexity run pays.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "tokenizer/Tokenizer.h"
#include "util/Error.h"
#include "util/Json.h"

int main(int argc, char** argv) {
  std::string shared = std::getenv("PARETO_SHARED") ? std::getenv("PARETO_SHARED") : "../shared";
  std::string textFile;
  std::string jsonOut;
  int repeat = 5;
  CLI::App app{"Tokenizer throughput on one core for each reference tokenizer"};
  app.add_option("--shared", shared, "Folder with tokenizers/ and models/ (default $PARETO_SHARED or ../shared)");
  app.add_option("--text", textFile, "Text to encode (default <shared>/data/heldout-prose.txt)");
  app.add_option("--repeat", repeat, "Timed encodes after the first")->check(CLI::PositiveNumber);
  app.add_option("--json", jsonOut, "Also write the results to this JSON file");
  CLI11_PARSE(app, argc, argv);
  if (textFile.empty()) textFile = shared + "/data/heldout-prose.txt";

  try {
    const std::string text = pareto::readTextFile(textFile);
    const std::vector<std::pair<std::string, std::string>> tokenizers = {
        {"llama3", shared + "/tokenizers/llama3/tokenizer.json"},
        {"qwen3", shared + "/tokenizers/qwen3/tokenizer.json"},
        {"spm-bpe-32k", shared + "/tokenizers/spm-bpe-32k/tokenizer.json"},
        {"ref", shared + "/models/ref-small/tokenizer.json"}};
    nlohmann::json results = nlohmann::json::array();
    using clock = std::chrono::steady_clock;
    for (const auto& [name, path] : tokenizers) {
      auto t0 = clock::now();
      pareto::Tokenizer tok = pareto::Tokenizer::fromPath(path);
      double loadS = std::chrono::duration<double>(clock::now() - t0).count();
      t0 = clock::now();
      size_t tokens = tok.encode(text).size();
      double firstS = std::chrono::duration<double>(clock::now() - t0).count();
      std::vector<double> times;
      for (int i = 0; i < repeat; ++i) {
        t0 = clock::now();
        tokens = tok.encode(text).size();
        times.push_back(std::chrono::duration<double>(clock::now() - t0).count());
      }
      std::sort(times.begin(), times.end());
      double median = times[times.size() / 2];
      results.push_back({{"tokenizer", name}, {"load_s", loadS}, {"first_encode_s", firstS},
                         {"median_encode_s", median}, {"tokens", tokens},
                         {"tokens_per_s", tokens / median}, {"bytes", text.size()}});
    }
    if (!jsonOut.empty()) std::ofstream(jsonOut) << results.dump(2) << "\n";
    std::printf("text: %s (%zu bytes)\n", textFile.c_str(), text.size());
    std::printf("%-12s %8s %10s %10s %10s %12s\n", "tokenizer", "load s", "first s", "median s", "tokens", "tokens/s");
    for (const auto& r : results)
      std::printf("%-12s %8.3f %10.3f %10.3f %10zu %12.0f\n", r["tokenizer"].get<std::string>().c_str(),
                  r["load_s"].get<double>(), r["first_encode_s"].get<double>(), r["median_encode_s"].get<double>(),
                  r["tokens"].get<size_t>(), r["tokens_per_s"].get<double>());
  } catch (const pareto::Error& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 2;
  }
  return 0;
}
