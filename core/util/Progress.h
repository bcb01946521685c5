// Progress reporting and cancellation for long jobs. Jobs call the callback between units of work (windows,
// layers, batches) and check the token at the same points, so a cancel stops within one unit.
#pragma once

#include <atomic>
#include <functional>
#include <string>

namespace pareto {

struct ProgressUpdate {
  std::string stage;     // e.g. "perplexity"
  double fraction = 0;   // 0..1 over the whole stage
  std::string message;   // e.g. "window 3/40"
};

using ProgressCallback = std::function<void(const ProgressUpdate&)>;

// Reports `progress`'s updates with their fractions mapped into [from, to]: one stage made of several parts
// (the dense and then the compressed model's load). Empty when `progress` is.
inline ProgressCallback partOfStage(const ProgressCallback& progress, double from, double to) {
  if (!progress) return {};
  return [progress, from, to](const ProgressUpdate& u) {
    ProgressUpdate scaled = u;
    scaled.fraction = from + (to - from) * u.fraction;
    progress(scaled);
  };
}

class CancelToken {
 public:
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool isCancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

}  // namespace pareto
