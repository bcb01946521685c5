#include "util/Error.h"

namespace pareto {

std::string fileMessage(const std::string& file, const std::string& what) { return file + ": " + what; }

}  // namespace pareto
