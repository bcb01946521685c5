#include "calib/TextCalibration.h"

#include <algorithm>

#include "util/Error.h"
#include "util/Json.h"

namespace pareto {

CalibrationSet textCalibration(const Tokenizer& tokenizer, const std::string& textFile,
                               const TextCalibrationOptions& opts) {
  if (opts.window < 2) throw InputError("calibration window must be at least 2 tokens");
  if (opts.tokens < 1) throw InputError("calibration needs at least one token");
  std::vector<TokenId> ids = encodeTextFile(tokenizer, textFile);
  const int64_t available = static_cast<int64_t>(ids.size()) / opts.window;
  const int64_t needed = (opts.tokens + opts.window - 1) / opts.window;
  if (needed > available)
    throw InputError(fileMessage(textFile, "has " + std::to_string(ids.size()) + " tokens, " +
                                               std::to_string(available) + " windows of " +
                                               std::to_string(opts.window) + "; " + std::to_string(opts.tokens) +
                                               " calibration tokens need " + std::to_string(needed)));
  // A seeded subset of the file's windows, kept in file order.
  std::vector<size_t> order = seededPermutation(static_cast<size_t>(available), opts.seed);
  order.resize(static_cast<size_t>(needed));
  std::sort(order.begin(), order.end());
  CalibrationSet set;
  set.source = "text";
  int64_t left = opts.tokens;
  for (size_t w : order) {
    const int64_t len = std::min(opts.window, left);
    auto begin = ids.begin() + static_cast<int64_t>(w) * opts.window;
    set.sequences.push_back({std::vector<TokenId>(begin, begin + len), std::vector<float>(len, 1.0f)});
    left -= len;
  }
  return set;
}

}  // namespace pareto
