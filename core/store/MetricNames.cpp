#include "store/MetricNames.h"

#include <array>
#include <utility>

namespace pareto::metric {

std::string canonicalMetricName(const std::string& kind, const std::string& stored) {
  // The workbench's own names for compress runs until both front ends recorded through core/jobs. "seconds"
  // is renamed only there: fidelity, drift and hessian runs store their own "seconds" under that name.
  static const std::array<std::pair<const char*, const char*>, 5> kCompressRenames = {{
      {"linear_bpw", kLinearBitsPerWeight},
      {"model_bpw", kModelBitsPerWeight},
      {"dense_linear_bpw", kDenseLinearBitsPerWeight},
      {"dense_decode_nll", kDenseDecodeNll},
      {"seconds", kSeconds},
  }};
  if (kind == "compress")
    for (const auto& [old, today] : kCompressRenames)
      if (stored == old) return today;
  return stored;
}

void addStoredMetric(std::map<std::string, double>& metrics, const std::string& kind, const std::string& stored,
                     double value) {
  const std::string name = canonicalMetricName(kind, stored);
  if (name == stored || metrics.count(name) == 0) metrics[name] = value;
}

}  // namespace pareto::metric
